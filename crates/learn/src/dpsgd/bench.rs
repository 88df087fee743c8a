//! Throughput of DP-SGD against the same engine without privacy, measured in one run on the
//! same data: `dpml bench dpsgd`.
//!
//! The data are synthetic (uniform pixels, uniform labels) records of MNIST's shape
//! `[1, 28, 28]` with 10 classes — the speed of a step does not depend on pixel values — with
//! N = 16·B records so that q = 1/16. Each mode runs the full DP-SGD step: Poisson
//! sampling, forward, backward (private: per-sample norms, clipping, clipped sum), noise
//! (private: σ = 1, C = 1; floating-point Gaussian or exact discrete Gaussian), division and an
//! SGD update (lr 0.05, momentum 0.9). Each mode runs [`REPEATS`] rounds, each from a fresh
//! model after [`WARMUP_STEPS`] untimed steps, and the median of its rounds is reported. The
//! three modes' rounds run side by side: their steps alternate in slices of at most
//! [`SLICE_STEPS`], the mode that goes first turning from slice to slice, so that slow phases
//! of a shared machine, which last from a fraction of a second to minutes, hit all modes alike.

use std::time::Instant;

use dpml_data::Dataset;
use dpml_mechanisms::DpRng;
use dpml_nn::{ClipConfig, ModelSpec, Sequential, Sgd};
use serde::Serialize;

use super::collective::Solo;
use super::error::{Result, config_err};
use super::noise::Noise;
use super::normalize::InputTransform;
use super::sampler::{PoissonSampler, SamplingKey};
use super::step::Stepper;

/// Timed rounds per mode; the median is reported.
pub const REPEATS: usize = 3;
/// Timed rounds in all: [`REPEATS`] of each of the three modes.
pub const ROUNDS: usize = 3 * REPEATS;
/// Untimed steps before each timed round.
pub const WARMUP_STEPS: usize = 2;
/// Most steps of one mode in a row. Rounds of whole modes one after another (a second or
/// more each) let the 2-core AMD EPYC's swings of speed fall on one mode: private /
/// non-private of the MLP ranged 0.80–0.99 over nine runs, and 0.85–0.89 over nine in slices
/// of 10 or 30 steps (runs of the two builds alternated). Each switch leaves the next
/// mode's buffers colder: in slices of 10 steps the CNN ran about 15% slower in every mode,
/// in slices of 30 no slower than in whole rounds.
pub const SLICE_STEPS: usize = 30;

/// The modes, in the order their rounds are reported.
const MODES: [Mode; 3] = [Mode::NonPrivate, Mode::Private, Mode::Exact];

/// Samples per second of each mode, and their ratio.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchResult {
    /// Architecture benchmarked.
    pub model: String,
    /// Expected (Poisson) batch size B.
    pub batch_size: usize,
    /// Timed steps per round.
    pub steps: usize,
    /// DP-SGD with floating-point Gaussian noise.
    pub private_samples_per_sec: f64,
    /// The same engine without clipping or noise.
    pub nonprivate_samples_per_sec: f64,
    /// private / non-private.
    pub ratio: f64,
    /// DP-SGD with exact discrete Gaussian noise.
    pub exact_noise_samples_per_sec: f64,
    /// Model parameters.
    pub parameters: usize,
    /// Floating-point operations of one record's training step, counted from the
    /// architecture ([`Sequential::train_flops_per_sample`]): 2·(multiply-adds) of its linear
    /// and convolution layers for the forward pass, as many for the weight gradients and again
    /// for the input gradients, less the first such layer's input gradient, which backward
    /// never computes. Per-sample norms, clipping and noise are not counted, so a private
    /// mode's achieved rate is the useful work it gets done.
    pub flops_per_sample: u64,
    /// `flops_per_sample` × samples per second of each mode, in GFLOP/s.
    pub achieved_gflops: ModeGflops,
}

/// GFLOP/s of each mode of [`BenchResult`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModeGflops {
    /// DP-SGD with floating-point Gaussian noise.
    pub private: f64,
    /// Without clipping or noise.
    pub nonprivate: f64,
    /// DP-SGD with exact discrete Gaussian noise.
    pub exact_noise: f64,
}

