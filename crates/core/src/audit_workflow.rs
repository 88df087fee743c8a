//! Auditing a model dpml trains: train a target (and reference models), attack it (loss, LiRA
//! online and offline, the one-run canary audit, attribute inference on a sensitive column),
//! and put each attack's empirical ε lower bound beside the accountant's ε. An audit releases
//! nothing: its figures are measured on the data without noise.

use std::path::PathBuf;

use dpml_audit::driver::{
    AttackKind, AttributeSettings, AuditConfig, AuditReport, DriverError, LiraQueries, ModelReady,
    Spread, run_audit_spread,
};
use dpml_audit::lira::Variance;
use dpml_data::{
    Dataset, EMBEDDED_LABEL_COLUMN, IDX_LABEL_COLUMN, LoadOptions, Source, load, load_table,
};
use dpml_learn::dpsgd::{OptimizerKind, Privacy, TrainConfig};
use dpml_mechanisms::DpRng;
use serde_json::{Value, json};

use crate::budget::{self, Charge};
use crate::error::{Error, Result};
use crate::privacy_model;
use crate::schema::Declarations;
use crate::train::{RecipeOptions, public_normalization};

/// Default N when no target size is given.
pub const DEFAULT_TARGET_SIZE: usize = 2000;
/// Default m when no canary count is given (at most N/2 of them).
pub const DEFAULT_CANARIES: usize = 500;
/// Default batch size when none is given (at most the smallest training set).
pub const DEFAULT_BATCH_SIZE: usize = 64;

/// The audit driver's refusals of the caller's settings are usage errors, a diverged training
/// run a runtime failure; its other failures are internal.
impl From<DriverError> for Error {
    fn from(e: DriverError) -> Self {
        if e.is_user_error() {
            Error::usage(e)
        } else if matches!(e, DriverError::Diverged { .. }) {
            Error::runtime(e)
        } else {
            Error::internal(e)
        }
    }
}

/// The target's training recipe (the reference models reuse it): mlp with 256 hidden units,
/// 20 epochs, batch 64, lr 0.1, SGD momentum 0.9, C = 1, non-private, with `overrides` applied.
///
/// # Errors
/// A usage error without a model name; the overrides' errors.
pub fn recipe(overrides: &RecipeOptions) -> Result<TrainConfig> {
    if overrides.model.is_none() && overrides.arch.is_none() {
        return Err(Error::usage(
            "--model (logreg, mlp, cnn, cnn-tanh) or --arch FILE is required",
        ));
    }
    let base = TrainConfig {
        hidden: vec![256],
        epochs: 20.0,
        batch_size: DEFAULT_BATCH_SIZE,
        lr: 0.1,
        max_grad_norm: 1.0,
        optimizer: OptimizerKind::Sgd {
            momentum: 0.9,
            nesterov: false,
        },
        privacy: Privacy::NonPrivate,
        ..TrainConfig::default()
    };
    overrides.apply(base)
}

/// What to audit, and how.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// The data source.
    pub dataset: Source,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// What is declared about the data.
    pub declarations: Declarations,
    /// Overrides of the target's recipe ([`recipe`]).
    pub recipe: RecipeOptions,
    /// The seed (only seeded runs use the model cache).
    pub seed: Option<u64>,
    /// Records the target trains on (default: min(2000, half the data set)).
    pub train_size: Option<usize>,
    /// Attacks, comma-separated.
    pub attack: String,
    /// The sensitive feature of the attribute attack.
    pub sensitive_column: Option<String>,
    /// Quantile bins of a many-valued sensitive column.
    pub attribute_bins: usize,
    /// LiRA's reference models.
    pub reference_models: usize,
    /// LiRA's variance model.
    pub lira_variance: Variance,
    /// Which copies of each record LiRA queries.
    pub lira_queries: String,
    /// Canaries of the one-run audit (default: min(500, N/2)).
    pub canaries: Option<usize>,
    /// Confidence of the lower bounds.
    pub confidence: f64,
    /// Threads training models side by side (default: the CPU count).
    pub threads: Option<usize>,
    /// Model cache folder (default: [`dpml_audit::driver::cache::default_dir`], per user).
    pub cache: Option<PathBuf>,
    /// Read and write no cached models.
    pub no_cache: bool,
    /// The output folder, if any (the default cache lives there).
    pub out: Option<PathBuf>,
}

