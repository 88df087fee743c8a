//! Losses with per-sample values: softmax cross-entropy (stable log-sum-exp) and mean squared
//! error. Gradients are of the SUM of per-sample losses, i.e. row i of the gradient is sample
//! i's own loss gradient — what per-sample clipping needs. (A non-private loop divides by the
//! batch size itself.)

use crate::error::{NnError, Result, invalid};
use crate::tensor::Tensor;

fn check_batch(what: &str, outputs: &Tensor, n: usize) -> Result<()> {
    if outputs.shape().len() != 2 || outputs.batch() != n {
        return Err(NnError::Shape(format!(
            "{what} needs outputs of shape [n, k] with n = {n} targets, got {:?}",
            outputs.shape()
        )));
    }
    Ok(())
}

/// Softmax cross-entropy of `logits` `[n, k]` against class `labels`: writes each sample's
/// loss −log softmax(zᵢ)\[yᵢ\] into `losses` and, when `grad` is given, the gradient
/// softmax(zᵢ) − onehot(yᵢ) into it. Returns the mean loss.
///
/// # Errors
/// [`NnError::Shape`] when shapes disagree, [`NnError::InvalidParameter`] for a label ≥ k.
pub fn cross_entropy(
    logits: &Tensor,
    labels: &[usize],
    grad: Option<&mut Tensor>,
    losses: &mut Vec<f32>,
) -> Result<f32> {
    check_batch("cross-entropy", logits, labels.len())?;
    let k = logits.record_len();
    if let Some(&bad) = labels.iter().find(|&&y| y >= k) {
        return Err(invalid(format!("label {bad} out of range for {k} classes")));
    }
    losses.clear();
    let mut gbuf = grad;
    if let Some(g) = gbuf.as_deref_mut() {
        g.reset(labels.len(), &[k]);
    }
    for (i, &y) in labels.iter().enumerate() {
        let z = logits.record(i);
        let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = z.iter().map(|v| (v - m).exp()).sum();
        let lse = m + sum.ln();
        losses.push(lse - z[y]);
        if let Some(g) = gbuf.as_deref_mut() {
            let gi = &mut g.data_mut()[i * k..(i + 1) * k];
            for (gv, zv) in gi.iter_mut().zip(z) {
                *gv = (zv - lse).exp();
            }
            gi[y] -= 1.0;
        }
    }
    Ok(mean(losses))
}

/// Mean squared error per sample, ℓᵢ = (1/k) Σⱼ (ŷᵢⱼ − tᵢⱼ)², of `pred` `[n, k]` against
/// `targets` of the same shape; gradient 2(ŷᵢ − tᵢ)/k. Returns the mean loss.
///
/// # Errors
/// [`NnError::Shape`] when the shapes differ.
pub fn mse(
    pred: &Tensor,
    targets: &Tensor,
    grad: Option<&mut Tensor>,
    losses: &mut Vec<f32>,
) -> Result<f32> {
    check_batch("mse", pred, targets.batch())?;
    if pred.shape() != targets.shape() {
        return Err(NnError::Shape(format!(
            "mse: predictions {:?} vs targets {:?}",
            pred.shape(),
            targets.shape()
        )));
    }
    let k = pred.record_len();
    losses.clear();
    losses.extend((0..pred.batch()).map(|i| {
        pred.record(i)
            .iter()
            .zip(targets.record(i))
            .map(|(p, t)| (p - t) * (p - t))
            .sum::<f32>()
            / k as f32
    }));
    if let Some(g) = grad {
        g.reset(pred.batch(), &[k]);
        for ((gv, p), t) in g.data_mut().iter_mut().zip(pred.data()).zip(targets.data()) {
            *gv = 2.0 * (p - t) / k as f32;
        }
    }
    Ok(mean(losses))
}

fn mean(v: &[f32]) -> f32 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f32>() / v.len() as f32
    }
}

/// Index of the largest value of each row (the predicted class).
pub fn argmax_rows(logits: &Tensor) -> Vec<usize> {
    (0..logits.batch())
        .map(|i| {
            let z = logits.record(i);
            (0..z.len()).fold(0, |b, j| if z[j] > z[b] { j } else { b })
        })
        .collect()
}