#[derive(Clone, Copy)]
enum Mode {
    NonPrivate,
    Private,
    Exact,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::NonPrivate => "non-private",
            Mode::Private => "private",
            Mode::Exact => "exact noise",
        }
    }
}

/// What [`bench_spec`] reports as it goes, for a progress display: a round of long steps can
/// take minutes, and the three modes' rounds end together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BenchEvent {
    /// A slice of timed steps ended.
    Steps {
        /// Timed steps taken so far, of every mode.
        done: usize,
        /// Timed steps in all: [`ROUNDS`] × the steps of a round.
        total: usize,
    },
    /// A timed round ended.
    Round(BenchRound),
}

/// One timed round of [`bench_spec`] as it ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchRound {
    /// Rounds ended so far, this one included.
    pub done: usize,
    /// Rounds in all ([`ROUNDS`]).
    pub total: usize,
    /// `"non-private"`, `"private"` or `"exact noise"`.
    pub mode: &'static str,
    /// This round's samples per second.
    pub samples_per_sec: f64,
}

/// Measures `model` (with `hidden` sizes for `mlp`) at expected batch size `batch_size` over
/// `steps` timed steps per round, calling `on_event` as each slice of steps and each round
/// ends.
///
/// # Errors
/// [`super::DpSgdError::InvalidConfig`] for `batch_size` or `steps` of 0;
/// [`super::DpSgdError::Nn`] for an unknown model.
pub fn bench(
    model: &str,
    hidden: &[usize],
    batch_size: usize,
    steps: usize,
    rng: &mut DpRng,
    on_event: &mut dyn FnMut(&BenchEvent),
) -> Result<BenchResult> {
    let spec = ModelSpec::named(model, &[1, 28, 28], 10, hidden)?;
    bench_spec(spec, batch_size, steps, rng, on_event)
}

/// [`bench()`] for an explicit architecture, on uniform synthetic records of its input shape
/// with uniform labels over its outputs.
///
/// # Errors
/// As [`bench()`]; [`super::DpSgdError::Nn`] when the layers do not chain.
pub fn bench_spec(
    spec: ModelSpec,
    batch_size: usize,
    steps: usize,
    rng: &mut DpRng,
    on_event: &mut dyn FnMut(&BenchEvent),
) -> Result<BenchResult> {
    if batch_size == 0 {
        return Err(config_err("batch_size must be >= 1, got 0"));
    }
    if steps == 0 {
        return Err(config_err("steps must be >= 1, got 0"));
    }
    // The model as built from the spec (with the layers chained), for its sizes.
    let probe = spec.check()?;
    let classes: usize = probe.output_shape().iter().product();
    let record: usize = spec.input_shape.iter().product();
    let values = (BATCHES as u128 * record as u128).saturating_mul(batch_size as u128);
    if values > MAX_SYNTHETIC_VALUES {
        return Err(config_err(format!(
            "batch_size {batch_size} is too large for the benchmark: its synthetic data \
             ({BATCHES} batches of records of {record} values) would hold {values} values, more \
             than 2^30"
        )));
    }
    let data = synthetic(BATCHES * batch_size, &spec.input_shape, classes, rng);
    let seed = rng.next_u64();
    let mut rates: [Vec<f64>; 3] = Default::default();
    let (parameters, flops_per_sample) = (probe.num_params(), probe.train_flops_per_sample());
    let (mut timed, total) = (0, ROUNDS.saturating_mul(steps));
    for _ in 0..REPEATS {
        let mut rounds = Vec::with_capacity(MODES.len());
        for mode in MODES {
            let mut round = Round::new(mode, &spec, &data, batch_size, seed)?;
            for _ in 0..WARMUP_STEPS {
                round.step(&data)?;
            }
            rounds.push(round);
        }
        for (slice, len) in slices(steps).enumerate() {
            for k in 0..rounds.len() {
                rounds[(slice + k) % MODES.len()].timed(&data, len)?;
                timed += len;
                on_event(&BenchEvent::Steps { done: timed, total });
            }
        }
        for (k, round) in rounds.iter().enumerate() {
            let rate = round.samples_per_sec();
            rates[k].push(rate);
            on_event(&BenchEvent::Round(BenchRound {
                done: rates.iter().map(Vec::len).sum(),
                total: ROUNDS,
                mode: round.mode.name(),
                samples_per_sec: rate,
            }));
        }
    }
    let [nonprivate, private, exact] = rates.map(median);
    let gflops = |rate: f64| rate * flops_per_sample as f64 / 1e9;
    Ok(BenchResult {
        model: spec.name,
        batch_size,
        steps,
        private_samples_per_sec: private,
        nonprivate_samples_per_sec: nonprivate,
        ratio: private / nonprivate,
        exact_noise_samples_per_sec: exact,
        parameters,
        flops_per_sample,
        achieved_gflops: ModeGflops {
            private: gflops(private),
            nonprivate: gflops(nonprivate),
            exact_noise: gflops(exact),
        },
    })
}

