//! Non-private training on privatised targets that the DP-SGD trainer does not take
//! (multi-hot, soft, label likelihoods, real values), directly on `dpml-nn`: shuffled mini-batches, the mean of
//! the per-sample loss gradients, the configured optimizer and schedule. Privacy is not spent
//! here: the targets are already private and the features are public.

use dpml_data::Dataset;
use dpml_mechanisms::DpRng;
use dpml_nn::{BackwardMode, Sequential, Tensor, mse};

use super::error::{LabelDpError, config_err};
use super::targets::Targets;
use crate::dpsgd::ema::Ema;
use crate::dpsgd::{InputTransform, TrainConfig};

/// Records per forward pass when predicting.
const PREDICT_CHUNK: usize = 1024;

/// Copies records `idx` of `data`, transformed by `input`, into `x`.
pub(crate) fn gather(data: &Dataset, idx: &[usize], input: &InputTransform, x: &mut Tensor) {
    let d = data.n_features();
    x.reset(idx.len(), &data.record_shape);
    for (row, &i) in x.data_mut().chunks_exact_mut(d).zip(idx) {
        input.apply(data.row(i), row);
    }
}

/// Per-class binary cross-entropy on logits, summed over classes: ℓ = Σⱼ max(z,0) − z·t +
/// ln(1 + e^{−|z|}); gradient σ(z) − t. Returns the summed loss.
fn bce_with_logits(logits: &Tensor, targets: &[f32], grad: &mut Tensor) -> f64 {
    grad.reset(logits.batch(), &[logits.record_len()]);
    let mut loss = 0.0;
    for ((g, &z), &t) in grad.data_mut().iter_mut().zip(logits.data()).zip(targets) {
        loss += f64::from(z.max(0.0) - z * t + (-z.abs()).exp().ln_1p());
        *g = 1.0 / (1.0 + (-z).exp()) - t;
    }
    loss
}

/// Softmax cross-entropy against target distributions: ℓ = −Σⱼ tⱼ log softmax(z)ⱼ; gradient
/// softmax(z) − t. Returns the summed loss.
fn soft_cross_entropy(logits: &Tensor, targets: &[f32], grad: &mut Tensor) -> f64 {
    let k = logits.record_len();
    grad.reset(logits.batch(), &[k]);
    let mut loss = 0.0;
    for (i, (g, t)) in grad
        .data_mut()
        .chunks_exact_mut(k)
        .zip(targets.chunks_exact(k))
        .enumerate()
    {
        let z = logits.record(i);
        let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let lse = m + z.iter().map(|v| (v - m).exp()).sum::<f32>().ln();
        for ((gv, &zv), &tv) in g.iter_mut().zip(z).zip(t) {
            loss += f64::from(tv * (lse - zv));
            *gv = (zv - lse).exp() - tv;
        }
    }
    loss
}

/// Forward-corrected cross-entropy: ℓ = −log r with r = Σ_y c_y·softmax(z)_y, where c is the
/// record's label likelihood; gradient softmax(z)_j·(1 − c_j/r). Returns the summed loss.
fn likelihood_loss(logits: &Tensor, channel: &[f32], grad: &mut Tensor) -> f64 {
    let k = logits.record_len();
    grad.reset(logits.batch(), &[k]);
    let mut loss = 0.0;
    for (i, (g, c)) in grad
        .data_mut()
        .chunks_exact_mut(k)
        .zip(channel.chunks_exact(k))
        .enumerate()
    {
        let z = logits.record(i);
        let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        g.iter_mut()
            .zip(z)
            .for_each(|(gv, &zv)| *gv = (zv - m).exp());
        let sum: f32 = g.iter().sum();
        g.iter_mut().for_each(|gv| *gv /= sum);
        let r: f32 = g
            .iter()
            .zip(c)
            .map(|(s, c)| s * c)
            .sum::<f32>()
            .max(f32::MIN_POSITIVE);
        loss -= f64::from(r.ln());
        g.iter_mut()
            .zip(c)
            .for_each(|(gv, &cv)| *gv *= 1.0 - cv / r);
    }
    loss
}

