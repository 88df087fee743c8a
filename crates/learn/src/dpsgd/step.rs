//! One DP-SGD step, shared by training and the benchmark:
//!
//! 1. draw a Poisson batch (each record with probability q);
//! 2. run it through the model in physical chunks of at most `physical_batch` records, each a
//!    forward and a private backward pass that ADDS the clipped per-sample gradients into the
//!    parameters' `grad` (virtual batching: clipping is per sample, so the accumulated sum is
//!    exactly the clipped sum of the whole batch, and memory depends only on the chunk size);
//! 3. add noise N(0, σ²C²) per coordinate to the clipped sum ([`super::noise`]), even when the
//!    batch is empty. The noise does not depend on the data ([`StepNoise`]): float noise is
//!    written straight into the gradient buffers before step 2, which adds the clipped sums
//!    onto it; exact noise is drawn and added (with rounding) after step 2;
//! 4. divide by the EXPECTED batch size q·N (not the realised one, which would leak the batch
//!    size) and let the optimizer step.
//!
//! Non-private steps skip clipping and noise and divide by the realised batch size.
//!
//! In a data-parallel run ([`super::collective`]) each process does step 2 on its share of the
//! batch; the partial sums meet on the root, which adds the noise once (step 3) and sends the
//! noisy sum to every process, and every process does step 4 identically.

use dpml_data::Dataset;
use dpml_mechanisms::DpRng;
use dpml_nn::{BackwardMode, ClipConfig, Optimizer, Sequential, Tensor};

use super::batch::gather;
use super::collective::{Collective, flatten_grads, unflatten_grads};
use super::error::Result;
use super::noise::{Noise, StepNoise};
use super::normalize::InputTransform;
use super::objective::Objective;
use super::sampler::{PoissonSampler, Shard};
use super::step_hook::{StepContext, StepHook};

/// Values of per-record state (8 Mi `f32`, 32 MiB) that one physical chunk keeps at most.
/// Models that carry much per record between the forward and backward passes (`cnn`: its
/// convolutions' unfolded inputs and per-sample gradients, about 52k values a record) run
/// faster in chunks that stay nearer the caches: on the 2-core Xeon, at batch 256, chunks of
/// 96–160 records made private CNN steps 7–12% faster than the whole batch at once, while the
/// MLP (about 3k values a record) is fastest in one chunk, which this bound leaves it.
const CHUNK_FLOATS: usize = 1 << 23;

/// The most records a physical chunk of `model` holds by [`CHUNK_FLOATS`] (at least 32).
fn cache_friendly_chunk(model: &Sequential) -> usize {
    (CHUNK_FLOATS / model.floats_per_record().max(1)).max(32)
}

/// Runs `work` on a thread of rayon's pool and waits for it (at once, in place, on a pool
/// thread). Each parallel loop started from a thread outside the pool (the program's main
/// thread) wakes the pool and puts the caller to sleep until it ends, a dozen times a step;
/// started from inside, the loops share work with the other threads directly. A one-process
/// step runs wholly on the pool: on the 2-core Xeon, MLP steps ran 9–13% faster and CNN
/// steps 7%. A multi-process step runs its phases on the pool and its exchanges on the
/// calling thread (MPI may expect them from the thread that initialised it).
fn on_pool<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| work())
}