/// Number of rows whose argmax equals the label.
pub fn count_correct(logits: &Tensor, labels: &[usize]) -> usize {
    argmax_rows(logits)
        .iter()
        .zip(labels)
        .filter(|(p, y)| p == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central differences of the summed loss; step 1e-2 in f64 is overkill, so we use f32
    /// with h = 1e-3: round-off ≈ 1e-6·|L|/h ≈ 1e-3 at |L| ≈ 5, hence tolerance 3e-3.
    fn fd_check(f: &dyn Fn(&Tensor) -> (f32, Tensor), x: &Tensor) {
        let (_, g) = f(x);
        let mut x = x.clone();
        let h = 1e-3;
        for j in 0..x.data().len() {
            let v = x.data()[j];
            x.data_mut()[j] = v + h;
            let up = f(&x).0;
            x.data_mut()[j] = v - h;
            let down = f(&x).0;
            x.data_mut()[j] = v;
            let fd = (up - down) / (2.0 * h);
            assert!(
                (fd - g.data()[j]).abs() < 3e-3,
                "coordinate {j}: {fd} vs {}",
                g.data()[j]
            );
        }
    }

    #[test]
    fn cross_entropy_gradient_matches_finite_differences() {
        let z = Tensor::from_vec(
            &[3, 4],
            (0..12).map(|i| (i as f32 * 0.7).sin() * 2.0).collect(),
        )
        .unwrap();
        let labels = [1, 3, 0];
        fd_check(
            &|z| {
                let (mut g, mut l) = (Tensor::default(), Vec::new());
                let m = cross_entropy(z, &labels, Some(&mut g), &mut l).unwrap();
                (m * 3.0, g)
            },
            &z,
        );
    }

    #[test]
    fn cross_entropy_is_stable_for_huge_logits() {
        let z = Tensor::from_vec(&[1, 3], vec![1000.0, 0.0, -1000.0]).unwrap();
        let mut l = Vec::new();
        cross_entropy(&z, &[1], None, &mut l).unwrap();
        assert!((l[0] - 1000.0).abs() < 1e-3, "{l:?}");
        cross_entropy(&z, &[0], None, &mut l).unwrap();
        assert!(l[0].abs() < 1e-6);
    }

    #[test]
    fn cross_entropy_refuses_bad_labels_and_shapes() {
        let z = Tensor::zeros(&[2, 3]);
        let mut l = Vec::new();
        assert!(
            cross_entropy(&z, &[0, 3], None, &mut l)
                .unwrap_err()
                .to_string()
                .contains("label 3")
        );
        assert!(cross_entropy(&z, &[0], None, &mut l).is_err());
    }

    #[test]
    fn mse_gradient_matches_finite_differences() {
        let t = Tensor::from_vec(&[2, 3], vec![0.5, -1.0, 2.0, 0.0, 1.0, -0.5]).unwrap();
        let p = Tensor::from_vec(&[2, 3], vec![0.1, 0.2, 0.3, -0.4, 0.5, 0.6]).unwrap();
        fd_check(
            &|p| {
                let (mut g, mut l) = (Tensor::default(), Vec::new());
                let m = mse(p, &t, Some(&mut g), &mut l).unwrap();
                (m * 2.0, g)
            },
            &p,
        );
    }

    /// Each sample's own loss (1/k)·Σⱼ(ŷᵢⱼ − tᵢⱼ)², and the mean of them returned.
    #[test]
    fn mse_per_sample_losses_are_each_records_own() {
        let p = Tensor::from_vec(&[3, 2], vec![1.0, 2.0, 0.0, 0.0, -1.0, 3.0]).unwrap();
        let t = Tensor::from_vec(&[3, 2], vec![1.0, 0.0, 0.5, -0.5, 1.0, 3.0]).unwrap();
        let mut l = Vec::new();
        let m = mse(&p, &t, None, &mut l).unwrap();
        assert_eq!(l, vec![2.0, 0.25, 2.0]);
        assert!((m - 4.25 / 3.0).abs() < 1e-6);
        let wrong = Tensor::zeros(&[3, 1]);
        assert!(mse(&p, &wrong, None, &mut l).is_err());
    }

    #[test]
    fn accuracy_helpers() {
        let z = Tensor::from_vec(&[2, 3], vec![0.0, 2.0, 1.0, 5.0, 0.0, 0.0]).unwrap();
        assert_eq!(argmax_rows(&z), vec![1, 0]);
        assert_eq!(count_correct(&z, &[1, 2]), 1);
    }
}
