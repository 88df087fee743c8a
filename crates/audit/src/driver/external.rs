//! An audit of a model dpml did not train: the member and non-member scores of any
//! membership-inference attack (higher = "member"), as ML Privacy Meter users have them, turned
//! into the same [`AuditReport`] as a dpml-trained audit with one threshold attack named
//! [`SCORES_ATTACK`]. No accountant stands behind such a model unless the caller states its ε.

use std::collections::BTreeMap;
use std::time::Instant;

use dpml_mechanisms::DpRng;

use super::error::{DriverError, Result};
use super::metrics::AttackMetrics;
use super::run::{AttackOutcome, AuditReport};
use super::theory::Theory;
use crate::bounds::EpsilonBoundParams;

/// The attack's name in the report.
pub const SCORES_ATTACK: &str = "scores";

/// What the caller states about the audited model.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalModel {
    /// Where the scores came from (the report's "data set", e.g. the scores file).
    pub name: String,
    /// δ of the ε lower bound (and of `epsilon_theoretical`).
    pub delta: f64,
    /// Confidence of the lower bound.
    pub confidence: f64,
    /// The ε the model's own accountant claims at `delta`, when there is one: a lower bound
    /// above it makes the report inconsistent.
    pub epsilon_theoretical: Option<f64>,
}

/// Audits the given scores: ROC, AUC, TPR at low FPR, advantage and the Clopper–Pearson ε lower
/// bound (threshold chosen on a random half, measured on the other, drawn with `rng`).
///
/// # Errors
/// As [`AttackMetrics::from_scores`] (empty, non-finite or too few scores), and δ or the
/// confidence out of range.
pub fn audit_scores(
    model: &ExternalModel,
    members: &[f64],
    non_members: &[f64],
    rng: &mut DpRng,
) -> Result<AuditReport> {
    let started = Instant::now();
    let params = EpsilonBoundParams::new(model.delta, model.confidence)?;
    let metrics = AttackMetrics::from_scores(members, non_members, params, rng)?;
    let bound = metrics.epsilon_lower_bound;
    let violations: Vec<String> = model
        .epsilon_theoretical
        .filter(|&e| bound > e)
        .map(|_| SCORES_ATTACK.to_string())
        .into_iter()
        .collect();
    let attacks = BTreeMap::from([(SCORES_ATTACK.to_string(), AttackOutcome::Threshold(metrics))]);
    Ok(AuditReport {
        dataset: model.name.clone(),
        target_size: members.len(),
        reference_models: None,
        canaries: None,
        confidence: model.confidence,
        seeded: rng.is_seeded(),
        epsilon_theoretical: model.epsilon_theoretical,
        delta: model.delta,
        theory: Theory {
            epsilon: model.epsilon_theoretical,
            delta: model.delta,
            accountant: "stated by the caller".into(),
            noise_multiplier: None,
            sampling_rate: f64::NAN,
            steps: 0,
            event: None,
        },
        // The model is not dpml's: its accuracies are unknown.
        target_train_accuracy: f64::NAN,
        target_holdout_accuracy: f64::NAN,
        attacks,
        epsilon_lower_bound: bound,
        best_attack: if bound > 0.0 {
            SCORES_ATTACK.into()
        } else {
            String::new()
        },
        consistent: violations.is_empty(),
        violations,
        models_trained: 0,
        models_from_cache: 0,
        cache_dir: None,
        training_seconds: 0.0,
        wall_seconds: started.elapsed().as_secs_f64(),
        roc_bound: None,
    })
}