/// [`on_pool`], with the pool's other threads kept awake until `work` ends: each waits for
/// work by taking it from the pool's queues in a loop (`rayon::yield_now`) instead of going to
/// sleep. A step starts a dozen parallel loops with short serial stretches between them, long
/// enough for idle threads to fall asleep, and waking one costs a system call and a wait each
/// time: on the 2-core Xeon, steps ran 7–15% faster awake (MLP and CNN, private and not). The
/// waiting threads spin, as OpenMP's do by default, but only while the step runs, and they
/// yield the core to other processes now and then.
///
/// Only a step started from outside the pool keeps it awake: one started on a pool thread runs
/// beside other work of the pool (an audit trains many models at once), which keeps the
/// threads busy anyway. A keeper that has found nothing to do for [`KEEPER_IDLE_LIMIT`]
/// returns: a keeper that ended up above a piece of the step's own work on its thread's stack
/// (rayon runs stolen jobs on top of a waiting one) would otherwise wait for a step that waits
/// for it.
fn on_pool_awake<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;
    /// Idle polls between two yields of the core to the operating system.
    const POLLS_PER_OS_YIELD: u32 = 64;
    if rayon::current_thread_index().is_some() {
        return on_pool(work);
    }
    let done = AtomicBool::new(false);
    on_pool(|| {
        let worker = rayon::current_thread_index();
        let keep_awake = || {
            // The step's own thread, picking a keeper up while it waits for a piece of its
            // work, returns at once.
            if rayon::current_thread_index() == worker {
                return;
            }
            let (mut idle, mut since) = (0u32, Instant::now());
            while !done.load(Ordering::Acquire) {
                if rayon::yield_now() == Some(rayon::Yield::Executed) {
                    (idle, since) = (0, Instant::now());
                    continue;
                }
                idle += 1;
                if idle.is_multiple_of(POLLS_PER_OS_YIELD) {
                    if since.elapsed() > KEEPER_IDLE_LIMIT {
                        return;
                    }
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        };
        rayon::scope(|s| {
            for _ in 1..rayon::current_num_threads() {
                s.spawn(|_| keep_awake());
            }
            let result = work();
            done.store(true, Ordering::Release);
            result
        })
    })
}

/// How long a thread kept awake by [`on_pool_awake`] polls without finding work before it
/// stops (far longer than the serial stretches of a step, far shorter than a step's work).
const KEEPER_IDLE_LIMIT: std::time::Duration = std::time::Duration::from_millis(1);

/// What one step saw (on private data: diagnostics for the operator, not a private release).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct StepStats {
    /// Realised batch size.
    pub batch: usize,
    /// Sum of the per-sample losses before the update.
    pub loss_sum: f64,
    /// Records classified correctly (regression: predicted within 0.5 of the label value)
    /// before the update.
    pub correct: usize,
}

/// The parts of a step that persist between steps (buffers are reused).
pub(crate) struct Stepper {
    pub model: Sequential,
    optimizer: Box<dyn Optimizer + Send>,
    sampler: PoissonSampler,
    noise: StepNoise,
    mode: BackwardMode,
    physical_batch: usize,
    input: InputTransform,
    /// The layer the gathered records enter (> 0 when they were mapped through the model's
    /// fixed prefix before training).
    start_layer: usize,
    idx: Vec<usize>,
    /// Scratch of the sampler: one bit per record.
    sample_bits: Vec<u64>,
    x: Tensor,
    labels: Vec<usize>,
    grad: Tensor,
    losses: Vec<f32>,
    /// Cross-entropy on classes, or MSE on label values.
    objective: Objective,
    /// Scratch: the regression targets of a chunk.
    targets: Tensor,
    /// Scratch: the flattened gradient sent between processes.
    flat: Vec<f32>,
}

impl Stepper {
    /// A stepper for `model`. `clip` is `None` for non-private training.
    pub(crate) fn new(
        model: Sequential,
        optimizer: Box<dyn Optimizer + Send>,
        sampler: PoissonSampler,
        noise: Noise,
        clip: Option<ClipConfig>,
        physical_batch: usize,
        input: InputTransform,
    ) -> Self {
        let mode = clip.map_or(BackwardMode::NonPrivate, BackwardMode::Private);
        let chunk = cache_friendly_chunk(&model);
        Self {
            noise: StepNoise::new(noise, &model),
            model,
            optimizer,
            sampler,
            mode,
            physical_batch: physical_batch.min(chunk).max(1),
            input,
            start_layer: 0,
            idx: Vec::new(),
            sample_bits: Vec::new(),
            x: Tensor::default(),
            labels: Vec::new(),
            grad: Tensor::default(),
            losses: Vec::new(),
            objective: Objective::Classification,
            targets: Tensor::default(),
            flat: Vec::new(),
        }
    }