/// The lengths of the slices a round of `steps` steps is cut into: [`SLICE_STEPS`] each, the
/// last one shorter where `steps` is not a multiple of it.
fn slices(steps: usize) -> impl Iterator<Item = usize> {
    (0..steps)
        .step_by(SLICE_STEPS)
        .map(move |first| SLICE_STEPS.min(steps - first))
}

/// One round of one mode: its stepper from a fresh model, and the steps it has timed.
struct Round {
    mode: Mode,
    stepper: Stepper,
    rng: DpRng,
    /// Steps taken so far (the sampler's step number).
    t: u64,
    /// Samples and time of the timed steps.
    seen: usize,
    elapsed: std::time::Duration,
}

impl Round {
    /// `mode`'s stepper on a model of `spec` drawn from `seed` (the same model in every mode).
    fn new(
        mode: Mode,
        spec: &ModelSpec,
        data: &Dataset,
        batch_size: usize,
        seed: u64,
    ) -> Result<Self> {
        let mut rng = DpRng::seeded(seed);
        let net = Sequential::new(spec.clone(), &mut rng)?;
        let private = |exact| -> Result<_> {
            Ok((
                Noise::new(Some(1.0), 1.0, net.num_params(), exact)?,
                Some(ClipConfig::flat(1.0)?),
            ))
        };
        let (noise, clip) = match mode {
            Mode::NonPrivate => (Noise::None, None),
            Mode::Private => private(false)?,
            Mode::Exact => private(true)?,
        };
        let sampler = PoissonSampler::new(
            data.n,
            1.0 / BATCHES as f64,
            SamplingKey::from_rng(&mut rng),
        )?;
        let opt = Box::new(Sgd::new(0.9, false, 0.0)?);
        let stepper = Stepper::new(
            net,
            opt,
            sampler,
            noise,
            clip,
            2 * batch_size,
            InputTransform::IDENTITY,
        );
        Ok(Self {
            mode,
            stepper,
            rng,
            t: 0,
            seen: 0,
            elapsed: std::time::Duration::ZERO,
        })
    }

    /// One step, not timed; returns its batch size.
    fn step(&mut self, data: &Dataset) -> Result<usize> {
        let stats = self
            .stepper
            .step(data, 0.05, &mut self.rng, self.t, &Solo)?;
        self.t += 1;
        Ok(stats.batch)
    }

    /// `steps` timed steps.
    fn timed(&mut self, data: &Dataset, steps: usize) -> Result<()> {
        let tick = Instant::now();
        for _ in 0..steps {
            self.seen += self.step(data)?;
        }
        self.elapsed += tick.elapsed();
        Ok(())
    }

