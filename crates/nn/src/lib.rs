//! dpml-nn: the DP-SGD engine — f32 CPU tensors, layers that give per-sample gradient norms,
//! losses, optimizers and learning-rate schedules, and safetensors save/load.
//!
//! One training step is one forward and one backward pass:
//!
//! ```
//! use dpml_mechanisms::DpRng;
//! use dpml_nn::{BackwardMode, ClipConfig, ModelSpec, Optimizer, Sequential, Sgd, Tensor, cross_entropy};
//!
//! let mut rng = DpRng::seeded(0);
//! let spec = ModelSpec::named("mlp", &[4], 3, &[8])?;
//! let mut model = Sequential::new(spec, &mut rng)?;
//! let x = Tensor::from_vec(&[2, 4], vec![0.1, 0.2, 0.3, 0.4, -0.1, 0.0, 0.5, 1.0])?;
//! let labels = [0, 2];
//! let (mut grad, mut losses) = (Tensor::default(), Vec::new());
//! cross_entropy(model.forward(&x)?, &labels, Some(&mut grad), &mut losses)?;
//! model.zero_grad();
//! let norms = model.backward(&grad, BackwardMode::Private(ClipConfig::flat(1.0)?))?;
//! assert_eq!(norms.len(), 2);
//! // Here the DP-SGD loop adds N(0, σ²C²) noise to every grad and divides by q·N.
//! Sgd::new(0.9, false, 0.0)?.step(&mut model, 0.1);
//! # Ok::<(), dpml_nn::NnError>(())
//! ```
//!
//! In private mode the parameter gradients hold Σᵢ cᵢ gᵢ, the sum of per-sample gradients
//! clipped to norm C, formed without a second backward pass: ghost norms for Linear
//! (‖aᵢ‖²‖gᵢ‖²), ghost or materialised norms for Conv2d (whichever costs less, Li et al. 2021),
//! direct per-sample gradients for GroupNorm, then one weighted product per layer (Bu et al.
//! 2023).
//!
//! # GEMM choice
//! `matrixmultiply` (single-threaded, pure Rust) was measured against `gemm` 0.18 at the
//! per-sample shapes of the `cnn` model on this 2-core machine: 7.4 ms vs 8.1 ms per batch of
//! 256 for the conv GEMMs, within 10–30% of each other shape by shape, so the lighter crate won.
//! Parallelism is over samples (one contiguous share of the batch per rayon thread, each
//! running single-threaded GEMMs), which avoids oversubscription. Re-measured on a 2-core
//! AVX-512 Xeon with a one-off timing program (`gemm` 0.18 against `matrixmultiply` 0.3.11, one
//! core, the `cnn`'s five per-sample shapes and the MLP's two 784×512 products at batch 128):
//! `matrixmultiply` was 1.2–1.7× faster at six shapes and 2% slower at conv2's forward.
//! Both pack their operands on every call, which at a convolution's per-sample shapes costs as
//! much as the multiply-adds; on processors with AVX-512 or AVX2 the convolutions now use a
//! small product of our own that reads its operands in place (`kernels::broadcast_gemm`, 22%
//! faster private CNN steps on the Xeon) and `matrixmultiply` elsewhere.
//!
//! # Vector width
//! The binary targets any x86-64 processor, so the loops the compiler vectorises would use
//! 128-bit SSE2 only. The hot element-wise kernels (the convolution's unfold, max pooling,
//! the optimizers' updates, per-sample squared norms) are compiled for each SIMD level with
//! `multiversion` and the widest the processor has is chosen at run time. Results are the same
//! bit for bit on every path: Rust neither fuses a multiply and an add nor reorders a
//! floating-point sum on its own.
#![deny(missing_docs)]

pub mod arch;
pub mod error;
pub mod io;
mod kernels;
pub mod layers;
pub mod loss;
pub mod model;
pub mod optim;
pub mod param;
pub mod tensor;

pub use arch::{MODEL_NAMES, ModelSpec, check_model_name};
pub use error::{NnError, Result};
pub use io::{load, save};
pub use layers::{ConvNormMode, GradMode, Layer, LayerSpec};
pub use loss::{argmax_rows, count_correct, cross_entropy, mse};
pub use model::{BackwardMode, ClipConfig, Sequential};
pub use optim::{Adam, LrSchedule, Optimizer, OptimizerState, Sgd};
pub use param::Param;
pub use tensor::Tensor;