    /// The same stepper training for `objective` (default: classification).
    pub(crate) fn with_objective(mut self, objective: Objective) -> Self {
        self.objective = objective;
        self
    }

    /// The same stepper fed records that were already mapped through the model's first
    /// `start_layer` (parameter-free) layers, e.g. by `super::batch::map_through_prefix`.
    pub(crate) fn starting_at(mut self, start_layer: usize) -> Self {
        self.start_layer = start_layer;
        self
    }

    /// The optimizer (to save or restore its state).
    pub(crate) fn optimizer_mut(&mut self) -> &mut (dyn Optimizer + Send) {
        self.optimizer.as_mut()
    }

    /// Step number `t` (from 0) at learning rate `lr` on its Poisson batch of `data`, this
    /// process's share of it when `comm` has several processes. `rng` draws the noise (on the
    /// root only).
    ///
    /// # Errors
    /// [`super::DpSgdError::Nn`] from the engine (shapes were checked before training).
    pub(crate) fn step(
        &mut self,
        data: &Dataset,
        lr: f32,
        rng: &mut DpRng,
        t: u64,
        comm: &dyn Collective,
    ) -> Result<StepStats> {
        if comm.size() == 1 {
            return self.step_solo(data, lr, rng, t, None);
        }
        self.sample(t, comm);
        self.apply(data, lr, rng, comm, None)
    }

    /// As [`Stepper::step`] in one process, calling `hook` around the noise (private steps
    /// only), with `ctx.sampling_rate` filled in from the sampler.
    pub(crate) fn step_hooked(
        &mut self,
        data: &Dataset,
        lr: f32,
        rng: &mut DpRng,
        t: u64,
        ctx: StepContext,
        hook: &mut dyn StepHook,
    ) -> Result<StepStats> {
        self.step_solo(data, lr, rng, t, Some((ctx, hook)))
    }

    /// A one-process step, wholly on one pool thread (its parallel loops start there at no
    /// cost), with `hook` as in [`Stepper::step_hooked`].
    fn step_solo(
        &mut self,
        data: &Dataset,
        lr: f32,
        rng: &mut DpRng,
        t: u64,
        hook: Option<(StepContext, &mut dyn StepHook)>,
    ) -> Result<StepStats> {
        let solo = super::collective::Solo;
        on_pool_awake(|| {
            self.sample(t, &solo);
            let sampling_rate = self.sampler.sampling_rate();
            let hook = hook.map(|(ctx, h)| {
                let ctx = StepContext {
                    sampling_rate,
                    ..ctx
                };
                (ctx, h)
            });
            self.apply(data, lr, rng, &solo, hook)
        })
    }

    /// This process's share of step `t`'s Poisson batch into `self.idx`.
    fn sample(&mut self, t: u64, comm: &dyn Collective) {
        let shard = Shard {
            rank: comm.rank(),
            ranks: comm.size(),
        };
        on_pool(|| {
            self.sampler
                .sample_shard_with(t, shard, &mut self.idx, &mut self.sample_bits);
        });
    }

