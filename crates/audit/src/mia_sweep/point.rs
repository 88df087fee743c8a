//! One point of the sweep: a mechanism at one ε, its accuracy and what each attack found,
//! with the accountant's ε beside the empirical lower bounds.

use std::collections::BTreeMap;

use serde::Serialize;

use super::mechanism::Mechanism;
use crate::driver::{AttackOutcome, AuditReport};

/// The attacks the sweep reports, by their name in [`AuditReport::attacks`].
pub const ATTACKS: [&str; 2] = ["loss", "lira"];

/// What one attack achieved on the point's target model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AttackSummary {
    /// Area under the ROC curve.
    pub auc: f64,
    /// max(TPR − FPR).
    pub advantage: f64,
    /// Clopper–Pearson ε lower bound at the sweep's confidence and δ.
    pub epsilon_lower_bound: f64,
}

/// One mechanism at one ε (or the non-private baseline).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MiaPoint {
    /// How the models were trained.
    pub mechanism: Mechanism,
    /// The grid's ε (`None` for the baseline).
    pub epsilon: Option<f64>,
    /// The ε the mechanism guarantees, as dpml states it: the accountant's ε of DP-SGD at
    /// `delta`, or the composed per-record ε of the input perturbation (pure ε-DP, so it holds
    /// at any δ); `None` for the baseline.
    pub epsilon_accountant: Option<f64>,
    /// δ of the lower bounds (and of DP-SGD's ε).
    pub delta: f64,
    /// Accuracy of the target on the N held-out records (never trained on).
    pub test_accuracy: f64,
    /// Accuracy of the target on its N training records (as drawn, before any input noise).
    pub train_accuracy: f64,
    /// Loss attack and LiRA, by name.
    pub attacks: BTreeMap<String, AttackSummary>,
    /// The largest lower bound of the attacks.
    pub epsilon_lower_bound: f64,
    /// False when a lower bound exceeds `epsilon_accountant` (a bug in dpml).
    pub consistent: bool,
}

impl MiaPoint {
    /// The point of `mechanism` at `epsilon` from its audit `report`, with the guaranteed ε
    /// `accountant`.
    pub fn new(
        mechanism: Mechanism,
        epsilon: Option<f64>,
        accountant: Option<f64>,
        report: &AuditReport,
    ) -> Self {
        let attacks: BTreeMap<String, AttackSummary> = ATTACKS
            .iter()
            .filter_map(|&name| match report.attacks.get(name) {
                Some(AttackOutcome::Threshold(m)) => Some((
                    name.to_string(),
                    AttackSummary {
                        auc: m.auc,
                        advantage: m.advantage,
                        epsilon_lower_bound: m.epsilon_lower_bound,
                    },
                )),
                _ => None,
            })
            .collect();
        let best = attacks
            .values()
            .map(|a| a.epsilon_lower_bound)
            .fold(0.0, f64::max);
        Self {
            mechanism,
            epsilon,
            epsilon_accountant: accountant,
            delta: report.delta,
            test_accuracy: report.target_holdout_accuracy,
            train_accuracy: report.target_train_accuracy,
            consistent: accountant.is_none_or(|e| best <= e),
            epsilon_lower_bound: best,
            attacks,
        }
    }

    /// The best value of `metric` over the attacks (the figure draws the strongest attack).
    pub fn best(&self, metric: fn(&AttackSummary) -> f64) -> f64 {
        self.attacks
            .values()
            .map(metric)
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// One CSV line per attack, after [`CSV_HEADER`].
    pub fn csv_lines(&self) -> impl Iterator<Item = String> + '_ {
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        self.attacks.iter().map(move |(name, a)| {
            format!(
                "{},{},{},{},{},{},{},{},{},{}",
                self.mechanism.name(),
                self.epsilon.map_or("non-private".into(), |e| e.to_string()),
                opt(self.epsilon_accountant),
                self.delta,
                name,
                a.auc,
                a.advantage,
                a.epsilon_lower_bound,
                self.test_accuracy,
                self.train_accuracy
            )
        })
    }
}

/// Header of the results CSV: one row per point and attack.
pub const CSV_HEADER: &str = "mechanism,epsilon,epsilon_accountant,delta,attack,auc,advantage,\
                              epsilon_lower_bound,test_accuracy,train_accuracy";