/// Trains a fresh `cfg.model` with `outputs` outputs on `train`'s features and `targets`
/// (multi-hot, soft or values), calling `on_step(step, steps)` after every step.
///
/// Uses `cfg.model`, `hidden`, `epochs` (T = ⌈E·N/B⌉ steps of B shuffled records, reshuffled
/// every epoch), `batch_size`, `lr`, `optimizer`, `lr_schedule`, `weight_decay`, `normalize`
/// and `ema` (the returned model then holds the averaged parameters: on very noisy targets
/// the average of the iterates is far steadier than the last one).
///
/// # Errors
/// [`LabelDpError`] for a bad configuration, class targets (use the DP-SGD trainer), targets
/// whose length does not match the data, or an engine error.
pub fn fit(
    cfg: &TrainConfig,
    train: &Dataset,
    targets: &Targets,
    rng: &mut DpRng,
    on_step: &mut dyn FnMut(u64, u64),
) -> Result<(Sequential, InputTransform), LabelDpError> {
    cfg.validate()?;
    cfg.validate_data(train, None)?;
    let (outputs, values): (usize, &[f32]) = match targets {
        Targets::MultiHot { k, values }
        | Targets::Soft { k, values }
        | Targets::Likelihood { k, values } => (*k, values),
        Targets::Values(v) => (1, v),
        Targets::Classes(_) => {
            return Err(config_err(
                "class targets are trained by the DP-SGD trainer, not by fit",
            ));
        }
    };
    if values.len() != train.n * outputs {
        return Err(config_err(format!(
            "{} target values for {} records of {outputs} outputs",
            values.len(),
            train.n
        )));
    }
    let spec = cfg.model_for(train, outputs)?;
    let input = cfg.normalize.resolve(train)?;
    let mut model = Sequential::new(spec, rng)?;
    let mut optimizer = cfg.optimizer.build(cfg.weight_decay)?;
    let b = cfg.batch_size;
    let steps_per_epoch = train.n.div_ceil(b) as u64;
    let steps = (cfg.epochs * train.n as f64 / b as f64).ceil().max(1.0) as u64;
    let schedule = cfg.lr_schedule.to_nn(steps, steps_per_epoch);

    let mut order: Vec<usize> = (0..train.n).collect();
    let (mut x, mut y, mut grad, mut losses) = (
        Tensor::default(),
        Tensor::default(),
        Tensor::default(),
        Vec::new(),
    );
    let mut t_vals = Vec::with_capacity(b * outputs);
    let mut cursor = train.n;
    let mut ema = cfg.ema.map(|d| Ema::new(d, &model));
    for step in 0..steps {
        if cursor + b > train.n {
            shuffle(&mut order, rng);
            cursor = 0;
        }
        let idx = &order[cursor..cursor + b];
        cursor += b;
        gather(train, idx, &input, &mut x);
        t_vals.clear();
        idx.iter()
            .for_each(|&i| t_vals.extend_from_slice(&values[i * outputs..(i + 1) * outputs]));
        let out = model.forward(&x)?;
        match targets {
            Targets::MultiHot { .. } => {
                bce_with_logits(out, &t_vals, &mut grad);
            }
            Targets::Soft { .. } => {
                soft_cross_entropy(out, &t_vals, &mut grad);
            }
            Targets::Likelihood { .. } => {
                likelihood_loss(out, &t_vals, &mut grad);
            }
            _ => {
                y.reset(b, &[1]);
                y.data_mut().copy_from_slice(&t_vals);
                mse(out, &y, Some(&mut grad), &mut losses)?;
            }
        }
        // The engine back-propagates the SUM of per-sample losses; the mean is 1/B of it.
        let inv = 1.0 / b as f32;
        grad.data_mut().iter_mut().for_each(|g| *g *= inv);
        model.zero_grad();
        model.backward(&grad, BackwardMode::NonPrivate)?;
        let lr = schedule.lr(cfg.lr, usize::try_from(step).unwrap_or(usize::MAX));
        optimizer.step(&mut model, lr);
        if let Some(e) = ema.as_mut() {
            e.update(&mut model);
        }
        on_step(step + 1, steps);
    }
    if let Some(e) = ema.as_mut() {
        e.swap(&mut model);
    }
    Ok((model, input))
}

