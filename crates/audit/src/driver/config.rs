//! What an audit runs: the attacks ([`AttackKind`]) and the settings ([`AuditConfig`]), with
//! the checks that reject bad settings before any model is trained.

use std::path::PathBuf;

use dpml_data::Dataset;
use dpml_learn::dpsgd::TrainConfig;

use super::attribute::AttributeSettings;
use super::augment::LiraQueries;
use super::error::{DriverError, Result};
use crate::bounds::DEFAULT_CONFIDENCE;
use crate::lira::Variance;

/// The attack families an audit can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AttackKind {
    /// Single-model thresholds on the target: loss (Yeom et al. 2018), confidence, entropy.
    Loss,
    /// LiRA online: IN and OUT reference models.
    Lira,
    /// LiRA offline: OUT reference scores only.
    LiraOffline,
    /// RMIA (Zarifzadeh et al. 2024): the target's confidence over the references' mean,
    /// compared with the population; works with 1 or 2 reference models.
    Rmia,
    /// The one-run canary audit (Steinke, Nasr, Jagielski 2023).
    OneRun,
    /// Attribute inference on a sensitive column (Yeom et al. 2018); needs
    /// [`AttributeSettings`].
    Attribute,
}

/// The names accepted by [`AttackKind::parse_list`].
pub const ATTACK_NAMES: &str = "loss, lira, lira-offline, rmia, one-run, attribute, all";

impl AttackKind {
    /// Every attack, in report order.
    pub const ALL: [AttackKind; 6] = [
        AttackKind::Loss,
        AttackKind::Lira,
        AttackKind::LiraOffline,
        AttackKind::Rmia,
        AttackKind::OneRun,
        AttackKind::Attribute,
    ];