/// An audit checked and ready to run: its configuration, data and target recipe.
pub struct AuditPlan {
    /// The driver's configuration.
    pub cfg: AuditConfig,
    /// The records.
    pub data: Dataset,
    /// The target's recipe as trained.
    pub recipe: TrainConfig,
    /// Threads training side by side.
    pub threads: usize,
}

/// The outcome of an audit: the driver's report and the JSON result built from it.
pub struct AuditOutcome {
    /// The driver's report.
    pub report: AuditReport,
    /// The result: the report's figures with the target's accuracies under diagnostics, the
    /// recipe, the threads and LiRA's settings.
    pub result: Value,
}

impl AuditPlan {
    /// Checks `o` and loads its data, before any model is trained.
    ///
    /// # Errors
    /// Usage errors for unknown attacks, a bad recipe, data that do not load, or settings the
    /// data cannot support.
    pub fn new(o: &AuditOptions) -> Result<Self> {
        let attacks = AttackKind::parse_list(&o.attack, o.sensitive_column.is_some())?;
        let source = &o.dataset;
        let mut rec = recipe(&o.recipe)?;
        rec.validate().map_err(Error::usage)?;
        let opts = o
            .declarations
            .load_options(o.data_dir.as_deref(), o.label_column.as_deref())?;
        let splits = load(source, &opts)?;
        let data = splits.train;
        rec.normalize = public_normalization(source, &splits.schema, &data)?;
        let attribute = match &o.sensitive_column {
            Some(name) => Some(AttributeSettings {
                sensitive_column: name.clone(),
                label_column: label_name(source, o.label_column.as_deref(), &opts, &data, name)?,
                bins: o.attribute_bins,
            }),
            None => None,
        };
        let target_size = o.train_size.unwrap_or(DEFAULT_TARGET_SIZE.min(data.n / 2));
        let lira_queries = LiraQueries::parse(&o.lira_queries)?;
        // Never the output folder (a report is made to be shared) nor the shared temporary
        // folder: the models are trained on the private data.
        let cache_dir = match (&o.cache, o.no_cache) {
            (_, true) => None,
            (Some(dir), false) => Some(dir.clone()),
            (None, false) => dpml_audit::driver::cache::default_dir(),
        };
        let threads = threads_or_cores(o.threads);
        let mut cfg = AuditConfig {
            target_size,
            attacks,
            reference_models: o.reference_models,
            canaries: o.canaries.unwrap_or(DEFAULT_CANARIES.min(target_size / 2)),
            confidence: o.confidence,
            lira_variance: o.lira_variance,
            lira_queries,
            attribute,
            threads,
            cache_dir,
            seed: o.seed,
            ..AuditConfig::new(rec.clone())
        };
        if o.recipe.batch_size.is_none() {
            // A small data set (iris: N = 75) gives the one-run audit's model fewer records
            // than the default batch: the default follows the data, a given batch is kept.
            cfg.recipe.batch_size = DEFAULT_BATCH_SIZE.min(cfg.smallest_training_set()).max(1);
            rec.batch_size = cfg.recipe.batch_size;
        }
        cfg.validate_for(&data)?;
        Ok(Self {
            cfg,
            data,
            recipe: rec,
            threads,
        })
    }