/// Fisher–Yates shuffle from the run's generator.
pub(crate) fn shuffle(v: &mut [usize], rng: &mut DpRng) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// The model's single output for every record of `data`, clamped to [lo, hi].
///
/// # Errors
/// [`LabelDpError::Nn`] when the records do not fit the model.
pub fn predict_values(
    model: &mut Sequential,
    input: &InputTransform,
    data: &Dataset,
    (lo, hi): (f32, f32),
) -> Result<Vec<f32>, LabelDpError> {
    let mut x = Tensor::default();
    let mut out = Vec::with_capacity(data.n);
    let all: Vec<usize> = (0..data.n).collect();
    for chunk in all.chunks(PREDICT_CHUNK) {
        gather(data, chunk, input, &mut x);
        let pred = model.forward(&x)?;
        out.extend(pred.data().iter().map(|v| v.clamp(lo, hi)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central differences of the summed loss (f32, h = 1e-2; the losses are smooth with
    /// curvature ≤ 1/4 per coordinate, so the truncation error is ≤ h²/24 and round-off
    /// ≈ 1e-7·|L|/h; tolerance 2e-3).
    fn check_grad(f: fn(&Tensor, &[f32], &mut Tensor) -> f64, targets: &[f32]) {
        let z = Tensor::from_vec(&[2, 3], vec![0.3, -1.2, 2.0, -0.5, 0.1, 0.7]).unwrap();
        let mut g = Tensor::default();
        f(&z, targets, &mut g);
        let mut scratch = Tensor::default();
        for i in 0..6 {
            let h = 1e-2;
            let mut zp = z.clone();
            zp.data_mut()[i] += h;
            let mut zm = z.clone();
            zm.data_mut()[i] -= h;
            let fd = (f(&zp, targets, &mut scratch) - f(&zm, targets, &mut scratch))
                / (2.0 * f64::from(h));
            assert!(
                (fd - f64::from(g.data()[i])).abs() < 2e-3,
                "coordinate {i}: {fd} vs {}",
                g.data()[i]
            );
        }
    }

    #[test]
    fn loss_gradients_match_finite_differences() {
        check_grad(bce_with_logits, &[1.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
        check_grad(soft_cross_entropy, &[0.2, 0.3, 0.5, 1.0, 0.0, 0.0]);
        check_grad(likelihood_loss, &[0.7, 0.15, 0.15, 0.5, 0.2, 0.5]);
    }

    #[test]
    fn the_returned_model_is_the_parameter_average_when_asked() {
        // Same seed, same iterates: a vanishing decay returns the last iterate exactly as
        // training without averaging does; decay 0.9 returns a model between the start and the
        // last iterate (the warmed-up average), which differs from both.
        let data = crate::test_data::synthetic(20, 2);
        let targets = Targets::Soft {
            k: 2,
            values: data
                .y
                .iter()
                .flat_map(|&c| [1.0 - c as f32, c as f32])
                .collect(),
        };
        let params = |ema: Option<f32>| {
            let cfg = TrainConfig {
                model: "logreg".into(),
                epochs: 20.0,
                batch_size: 5,
                physical_batch: 5,
                lr: 0.05,
                ema,
                ..TrainConfig::default()
            };
            let (m, _) = fit(&cfg, &data, &targets, &mut DpRng::seeded(4), &mut |_, _| {}).unwrap();
            m.params()
                .iter()
                .flat_map(|p| p.value.clone())
                .collect::<Vec<f32>>()
        };
        let (last, tiny, avg) = (params(None), params(Some(1e-9)), params(Some(0.9)));
        let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
        assert!(close(&last, &tiny), "{last:?} vs {tiny:?}");
        assert!(
            !close(&last, &avg),
            "the average equals the last iterate: {avg:?}"
        );
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<usize> = (0..100).collect();
        shuffle(&mut v, &mut DpRng::seeded(3));
        assert_ne!(v, (0..100).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..100).collect::<Vec<_>>());
    }
}