    /// The command-line name: "loss", "lira", "lira-offline", "one-run", "attribute".
    pub fn name(self) -> &'static str {
        match self {
            AttackKind::Loss => "loss",
            AttackKind::Lira => "lira",
            AttackKind::LiraOffline => "lira-offline",
            AttackKind::Rmia => "rmia",
            AttackKind::OneRun => "one-run",
            AttackKind::Attribute => "attribute",
        }
    }

    /// Whether the attack needs reference models.
    pub fn needs_reference_models(self) -> bool {
        matches!(
            self,
            AttackKind::Lira | AttackKind::LiraOffline | AttackKind::Rmia
        )
    }

    /// Whether the attack fits LiRA's Gaussians (at least 2 IN and 2 OUT scores per record).
    pub fn is_lira(self) -> bool {
        matches!(self, AttackKind::Lira | AttackKind::LiraOffline)
    }

    /// Parses a comma-separated list of names, without repeats, in report order. `all` means
    /// every attack, attribute inference only when `with_attribute` (a sensitive column is
    /// known).
    ///
    /// # Errors
    /// [`DriverError::Invalid`] naming an unknown attack.
    pub fn parse_list(s: &str, with_attribute: bool) -> Result<Vec<AttackKind>> {
        let mut out = Vec::new();
        for name in s.split(',').map(str::trim) {
            match name {
                "all" => out.extend(
                    AttackKind::ALL
                        .into_iter()
                        .filter(|&a| with_attribute || a != AttackKind::Attribute),
                ),
                other => out.push(
                    AttackKind::ALL
                        .into_iter()
                        .find(|a| a.name() == other)
                        .ok_or_else(|| {
                            DriverError::Invalid(format!(
                                "unknown attack {other:?}; known attacks: {ATTACK_NAMES}"
                            ))
                        })?,
                ),
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

/// The most models an audit may train by one count (reference models, worst-case-init runs):
/// far past published audits (LiRA's 256), and few enough that laying out their jobs before
/// the first one trains cannot exhaust memory.
pub const MAX_MODELS: usize = 10_000;

/// Everything that defines an audit besides the data.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditConfig {
    /// The training recipe of the target, reused for every reference and canary model.
    pub recipe: TrainConfig,
    /// Records the target trains on, N; as many held-out records serve as non-members.
    pub target_size: usize,
    /// Attacks to run.
    pub attacks: Vec<AttackKind>,
    /// Reference models K for LiRA (each trains on a random half of the 2N audit records).
    pub reference_models: usize,
    /// Canaries m of the one-run audit (drawn from the target's N records).
    pub canaries: usize,
    /// Confidence of every empirical lower bound.
    pub confidence: f64,
    /// The variance model of LiRA's Gaussians.
    pub lira_variance: Variance,
    /// Which copies of each record LiRA queries (augmentations, images only).
    pub lira_queries: LiraQueries,
    /// The sensitive column of the attribute attack (required by it, refused without it).
    pub attribute: Option<AttributeSettings>,
    /// Threads that train models side by side (1: one after the other).
    pub threads: usize,
    /// Folder for cached models (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// The user's seed: every draw and every model's training is derived from it, and models
    /// are cached only for seeded runs (an unseeded run is never "the same setup" again).
    pub seed: Option<u64>,
}

impl AuditConfig {
    /// Defaults around a recipe: N = 1000, loss attack only, K = 16, m = 256, 95% confidence,
    /// pooled LiRA variance, single LiRA queries, no attribute attack, 1 thread, no cache, no
    /// seed.
    pub fn new(recipe: TrainConfig) -> Self {
        Self {
            recipe,
            target_size: 1000,
            attacks: vec![AttackKind::Loss],
            reference_models: 16,
            canaries: 256,
            confidence: DEFAULT_CONFIDENCE,
            lira_variance: Variance::Global,
            lira_queries: LiraQueries::Single,
            attribute: None,
            threads: 1,
            cache_dir: None,
            seed: None,
        }
    }

    /// Whether any requested attack needs reference models.
    pub fn needs_reference_models(&self) -> bool {
        self.attacks.iter().any(|a| a.needs_reference_models())
    }

    /// The fewest records any model of the audit may train on: N for the target and the
    /// reference models; N − m for the one-run audit's model when every canary is left out
    /// (each is included by a coin flip).
    pub fn smallest_training_set(&self) -> usize {
        if self.attacks.contains(&AttackKind::OneRun) {
            self.target_size.saturating_sub(self.canaries)
        } else {
            self.target_size
        }
    }

    /// Checks the settings against a data set of `records` records.
    ///
    /// # Errors
    /// [`DriverError::Invalid`] naming the value: no attacks, N = 0, 2N above the data set
    /// size, K = 0 (or K < 4 for LiRA, whose pooled variance needs 2 IN and 2 OUT scores per
    /// example), m = 0 or m > N
    /// for the one-run audit, confidence outside (0, 1), 0 threads, the attribute attack
    /// without a sensitive column or with fewer than 2 bins, a sensitive column without the
    /// attribute attack, a batch size above the smallest training set of the audit.
    pub fn validate(&self, records: usize) -> Result<()> {
        self.validate_settings(records)?;
        self.check_batch_size()
    }

    /// [`AuditConfig::validate`] less the batch-size check, which comes last so that errors
    /// about the data (an unknown column) are reported first.
    fn validate_settings(&self, records: usize) -> Result<()> {
        let bad = |m: String| Err(DriverError::Invalid(m));
        if self.attacks.is_empty() {
            return bad(format!(
                "attack list is empty; known attacks: {ATTACK_NAMES}"
            ));
        }
        if self.target_size == 0 {
            return bad("target-size must be at least 1, got 0".into());
        }
        if self.target_size.saturating_mul(2) > records {
            return bad(format!(
                "target-size must be at most half the data set ({} records: N members and N \
                 non-members), got {}",
                records, self.target_size
            ));
        }
        if self.reference_models == 0 {
            return bad("reference-models must be at least 1, got 0".into());
        }
        if self.reference_models > MAX_MODELS {
            return bad(format!(
                "reference-models must be at most {MAX_MODELS}, got {}",
                self.reference_models
            ));
        }
        if self.attacks.contains(&AttackKind::Rmia) && self.reference_models < 2 {
            return bad(format!(
                "reference-models must be at least 2 for RMIA (every example needs a reference \
                 model not trained on it), got {}",
                self.reference_models
            ));
        }
        if self.attacks.iter().any(|a| a.is_lira()) && self.reference_models < 4 {
            return bad(format!(
                "reference-models must be at least 4 for LiRA (every example needs 2 IN and 2 \
                 OUT reference scores for the pooled variance), got {}",
                self.reference_models
            ));
        }
        if self.attacks.contains(&AttackKind::OneRun) {
            if self.canaries == 0 {
                return bad("canaries must be at least 1, got 0".into());
            }
            if self.canaries > self.target_size {
                return bad(format!(
                    "canaries must be at most the target size ({}), got {}",
                    self.target_size, self.canaries
                ));
            }
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return bad(format!(
                "confidence must be in (0, 1), got {}",
                self.confidence
            ));
        }
        if self.threads == 0 {
            return bad("threads must be at least 1, got 0".into());
        }
        match (
            &self.attribute,
            self.attacks.contains(&AttackKind::Attribute),
        ) {
            (None, true) => {
                return bad(
                    "attack \"attribute\" needs a sensitive column (--sensitive-column NAME)"
                        .into(),
                );
            }
            (Some(a), false) => {
                return bad(format!(
                    "sensitive column {:?} is set but the attribute attack is not requested \
                     (add \"attribute\" to the attacks)",
                    a.sensitive_column
                ));
            }
            (Some(a), true) if a.bins < 2 => {
                return bad(format!("attribute-bins must be at least 2, got {}", a.bins));
            }
            // More bins than records would leave bins empty, and their candidates are laid out
            // before the attack.
            (Some(a), true) if a.bins > records => {
                return bad(format!(
                    "attribute-bins must be at most the number of records ({records}), got {}",
                    a.bins
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// [`AuditConfig::validate`] on `data`, plus the checks that need the records themselves:
    /// LiRA's augmented queries (images only) and the attribute attack's sensitive column (a
    /// feature of a tabular data set, not the label, with more than one value).
    ///
    /// # Errors
    /// As [`AuditConfig::validate`], [`LiraQueries::check`] and [`AttributeSettings::attack`].
    pub fn validate_for(&self, data: &Dataset) -> Result<()> {
        self.validate_settings(data.n)?;
        if self.needs_reference_models() {
            self.lira_queries.check(data)?;
        }
        if let (Some(a), true) = (
            &self.attribute,
            self.attacks.contains(&AttackKind::Attribute),
        ) {
            a.attack(data)?;
        }
        self.check_batch_size()
    }

    /// The recipe's batch fits the smallest training set of the audit
    /// ([`AuditConfig::smallest_training_set`]).
    fn check_batch_size(&self) -> Result<()> {
        let smallest = self.smallest_training_set();
        if self.recipe.batch_size > smallest {
            return Err(DriverError::Invalid(format!(
                "batch-size must be at most {smallest}, the fewest records a model of this audit \
                 may train on ({}), got {}",
                if self.attacks.contains(&AttackKind::OneRun) {
                    "the target size minus the canaries, if every canary is left out"
                } else {
                    "the target size"
                },
                self.recipe.batch_size
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attack_lists_parse_and_unknown_names_are_named() {
        assert_eq!(
            AttackKind::parse_list("one-run,loss,loss", false).unwrap(),
            vec![AttackKind::Loss, AttackKind::OneRun]
        );
        assert_eq!(
            AttackKind::parse_list("all", true).unwrap(),
            AttackKind::ALL.to_vec()
        );
        assert_eq!(
            AttackKind::parse_list("all", false).unwrap(),
            AttackKind::ALL[..5].to_vec()
        );
        assert_eq!(
            AttackKind::parse_list("attribute,loss", false).unwrap(),
            vec![AttackKind::Loss, AttackKind::Attribute]
        );
        let e = AttackKind::parse_list("lira,shadow", false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"shadow\"") && e.contains("lira-offline"),
            "{e}"
        );
    }

    #[test]
    fn bad_settings_are_named() {
        let ok = AuditConfig {
            attacks: AttackKind::ALL.to_vec(),
            target_size: 100,
            canaries: 50,
            attribute: Some(AttributeSettings::new("age")),
            ..AuditConfig::new(TrainConfig {
                batch_size: 50,
                ..TrainConfig::default()
            })
        };
        ok.validate(200).unwrap();
        let with = |f: &dyn Fn(&mut AuditConfig), records: usize| {
            let mut c = ok.clone();
            f(&mut c);
            c.validate(records).unwrap_err().to_string()
        };
        assert!(with(&|_| {}, 199).contains("got 100"));
        assert!(
            with(&|c| c.reference_models = 0, 200)
                .contains("reference-models must be at least 1, got 0")
        );
        assert!(with(&|c| c.reference_models = 3, 200).contains("at least 4 for LiRA"));
        assert!(
            with(&|c| c.canaries = 101, 200)
                .contains("canaries must be at most the target size (100), got 101")
        );
        assert!(with(&|c| c.canaries = 0, 200).contains("got 0"));
        assert!(
            with(&|c| c.canaries = 51, 200)
                .contains("batch-size must be at most 49, the fewest records")
        );
        let lira_only = |c: &mut AuditConfig| {
            c.attacks = vec![AttackKind::Lira];
            c.attribute = None;
            c.recipe.batch_size = 101;
        };
        assert!(with(&lira_only, 200).contains("at most 100"));
        assert!(with(&|c| c.confidence = 1.0, 200).contains("confidence"));
        assert!(with(&|c| c.attacks.clear(), 200).contains("empty"));
        assert!(with(&|c| c.attribute = None, 200).contains("--sensitive-column"));
        assert!(
            with(&|c| c.attacks.retain(|&a| a != AttackKind::Attribute), 200)
                .contains("\"age\" is set but the attribute attack is not requested")
        );
        let one_bin = |c: &mut AuditConfig| {
            if let Some(a) = c.attribute.as_mut() {
                a.bins = 1;
            }
        };
        assert!(with(&one_bin, 200).contains("attribute-bins must be at least 2, got 1"));
        // Counts that would lay out more than memory holds are refused by name.
        let many_bins = |c: &mut AuditConfig| {
            if let Some(a) = c.attribute.as_mut() {
                a.bins = 1_000_000_000_000;
            }
        };
        assert!(
            with(&many_bins, 200)
                .contains("attribute-bins must be at most the number of records (200)")
        );
        assert!(
            with(&|c| c.reference_models = 1_000_000_000_000, 200)
                .contains("reference-models must be at most 10000, got 1000000000000")
        );
    }
}