/// Member and non-member scores from CSV text with a header naming the columns `score` (any
/// finite number, higher = member) and `member` (1 or 0), in any order among other columns.
///
/// # Errors
/// [`DriverError::Invalid`] naming the missing column, or the line and value of a bad cell.
pub fn parse_scores_csv(text: &str) -> Result<(Vec<f64>, Vec<f64>)> {
    // A line is checked before anything quotes it: an error quoting a line of a gigabyte
    // would take gigabytes.
    let max = dpml_data::MAX_CSV_LINE_BYTES;
    if let Some((i, line)) = text.lines().enumerate().find(|(_, l)| l.len() > max) {
        return Err(DriverError::Invalid(format!(
            "line {} holds {} bytes, over the limit of {max} per line",
            i + 1,
            line.len()
        )));
    }
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(DriverError::Invalid(
            "the scores file is empty: it needs a header with the columns score,member".into(),
        ));
    };
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    let column = |name: &str| {
        names.iter().position(|n| *n == name).ok_or_else(|| {
            DriverError::Invalid(format!(
                "the scores file needs a header with the columns score,member; got {header:?}"
            ))
        })
    };
    let (score_at, member_at) = (column("score")?, column("member")?);
    let (mut members, mut non_members) = (Vec::new(), Vec::new());
    for (i, line) in lines {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let cell = |at: usize, what: &str| {
            cells.get(at).copied().ok_or_else(|| {
                DriverError::Invalid(format!("line {}: no {what} column in {line:?}", i + 1))
            })
        };
        let score_text = cell(score_at, "score")?;
        let score = score_text
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite())
            .ok_or_else(|| {
                DriverError::Invalid(format!(
                    "line {}: score must be a finite number, got {score_text:?}",
                    i + 1
                ))
            })?;
        match cell(member_at, "member")? {
            "1" => members.push(score),
            "0" => non_members.push(score),
            other => {
                return Err(DriverError::Invalid(format!(
                    "line {}: member must be 1 or 0, got {other:?}",
                    i + 1
                )));
            }
        }
    }
    Ok((members, non_members))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_csv_is_parsed_by_header_and_bad_cells_are_named() {
        let (m, n) = parse_scores_csv("id,member,score\na,1,0.9\nb,0,-2\n\nc,1,3e2\n").unwrap();
        assert_eq!((m, n), (vec![0.9, 300.0], vec![-2.0]));
        for (text, needle) in [
            ("", "empty"),
            ("0.5,1\n", "header"),
            (
                "score,member\n0.5,2\n",
                "line 2: member must be 1 or 0, got \"2\"",
            ),
            (
                "score,member\n0.5,1\nnan,0\n",
                "line 3: score must be a finite number, got \"nan\"",
            ),
            ("score,member\n0.5\n", "line 2: no member column"),
        ] {
            let e = parse_scores_csv(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    fn model(eps: Option<f64>) -> ExternalModel {
        ExternalModel {
            name: "scores.csv".into(),
            delta: 1e-5,
            confidence: 0.95,
            epsilon_theoretical: eps,
        }
    }

    #[test]
    fn separable_scores_bound_epsilon_and_contradict_a_small_claim() {
        let members: Vec<f64> = (0..500).map(|i| 1000.0 + f64::from(i)).collect();
        let non: Vec<f64> = (0..500).map(f64::from).collect();
        let r = audit_scores(&model(None), &members, &non, &mut DpRng::seeded(3)).unwrap();
        let AttackOutcome::Threshold(m) = &r.attacks[SCORES_ATTACK] else {
            panic!("not a threshold attack")
        };
        assert_eq!(m.auc, 1.0);
        assert!(r.epsilon_lower_bound > 3.0, "{}", r.epsilon_lower_bound);
        assert!(r.consistent && r.best_attack == SCORES_ATTACK && r.target_size == 500);
        let r = audit_scores(&model(Some(1.0)), &members, &non, &mut DpRng::seeded(3)).unwrap();
        assert!(!r.consistent && r.violations == [SCORES_ATTACK]);
        // Identical score sets carry no signal: nothing to bound.
        let r = audit_scores(&model(Some(1.0)), &non, &non, &mut DpRng::seeded(3)).unwrap();
        assert!(
            r.consistent && r.epsilon_lower_bound < 0.5,
            "{}",
            r.epsilon_lower_bound
        );
        let bad = audit_scores(&model(None), &[1.0], &non, &mut DpRng::seeded(3)).unwrap_err();
        assert!(bad.to_string().contains("got 1"), "{bad}");
    }
}