    /// Samples per second of the timed steps.
    fn samples_per_sec(&self) -> f64 {
        self.seen as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Batches of synthetic records the benchmark samples from (q = 1/16).
const BATCHES: usize = 16;

/// The most values (4 GiB of `f32`) the benchmark's synthetic records may hold: beyond that a
/// mistyped batch size would make the allocation abort the process instead of a clear error.
const MAX_SYNTHETIC_VALUES: u128 = 1 << 30;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `n` uniform-pixel records of shape `shape` with uniform labels over `classes` classes.
fn synthetic(n: usize, shape: &[usize], classes: usize, rng: &mut DpRng) -> Dataset {
    let d: usize = shape.iter().product();
    Dataset {
        name: format!("synthetic-{shape:?}"),
        x: (0..n * d).map(|_| rng.uniform_f64() as f32).collect(),
        n,
        record_shape: shape.to_vec(),
        y: (0..n).map(|_| rng.below(classes as u64) as u32).collect(),
        n_classes: classes,
        feature_names: (0..d).map(|i| format!("px{i}")).collect(),
        class_names: (0..classes).map(|c| c.to_string()).collect(),
        feature_range: Some((0.0, 1.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_a_round_exactly() {
        for steps in [1, 29, 30, 31, 100, 150] {
            let lens: Vec<usize> = slices(steps).collect();
            assert_eq!(lens.iter().sum::<usize>(), steps, "{steps}: {lens:?}");
            assert_eq!(lens.len(), steps.div_ceil(SLICE_STEPS), "{steps}: {lens:?}");
            assert!(lens.iter().all(|&l| (1..=SLICE_STEPS).contains(&l)));
        }
        assert_eq!(slices(0).count(), 0);
    }

    #[test]
    fn bench_reports_all_modes_and_refuses_bad_sizes() {
        // 35 steps a round: two slices of each mode's round (30 and 5 steps).
        let mut events = Vec::new();
        let r = bench("logreg", &[], 8, 35, &mut DpRng::seeded(0), &mut |e| {
            events.push(*e)
        })
        .unwrap();
        // Every slice of every mode reported as it ended, the timed steps counted up to all.
        let steps: Vec<(usize, usize)> = (events.iter())
            .filter_map(|e| match e {
                BenchEvent::Steps { done, total } => Some((*done, *total)),
                BenchEvent::Round(_) => None,
            })
            .collect();
        assert_eq!(steps.len(), ROUNDS * 2);
        assert!(steps.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(steps.iter().all(|&(_, total)| total == ROUNDS * 35));
        assert_eq!(steps.last().map(|s| s.0), Some(ROUNDS * 35));
        let rounds: Vec<BenchRound> = (events.iter())
            .filter_map(|e| match e {
                BenchEvent::Round(r) => Some(*r),
                BenchEvent::Steps { .. } => None,
            })
            .collect();
        // Every round reported as it ended, in order, each mode REPEATS times, and the medians
        // are the reported rounds'.
        assert_eq!(rounds.len(), ROUNDS);
        assert!(
            rounds
                .iter()
                .enumerate()
                .all(|(i, r)| r.done == i + 1 && r.total == ROUNDS)
        );
        let rates = |mode: &str| -> Vec<f64> {
            (rounds.iter().filter(|r| r.mode == mode))
                .map(|r| r.samples_per_sec)
                .collect()
        };
        assert_eq!(median(rates("private")), r.private_samples_per_sec);
        assert_eq!(median(rates("non-private")), r.nonprivate_samples_per_sec);
        assert_eq!(median(rates("exact noise")), r.exact_noise_samples_per_sec);
        assert!(r.private_samples_per_sec > 0.0 && r.nonprivate_samples_per_sec > 0.0);
        assert!(r.exact_noise_samples_per_sec > 0.0);
        assert!((r.ratio - r.private_samples_per_sec / r.nonprivate_samples_per_sec).abs() < 1e-12);
        assert_eq!(r.parameters, 7850);
        // logreg: one 784 → 10 linear layer, 2·7840 FLOPs forward and as many for the weight
        // gradient; no input gradient (nothing upstream learns).
        assert_eq!(r.flops_per_sample, 2 * 2 * 7840);
        let want = r.private_samples_per_sec * 31_360.0 / 1e9;
        assert!((r.achieved_gflops.private - want).abs() <= 1e-12 * want);
        assert!(r.achieved_gflops.nonprivate > 0.0 && r.achieved_gflops.exact_noise > 0.0);
        assert!(
            bench("logreg", &[], 0, 2, &mut DpRng::seeded(0), &mut |_| {})
                .unwrap_err()
                .to_string()
                .contains("batch_size")
        );
        // 16 batches of 2^17 records of 784 values: beyond 2^30 values, refused before any
        // allocation (the process aborted on it before).
        let huge = bench(
            "logreg",
            &[],
            1 << 17,
            2,
            &mut DpRng::seeded(0),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(huge.to_string().contains("batch_size 131072"), "{huge}");
        assert!(
            bench("logreg", &[], 8, 0, &mut DpRng::seeded(0), &mut |_| {})
                .unwrap_err()
                .to_string()
                .contains("steps")
        );
    }
}