    /// Steps 2–4 of the module docs on the batch already in `self.idx`.
    fn apply(
        &mut self,
        data: &Dataset,
        lr: f32,
        rng: &mut DpRng,
        comm: &dyn Collective,
        mut hook: Option<(StepContext, &mut dyn StepHook)>,
    ) -> Result<StepStats> {
        let mut stats = StepStats {
            batch: self.idx.len(),
            ..StepStats::default()
        };
        let comm_is_root = comm.is_root();
        let mut noise = std::mem::take(&mut self.noise);
        // Float noise goes into the gradient buffers first (the clipped sums then add onto
        // it); exact noise, which is rounded with the sum, is drawn and added after it. A hook
        // sees the sum before the noise, so hooked steps add float noise after too.
        let noise_first = comm_is_root && hook.is_none() && noise.goes_first();
        if comm_is_root {
            noise.draw(rng);
        }
        let summed =
            on_pool(|| self.accumulate(data, &mut stats, noise_first.then_some(&mut noise)));
        self.noise = noise;
        summed?;
        if comm.size() > 1 {
            self.combine(&mut stats, comm);
        }
        let divisor = match self.noise.kind {
            Noise::None if stats.batch == 0 => return Ok(stats),
            Noise::None => stats.batch as f64,
            _ => self.sampler.expected_batch(),
        };
        let private = !matches!(self.noise.kind, Noise::None);
        if let (true, Some((ctx, h))) = (private, hook.as_mut()) {
            h.before_noise(ctx, &mut self.model, rng);
        }
        if comm_is_root {
            on_pool(|| self.noise.add(&mut self.model));
        }
        if comm.size() > 1 {
            // Every process continues from the root's noisy sum, bit for bit.
            flatten_grads(&self.model, &mut self.flat);
            comm.broadcast_f32(&mut self.flat);
            unflatten_grads(&mut self.model, &self.flat);
        }
        if let (true, Some((ctx, h))) = (private, hook.as_mut()) {
            h.after_noise(ctx, &mut self.model);
        }
        on_pool(|| {
            self.optimizer
                .step_scaled(&mut self.model, lr, (1.0 / divisor) as f32);
        });
        Ok(stats)
    }

    /// Step 2 of the module docs: the clipped (or, non-private, plain) gradient sum of the
    /// batch in `self.idx` into the parameters' `grad`, chunk by chunk, on top of
    /// `noise_first`'s noise when given, else on zeros.
    ///
    /// The noise is written whole before the first chunk, not beside its forward pass in a
    /// `rayon::join` as before: on the 2-core Xeon's MLP (407k coordinates of noise a step,
    /// more work than that forward pass) private / non-private went from 0.78 to 0.82–0.83
    /// (medians of 8 interleaved rounds, two runs); the CNN's did not move.
    fn accumulate(
        &mut self,
        data: &Dataset,
        stats: &mut StepStats,
        noise_first: Option<&mut StepNoise>,
    ) -> Result<()> {
        match noise_first {
            Some(noise) => noise.write(&mut self.model),
            None => self.model.zero_grad(),
        }
        // Dropout draws per-sample masks only inside the step; evaluation sees the identity.
        self.model.set_training(true);
        // Equal chunks of at most `physical_batch` (a batch of 256 under a bound of 160 runs as
        // 128 + 128, not 160 + 96): the buffers keep their size from chunk to chunk and step
        // to step instead of shrinking and regrowing (zero-filling) twice a step.
        let parts = self.idx.len().div_ceil(self.physical_batch).max(1);
        let size = self.idx.len().div_ceil(parts).max(1);
        let idx = std::mem::take(&mut self.idx);
        let result = idx.chunks(size).try_for_each(|chunk| -> Result<()> {
            self.forward_chunk(data, chunk, stats)?;
            self.model.backward(&self.grad, self.mode)?;
            Ok(())
        });
        self.idx = idx;
        self.model.set_training(false);
        result
    }

    /// Gathers `chunk`'s records, runs them forward and leaves the loss's gradient in
    /// `self.grad`.
    fn forward_chunk(
        &mut self,
        data: &Dataset,
        chunk: &[usize],
        stats: &mut StepStats,
    ) -> Result<()> {
        gather(
            data,
            chunk.len(),
            |j| chunk[j],
            &self.input,
            &mut self.x,
            &mut self.labels,
        );
        let logits = self
            .model
            .forward_from_taking(self.start_layer, &mut self.x)?;
        stats.correct += self.objective.loss(
            logits,
            &self.labels,
            Some(&mut self.grad),
            &mut self.losses,
            &mut self.targets,
        )?;
        stats.loss_sum += self.losses.iter().map(|&l| f64::from(l)).sum::<f64>();
        Ok(())
    }

