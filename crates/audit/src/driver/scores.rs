//! Per-record attack scores from a model's logits (higher = "more likely a member"): the loss
//! threshold score `−loss`, the confidence `p_y`, the negative entropy `−H(p)`, and LiRA's
//! logit-scaled confidence `φ`.

use crate::error::Result;
use crate::{logits, loss_attack};

/// The single-model scores of every record, in record order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecordScores {
    /// `−cross-entropy` (Yeom et al. 2018).
    pub loss: Vec<f64>,
    /// Probability of the true label.
    pub confidence: Vec<f64>,
    /// `−H(softmax)`.
    pub entropy: Vec<f64>,
    /// `φ = log(p_y / (1 − p_y))` from the logits.
    pub phi: Vec<f64>,
}

impl RecordScores {
    /// Scores from row-major logits `[labels.len(), classes]`.
    ///
    /// # Errors
    /// A row with a non-finite logit, or a label out of range (named by the scoring core).
    pub fn from_logits(logits_rows: &[f32], classes: usize, labels: &[u32]) -> Result<Self> {
        let mut out = RecordScores::default();
        for (row, &y) in logits_rows.chunks(classes.max(1)).zip(labels) {
            let z: Vec<f64> = row.iter().map(|&v| f64::from(v)).collect();
            let y = y as usize;
            out.loss.push(-logits::cross_entropy(&z, y)?);
            out.phi.push(logits::logit_scaled_confidence(&z, y)?);
            let p = logits::softmax(&z)?;
            out.confidence.push(loss_attack::confidence_score(&p, y)?);
            out.entropy.push(loss_attack::entropy_score(&p)?);
        }
        Ok(out)
    }
}

/// Fraction of rows whose largest logit is the label.
pub(crate) fn accuracy(logits_rows: &[f32], classes: usize, labels: &[u32]) -> f64 {
    if labels.is_empty() {
        return f64::NAN;
    }
    let correct = logits_rows
        .chunks(classes.max(1))
        .zip(labels)
        .filter(|(row, y)| {
            let best = row
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(j, _)| j);
            best == Some(**y as usize)
        })
        .count();
    correct as f64 / labels.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_scores() {
        // Row 0: logits (ln 3, 0) → p = (3/4, 1/4), label 0: loss ln(4/3), φ = ln 3,
        // H = −(3/4 ln 3/4 + 1/4 ln 1/4). Row 1: logits (1, 0), label 1: wrong.
        let rows = [3f32.ln(), 0.0, 1.0, 0.0];
        let s = RecordScores::from_logits(&rows, 2, &[0, 1]).unwrap();
        assert!((s.loss[0] + (4.0f64 / 3.0).ln()).abs() < 1e-6);
        assert!((s.phi[0] - 3f64.ln()).abs() < 1e-6);
        assert!((s.confidence[0] - 0.75).abs() < 1e-6);
        let h = -(0.75 * 0.75f64.ln() + 0.25 * 0.25f64.ln());
        assert!((s.entropy[0] + h).abs() < 1e-6);
        assert_eq!(accuracy(&rows, 2, &[0, 1]), 0.5);
        assert!(RecordScores::from_logits(&rows, 2, &[0, 2]).is_err());
    }
}