    /// What the audit costs a ledger: every model it trains on the data set (the target, the
    /// reference models when an attack needs them, the one-run audit's model) is a DP-SGD run
    /// of the target's recipe, and their results are released together.
    ///
    /// # Privacy
    /// Every model trains with the one σ the driver fixes for the target's N records (a target
    /// ε is calibrated once), so each is charged at that σ: the one-run audit's model at its
    /// smallest training set, where that σ costs the most (calibrating σ again for it would
    /// charge exactly the target ε, less than it costs). Each record is in half the reference
    /// models and all K are charged, at N records each.
    ///
    /// # Errors
    /// A usage error for a non-private recipe (no finite ε to charge); the plan's errors.
    pub fn cost(&self, dataset: &str) -> Result<Charge> {
        let what = "an audit's models";
        let recipe =
            dpml_audit::driver::theory::resolve_recipe(&self.recipe, self.cfg.target_size)?;
        let per_model = crate::train::planned_event(&recipe, self.cfg.target_size, what)?;
        let mut events = vec![per_model.clone()];
        if self.cfg.needs_reference_models() {
            events.push(per_model.repeated(self.cfg.reference_models as u64));
        }
        if self.cfg.attacks.contains(&AttackKind::OneRun) {
            let n = self.cfg.smallest_training_set().max(1);
            events.push(crate::train::planned_event(&recipe, n, what)?);
        }
        let models = events.len()
            + if self.cfg.needs_reference_models() {
                self.cfg.reference_models - 1
            } else {
                0
            };
        Ok(budget::accounted(
            "audit",
            dataset,
            dpml_mechanisms::PrivacyEvent::Composed { events },
            self.recipe.delta,
        )?
        .labelled(format!("audit: {models} DP-SGD models")))
    }

    /// Runs the audit drawing from `rng`, its models divided as `spread` says, calling
    /// `ready` as each model is trained or read from the cache; `None` on the processes
    /// that do not report (all but the root of a job of several).
    ///
    /// # Errors
    /// The driver's errors.
    pub fn run(
        &self,
        rng: &mut DpRng,
        ready: &(dyn Fn(&ModelReady) + Sync),
        spread: &dyn Spread,
    ) -> Result<Option<AuditOutcome>> {
        let Some(report) = run_audit_spread(&self.cfg, &self.data, rng, ready, spread)? else {
            return Ok(None);
        };
        let mut result = serde_json::to_value(&report).map_err(Error::internal)?;
        result["recipe"] = serde_json::to_value(&self.recipe).map_err(Error::internal)?;
        result["threads"] = json!(self.threads);
        // An audit releases nothing: its figures are measured on the data without noise.
        if let Value::Object(map) = &mut result {
            let accuracies: serde_json::Map<String, Value> =
                ["target_train_accuracy", "target_holdout_accuracy"]
                    .into_iter()
                    .filter_map(|k| map.remove(k).map(|v| (k.to_string(), v)))
                    .collect();
            map.insert(
                privacy_model::DIAGNOSTICS_KEY.into(),
                Value::Object(accuracies),
            );
            map.insert(
                privacy_model::DIAGNOSTICS_NOTE_KEY.into(),
                privacy_model::experiment_note(
                    "the target's accuracies (diagnostics) and the attacks' metrics and epsilon lower bounds",
                ),
            );
        }
        state_verdict(&mut result, &report);
        if self.cfg.needs_reference_models() {
            result["lira_settings"] = json!({
                "variance": match self.cfg.lira_variance {
                    Variance::Global => "global",
                    Variance::PerExample => "per-example",
                },
                "queries": self.cfg.lira_queries.name(),
            });
        }
        Ok(Some(AuditOutcome { report, result }))
    }
}

/// The verdict of an audit that compares a model's claimed ε with what the attacks found.
pub const VERDICT_CONSISTENT: &str = "consistent";
/// The verdict of an audit whose attacks found more than the model claims.
pub const VERDICT_INCONSISTENT: &str = "inconsistent";
/// The verdict of an audit of a model that claims no ε (non-private, or scores without
/// `--epsilon`): there is nothing to compare the attacks with.
pub const VERDICT_NO_CLAIM: &str = "no claim to check";