    fn combine(&mut self, stats: &mut StepStats, comm: &dyn Collective) {
        flatten_grads(&self.model, &mut self.flat);
        comm.sum_to_root_f32(&mut self.flat);
        unflatten_grads(&mut self.model, &self.flat);
        let mut s = [stats.batch as f64, stats.loss_sum, stats.correct as f64];
        comm.sum_to_root_f64(&mut s);
        let mut bits = s.map(f64::to_bits);
        comm.broadcast_u64(&mut bits);
        let [batch, loss_sum, correct] = bits.map(f64::from_bits);
        *stats = StepStats {
            batch: batch as usize,
            loss_sum,
            correct: correct as usize,
        };
    }

    /// Test hook: one step on the given batch instead of a Poisson draw.
    #[cfg(test)]
    pub(crate) fn step_on(
        &mut self,
        data: &Dataset,
        batch: &[usize],
        lr: f32,
        rng: &mut DpRng,
    ) -> Result<StepStats> {
        self.idx.clear();
        self.idx.extend_from_slice(batch);
        self.apply(data, lr, rng, &super::collective::Solo, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpml_nn::{ModelSpec, Sgd};

    use crate::dpsgd::noise::GridNoise;
    use crate::dpsgd::sampler::SamplingKey;

    fn tiny_data(n: usize) -> Dataset {
        Dataset {
            name: "tiny".into(),
            x: (0..n * 4).map(|i| ((i * 7) % 11) as f32 / 11.0).collect(),
            n,
            record_shape: vec![4],
            y: (0..n).map(|i| (i % 3) as u32).collect(),
            n_classes: 3,
            feature_names: (0..4).map(|i| format!("f{i}")).collect(),
            class_names: (0..3).map(|i| format!("c{i}")).collect(),
            feature_range: None,
        }
    }

    fn stepper(noise: Noise, n: usize, q: f64, physical: usize, seed: u64) -> Stepper {
        let spec = ModelSpec::named("mlp", &[4], 3, &[16]).unwrap();
        let model = Sequential::new(spec, &mut DpRng::seeded(seed)).unwrap();
        let clip = match noise {
            Noise::None => None,
            _ => Some(ClipConfig::flat(1.0).unwrap()),
        };
        Stepper::new(
            model,
            Box::new(Sgd::new(0.0, false, 0.0).unwrap()),
            PoissonSampler::new(n, q, SamplingKey::from_rng(&mut DpRng::seeded(seed))).unwrap(),
            noise,
            clip,
            physical,
            InputTransform::IDENTITY,
        )
    }

    /// Every parameter value of `m`, in order.
    pub(super) fn values(m: &Sequential) -> Vec<f32> {
        m.params()
            .iter()
            .flat_map(|p| p.value.iter().copied())
            .collect()
    }

    /// On a zero gradient (an empty batch: the clipped sum is exactly 0) the update with lr 1
    /// and plain SGD is −noise/(q·N), so each coordinate's change has sd σ·C/(q·N).
    /// With m = d·steps pooled coordinates the sample sd has relative standard error
    /// ≈ 1/√(2m); we allow 5 of those.
    fn check_noise_std(noise: Noise, want_sd: f64) {
        let (n, q) = (100, 0.25);
        let data = tiny_data(n);
        let mut s = stepper(noise, n, q, 8, 1);
        let mut rng = DpRng::seeded(2);
        let mut sum_sq = 0.0;
        let mut sum = 0.0;
        let mut m = 0usize;
        for _ in 0..20 {
            let before = values(&s.model);
            s.step_on(&data, &[], 1.0, &mut rng).unwrap();
            for (a, b) in values(&s.model).iter().zip(&before) {
                let d = f64::from(a - b);
                sum += d;
                sum_sq += d * d;
                m += 1;
            }
        }
        let sd = (sum_sq / m as f64 - (sum / m as f64).powi(2)).sqrt();
        let tol = 5.0 / (2.0 * m as f64).sqrt();
        assert!(
            (sd / want_sd - 1.0).abs() < tol,
            "sd {sd} vs {want_sd} (m = {m}, tol {tol})"
        );
        // The mean change is 0 within 5 standard errors.
        assert!((sum / m as f64).abs() < 5.0 * want_sd / (m as f64).sqrt());
    }

    #[test]
    fn noise_std_on_a_zero_gradient_is_sigma_c_over_qn() {
        let (sigma, c, qn) = (1.3, 1.0, 25.0);
        check_noise_std(Noise::Gaussian { std: sigma * c }, sigma * c / qn);
        // Exact noise: the same with the adjusted sensitivity C + g√d (d = 4·16+16+16·3+3 = 131).
        let grid = GridNoise::new(sigma, c, 131).unwrap();
        let want = sigma * grid.sensitivity() / qn;
        check_noise_std(Noise::Exact(grid), want);
    }

    /// Virtual batching is exact: the same batch in chunks of 3 or all at once gives the same
    /// update (up to f32 summation order).
    #[test]
    fn physical_chunks_do_not_change_the_update() {
        let data = tiny_data(40);
        let batch: Vec<usize> = (0..17).map(|i| i * 2).collect();
        let clip = ClipConfig::flat(0.5).unwrap();
        let run = |physical: usize| {
            let mut s = stepper(Noise::None, 40, 0.5, physical, 4);
            s.mode = BackwardMode::Private(clip);
            s.step_on(&data, &batch, 0.1, &mut DpRng::seeded(0))
                .unwrap();
            values(&s.model)
        };
        let (a, b) = (run(3), run(64));
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-6, "{x} vs {y}");
        }
    }

    /// Float noise written into the gradient buffers before the clipped sum (an unhooked step)
    /// gives the update of the same noise added after the sum (a hooked step, whose hook must
    /// see the sum alone), up to f32 summation order: neither the noise nor any chunk's sum is
    /// lost or counted twice. Physical chunks of 3 put the noise under the first of 6.
    #[test]
    fn float_noise_written_first_equals_noise_added_after() {
        struct Watch(usize);
        impl StepHook for Watch {
            fn before_noise(&mut self, _: &StepContext, _: &mut Sequential, _: &mut DpRng) {
                self.0 += 1;
            }
            fn after_noise(&mut self, _: &StepContext, _: &mut Sequential) {}
        }
        let data = tiny_data(40);
        let batch: Vec<usize> = (0..17).map(|i| i * 2).collect();
        let noise = Noise::Gaussian { std: 0.7 };
        let mut first = stepper(noise.clone(), 40, 0.5, 3, 5);
        let mut after = stepper(noise, 40, 0.5, 3, 5);
        let before = values(&first.model);
        first
            .step_on(&data, &batch, 0.1, &mut DpRng::seeded(6))
            .unwrap();
        let mut watch = Watch(0);
        let ctx = StepContext {
            step: 0,
            sampling_rate: 0.5,
            max_grad_norm: 1.0,
            noise_multiplier: 0.7,
        };
        after.idx = batch.clone();
        after
            .apply(
                &data,
                0.1,
                &mut DpRng::seeded(6),
                &super::super::collective::Solo,
                Some((ctx, &mut watch)),
            )
            .unwrap();
        assert_eq!(watch.0, 1, "the hooked step adds its noise after the sum");
        let (a, b) = (values(&first.model), values(&after.model));
        for ((x, y), w) in a.iter().zip(&b).zip(&before) {
            assert!((x - y).abs() < 1e-5, "{x} vs {y}");
            assert!((x - w).abs() > 1e-7, "parameter unchanged: no noise");
        }
    }

    #[test]
    fn non_private_empty_batch_leaves_the_model_unchanged() {
        let data = tiny_data(10);
        let mut s = stepper(Noise::None, 10, 0.5, 4, 3);
        let before = values(&s.model);
        let stats = s.step_on(&data, &[], 0.1, &mut DpRng::seeded(0)).unwrap();
        assert_eq!(stats.batch, 0);
        assert_eq!(values(&s.model), before);
    }
}

#[cfg(test)]
#[path = "step_mechanism_tests.rs"]
mod mechanism_tests;