/// The audit's verdict: [`VERDICT_NO_CLAIM`] when the model claims no ε, else whether every
/// lower bound is at or below it.
pub fn verdict(report: &AuditReport) -> &'static str {
    match (report.epsilon_theoretical, report.consistent) {
        (None, _) => VERDICT_NO_CLAIM,
        (Some(_), true) => VERDICT_CONSISTENT,
        (Some(_), false) => VERDICT_INCONSISTENT,
    }
}

/// States the verdict in an audit's `result`: `"verdict"`, and `"consistent"` `null` when
/// there is no claimed ε to be consistent with (a `true` there would check nothing).
pub fn state_verdict(result: &mut Value, report: &AuditReport) {
    result["verdict"] = json!(verdict(report));
    if report.epsilon_theoretical.is_none() {
        result["consistent"] = Value::Null;
    }
}

/// Whose ε an audit checks: dpml's accountant's, for a model dpml trained (a contradiction is
/// a bug in dpml), or the owner's, for scores of a model dpml did not train (a contradiction
/// means the model does not keep its claim).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// ε from dpml's accountant.
    Accountant,
    /// ε stated by the model's owner.
    Owner,
}

impl Claim {
    /// "the accountant's" or "the claimed", as the ε is named in messages.
    pub fn whose(self) -> &'static str {
        match self {
            Claim::Accountant => "the accountant's",
            Claim::Owner => "the claimed",
        }
    }

    /// What a contradiction of this claim means.
    pub fn verdict(self) -> &'static str {
        match self {
            Claim::Accountant => "a bug in dpml's training or accounting",
            Claim::Owner => "the model does not keep its claim",
        }
    }
}

/// The error of an audit whose lower bound exceeds the claimed ε: internal (a bug in dpml)
/// when the claim is the accountant's, a runtime failure of the user's model when it is the
/// owner's.
pub fn inconsistency_error(report: &AuditReport, claim: Claim) -> Error {
    contradiction_error(
        report.epsilon_lower_bound,
        &report.violations.join(", "),
        report.epsilon_theoretical,
        claim,
    )
}

/// The error of a lower bound `found` by `attacks` above the `claimed` ε, as
/// [`inconsistency_error`] says.
pub fn contradiction_error(found: f64, attacks: &str, claimed: Option<f64>, claim: Claim) -> Error {
    let message = format!(
        "empirical epsilon lower bound {found} ({attacks}) exceeds {} epsilon {}: {}",
        claim.whose(),
        claimed.map_or("none".into(), |e| e.to_string()),
        claim.verdict()
    );
    match claim {
        Claim::Accountant => Error::internal(message),
        Claim::Owner => Error::runtime(message),
    }
}

/// The label column's name, so that naming it as the sensitive column is refused by name:
/// `target` for the embedded tables, `label` for the IDX sets, the given label column or the
/// file's last column for a CSV (its header is read again only when `sensitive` is not a
/// feature).
fn label_name(
    source: &Source,
    label_column: Option<&str>,
    opts: &LoadOptions,
    data: &Dataset,
    sensitive: &str,
) -> Result<Option<String>> {
    Ok(match source {
        Source::Csv(_) | Source::Parquet(_) => match label_column {
            Some(l) => Some(l.to_string()),
            None if !data.feature_names.iter().any(|f| f == sensitive) => {
                load_table(source, opts)?.columns.last().cloned()
            }
            None => None,
        },
        Source::Mnist
        | Source::FashionMnist
        | Source::Npy { .. }
        | Source::Npz(_)
        | Source::Idx { .. }
        | Source::Images(_) => Some(IDX_LABEL_COLUMN.to_string()),
        _ => Some(EMBEDDED_LABEL_COLUMN.to_string()),
    })
}

/// The threads an audit trains models on: as many as asked, else one per core.
pub fn threads_or_cores(requested: Option<usize>) -> usize {
    requested.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
