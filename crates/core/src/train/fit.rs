//! What a finished training run releases, the same for every front: the model with its
//! privacy facts, and the JSON release (the guarantee at top level, un-noised figures under
//! [`crate::privacy_model::DIAGNOSTICS_KEY`]); and training on records already in memory (the Python
//! estimators) with the recipe, defaults and release of `dpml train` on a table.

use std::path::Path;

use dpml_data::{Dataset, FeatureBounds, Schema};
use dpml_learn::dpsgd::{
    self, EpochLog, InputTransform, Normalization, Objective, Task, TrainConfig, TrainOutcome,
    TrainReport,
};
use dpml_learn::model_facts::{ModelFacts, SplitFacts};
use dpml_learn::perturbation::input::PerturbationReport;
use dpml_mechanisms::DpRng;
use dpml_nn::Sequential;
use serde_json::{Value, json};

use super::charging;
use super::recipe::{RecipeOptions, fit_batch_to_data, table_recipe};
use super::run::train_task_observed;
use crate::budget::{self, Ledger};
use crate::error::{Error, Result};
use crate::ledger_json;
use crate::observe::Observer;
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};
use crate::schema::provenance_report;

/// A trained model, what its file records about it, and its release.
#[derive(Debug)]
pub struct Fitted {
    /// The network.
    pub model: Sequential,
    /// The input transform it expects.
    pub input: InputTransform,
    /// Its privacy facts (what a saved model carries).
    pub facts: ModelFacts,
    /// The release: the guarantee at top level, un-noised figures under diagnostics.
    pub release: Value,
    /// One entry per epoch (losses and accuracies are diagnostics; a front writes them to
    /// `--log` or keeps them under its diagnostics).
    pub epoch_log: Vec<EpochLog>,
}

impl Fitted {
    /// The model file's bytes: safetensors with the architecture, the input transform and the
    /// privacy facts, as `dpml train --save-model` writes them.
    ///
    /// # Errors
    /// An internal error when serialisation fails.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        save_bytes(&self.model, &self.input, &self.facts)
    }

    /// Writes the model file to `path` ([`Fitted::to_bytes`]).
    ///
    /// # Errors
    /// A usage error naming the path when it cannot be written.
    pub fn save(&self, path: &Path) -> Result<()> {
        Ok(dpsgd::save_with_facts(
            path,
            &self.model,
            &self.input,
            Some(&self.facts),
        )?)
    }
}

/// A model file's bytes (see [`Fitted::to_bytes`]).
///
/// # Errors
/// An internal error when serialisation fails.
pub fn save_bytes(
    model: &Sequential,
    input: &InputTransform,
    facts: &ModelFacts,
) -> Result<Vec<u8>> {
    Ok(dpsgd::io::to_bytes_with_facts(model, input, Some(facts))?)
}

/// Where a run's records came from: the fields of its release that only the front knows.
#[derive(Debug, Clone)]
pub struct RunContext<'a> {
    /// The data set as reported (`"iris"`, `"csv:PATH"`, `"array"`).
    pub dataset: String,
    /// The data set as the model file names it ([`crate::privacy_model::dataset_label`]).
    pub dataset_label: String,
    /// The named recipe, if any.
    pub preset: Option<&'a str>,
    /// What was declared about the data (reported with each declaration's provenance).
    pub schema: &'a Schema,
    /// The split that held the test records out, when the run cut one.
    pub split: Option<SplitFacts>,
    /// The size of the test set, when there was one (a diagnostic).
    pub test_size: Option<usize>,
    /// Notes on choices made for the caller (a default batch fitted to the data).
    pub notes: Vec<String>,
}

impl<'a> RunContext<'a> {
    /// The context of records handed in memory (no source, preset or split), declared as
    /// `schema` says.
    pub fn in_memory(schema: &'a Schema) -> Self {
        Self {
            dataset: MEMORY_DATASET.into(),
            dataset_label: MEMORY_DATASET.into(),
            preset: None,
            schema,
            split: None,
            test_size: None,
            notes: Vec::new(),
        }
    }
}

/// The fields of a [`dpsgd::TrainReport`] computed from the training or test records without
/// noise: diagnostics, not part of the release (the test records are private data too). The
/// throughput sums realised Poisson batch sizes, which depend on the records too.
const TRAINING_DIAGNOSTICS: &[&str] = &[
    "train_accuracy",
    "test_accuracy",
    "test_loss",
    "test_mse",
    "test_mae",
    "samples_per_sec",
];

/// The privacy model of a trained model: `neighbouring`, with the training-set size, the
/// schema, the recipe and the split rule public.
fn training_privacy_model(neighbouring: &'static str) -> PrivacyModel {
    PrivacyModel::new(
        neighbouring,
        &[
            public::TRAINING_SET_SIZE,
            public::SCHEMA,
            public::RECIPE,
            public::SPLIT_RULE,
        ],
    )
}

/// The release and the facts of a finished run of `cfg` for `task` on `train` (after the input
/// `perturbation`, if any).
///
/// # Errors
/// An internal error when the report does not serialise.
pub(super) fn finish(
    outcome: TrainOutcome,
    cfg: &TrainConfig,
    task: Task,
    train: &Dataset,
    perturbation: Option<&PerturbationReport>,
    ctx: &RunContext<'_>,
) -> Result<Fitted> {
    // Local DP on the features alone protects neither labels nor membership; with DP-SGD on
    // top, ε is DP-SGD's over whole records.
    let relation = match (perturbation, &outcome.event) {
        (Some(_), None) => neighbouring::FEATURES,
        _ => neighbouring::ADD_REMOVE,
    };
    let mut facts = model_facts(&outcome.report, task, train, ctx);
    if let Some(p) = perturbation {
        facts = facts.with_input_perturbation(p, neighbouring::FEATURES);
    }
    let mut report = match serde_json::to_value(&outcome.report).map_err(Error::internal)? {
        Value::Object(map) => map,
        _ => return Err(Error::internal("training report is not an object")),
    };
    report.remove("epoch_log");
    if ctx.test_size.is_none() {
        // No test set: no test figures to report, not empty ones.
        for k in ["test_accuracy", "test_loss", "test_mse", "test_mae"] {
            report.remove(k);
        }
    }
    let mut release = Release::from_map(report, &training_privacy_model(relation));
    release.diagnose(TRAINING_DIAGNOSTICS);
    release
        .insert("dataset", json!(ctx.dataset))
        .insert("model", json!(cfg.model))
        .insert("preset", json!(ctx.preset))
        .insert("train_size", json!(train.n))
        .insert("batch_size", json!(cfg.batch_size))
        .insert("learning_rate", json!(cfg.lr))
        .insert("model_file", Value::Null)
        .insert("event", json!(outcome.event))
        .insert("normalize", json!(cfg.normalize))
        .insert(
            "recipe",
            serde_json::to_value(cfg).map_err(Error::internal)?,
        )
        .insert("schema", provenance_report(ctx.schema))
        .insert("split_key", json!(ctx.split.as_ref().map(|s| &s.key)))
        .insert("notes", json!(ctx.notes));
    if let Some(n) = ctx.test_size {
        release.diagnostic("test_size", json!(n));
    }
    if let Some(p) = perturbation {
        release
            .insert("epsilon_per_record", json!(p.epsilon_per_record))
            .insert("epsilon_per_feature", json!(p.epsilon_per_feature))
            .insert("input_perturbation", json!(p));
    }
    Ok(Fitted {
        model: outcome.model,
        input: outcome.input,
        facts,
        release: release.into_value(),
        epoch_log: outcome.report.epoch_log,
    })
}

/// The privacy facts of a DP-SGD run for `task` on `train` that `report` describes, in the
/// context `ctx` (its data set, split and classes), before any input perturbation or search.
pub(crate) fn model_facts(
    report: &TrainReport,
    task: Task,
    train: &Dataset,
    ctx: &RunContext<'_>,
) -> ModelFacts {
    ModelFacts::from_training(
        report,
        &ctx.dataset_label,
        train.n,
        neighbouring::ADD_REMOVE,
    )
    .with_objective(Objective::new(task, train.n_classes), train.n_classes)
    .with_split(ctx.split.clone())
    .with_classes(train.class_names.clone())
}

/// What to train on records in memory: the recipe of `dpml train` on a table (`csv:`), with
/// these overrides, and what is declared about the records.
#[derive(Debug, Clone, Default)]
pub struct FitOptions {
    /// Overrides of the table recipe ([`table_recipe`]).
    pub recipe: RecipeOptions,
    /// Declared feature bounds (features are min-max scaled from them and clamped to them).
    pub bounds: Option<FeatureBounds>,
    /// Declared classes, in the order of the label indices.
    pub classes: Vec<String>,
}

/// The name records in memory are reported under.
pub const MEMORY_DATASET: &str = "array";

impl FitOptions {
    /// The recipe these options ask for on `data`, the schema they declare and the notes on
    /// choices made for the caller: the table recipe with the overrides, a default batch
    /// fitted to the records, features scaled from the declared bounds.
    ///
    /// # Errors
    /// As [`fit`], before any training.
    pub(crate) fn table_recipe(
        &self,
        data: &Dataset,
    ) -> Result<(TrainConfig, Schema, Vec<String>)> {
        let mut cfg = self.recipe.apply(table_recipe())?;
        let notes: Vec<String> = fit_batch_to_data(&mut cfg, &self.recipe, data.n)
            .into_iter()
            .collect();
        let mut schema = Schema::default();
        if let Some(b) = &self.bounds {
            schema = schema.with_bounds(b.clone())?;
        }
        schema = schema.with_classes(self.classes.clone())?;
        let ranges = schema.require_bounds(MEMORY_DATASET, data.n_features())?;
        cfg.normalize = Normalization::feature_ranges(&ranges);
        cfg.validate()?;
        Ok((cfg, schema, notes))
    }
}

/// Trains a classifier on `data` (records in memory, labels indexing `o.classes`) as `dpml
/// train` trains on a table: the same recipe and defaults, the same release (without a test
/// split: the caller holds out what it wants), drawing from `rng`. With a `ledger`, charged as
/// `dpml train --ledger` is: the run's cost checked before it trains, recorded (as `train` on
/// [`MEMORY_DATASET`]) before the model is returned, its balance under `"ledger"`.
///
/// # Errors
/// Usage errors for missing bounds, bounds that do not number the features, and recipes the
/// training refuses (named by their `dpml train` flags); the ledger's refusals (a non-private
/// recipe, over budget).
pub fn fit(
    o: &FitOptions,
    data: &Dataset,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    ledger: Option<&Ledger>,
) -> Result<Fitted> {
    let (cfg, schema, notes) = o.table_recipe(data)?;
    let ctx = RunContext {
        notes,
        ..RunContext::in_memory(&schema)
    };
    // Checked before training: a run that would overspend never takes a step.
    let charge = match ledger {
        Some(l) => {
            let (first, _) =
                charging::run_charges("train", &ctx.dataset, &cfg, data.n, None, None)?;
            budget::check(Some(l), &first)?;
            Some(first)
        }
        None => None,
    };
    let task = Task::Classification;
    let outcome = train_task_observed(task, &cfg, data, None, rng, observer)?;
    let mut fitted = finish(outcome, &cfg, task, data, None, &ctx)?;
    // Recorded before the model is returned: a failed run charged nothing.
    if let Some(c) = &charge
        && let Some(b) = budget::charge(ledger, c)?
    {
        fitted.release["ledger"] = ledger_json::balance(&b);
    }
    Ok(fitted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Silent;

    fn blobs(n: usize) -> Dataset {
        let mut x = Vec::with_capacity(2 * n);
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let c = (i % 2) as u32;
            let s = if c == 1 { 1.0 } else { -1.0 };
            x.extend([s * 0.5 + (i % 7) as f32 * 0.01, s * 0.5]);
            y.push(c);
        }
        Dataset {
            name: MEMORY_DATASET.into(),
            x,
            n,
            record_shape: vec![2],
            y,
            n_classes: 2,
            feature_names: vec!["a".into(), "b".into()],
            class_names: vec!["0".into(), "1".into()],
            feature_range: None,
        }
    }

    /// `o` fitted on `n` blobs, seeded, silently, charged to `ledger`.
    fn fit_blobs(o: &FitOptions, n: usize, ledger: Option<&Ledger>) -> Result<Fitted> {
        fit(o, &blobs(n), &mut DpRng::seeded(1), &mut Silent, ledger)
    }

    fn options() -> FitOptions {
        FitOptions {
            recipe: RecipeOptions {
                epochs: Some(2.0),
                ..RecipeOptions::default()
            },
            bounds: Some(FeatureBounds::Uniform((-1.0, 1.0))),
            classes: vec!["0".into(), "1".into()],
        }
    }

    #[test]
    fn records_in_memory_train_with_the_table_recipe_and_its_release() {
        let f = fit_blobs(&options(), 200, None).unwrap();
        let r = &f.release;
        let recipe = table_recipe();
        assert_eq!(r["batch_size"], json!(recipe.batch_size));
        assert_eq!(r["model"], json!(recipe.model));
        assert_eq!(r["recipe"]["hidden"], json!(recipe.hidden));
        assert!(r["epsilon"].as_f64().unwrap() <= 3.0);
        assert!(r.get("train_accuracy").is_none() && r.get("samples_per_sec").is_none());
        assert!(r["diagnostics"]["train_accuracy"].is_number(), "{r}");
        assert_eq!(f.facts.train_size, 200);
        assert_eq!(f.epoch_log.len(), 2);
        // The bytes are a model file with its facts.
        let back = dpsgd::io::from_bytes_with_facts(&f.to_bytes().unwrap()).unwrap();
        assert_eq!(back.facts, Some(f.facts.clone()));
    }

    #[test]
    fn a_default_batch_larger_than_the_records_is_fitted_and_said_so() {
        let f = fit_blobs(&options(), 40, None).unwrap();
        let b = f.release["batch_size"].as_u64().unwrap();
        assert!(b <= 40, "{}", f.release);
        assert!(
            f.release["notes"][0].as_str().unwrap().contains("batch"),
            "{}",
            f.release
        );
        // A batch the caller gave is theirs to fix, by name.
        let mut o = options();
        o.recipe.batch_size = Some(64);
        let e = fit_blobs(&o, 40, None).unwrap_err();
        assert!(e.to_string().contains("batch_size"), "{e}");
    }

    #[test]
    fn a_ledger_is_checked_before_training_and_charged_before_the_model_returns() {
        use crate::observe::Event;
        let ((_small_dir, small), (_large_dir, large)) =
            (budget::test_ledger(1.0), budget::test_ledger(10.0));
        // ε = 3 does not fit a budget of 1: refused before a single step, nothing recorded.
        let mut started = 0;
        let mut count = |e: Event<'_>| started += usize::from(matches!(e, Event::RunStarted));
        let e = fit(
            &options(),
            &blobs(200),
            &mut DpRng::seeded(1),
            &mut count,
            Some(&small),
        )
        .unwrap_err();
        assert!(e.to_string().contains("over budget"), "{e}");
        assert_eq!(started, 0, "no training before the refusal");
        assert_eq!(small.balance().unwrap().entries, 0);
        // Within budget: one entry, `train` on records in memory, its balance in the release.
        let f = fit_blobs(&options(), 200, Some(&large)).unwrap();
        let entries = large.entries().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(
            (entries[0].command.as_str(), entries[0].dataset.as_str()),
            ("train", MEMORY_DATASET)
        );
        assert!(entries[0].epsilon > 0.0 && entries[0].epsilon <= 3.0 + 1e-9);
        assert_eq!(f.release["ledger"]["entries"], 1, "{}", f.release);
        assert_eq!(
            f.release["ledger"]["spent"].as_f64(),
            Some(large.balance().unwrap().spent_epsilon)
        );
        // A recipe with no finite ε cannot be charged.
        let mut o = options();
        o.recipe.non_private = true;
        assert!(fit_blobs(&o, 200, Some(&large)).is_err());
        assert_eq!(large.balance().unwrap().entries, 1);
    }

    #[test]
    fn bounds_are_required_and_must_number_the_features() {
        let mut o = options();
        o.bounds = None;
        let e = fit_blobs(&o, 40, None).unwrap_err();
        assert!(e.to_string().contains("bounds"), "{e}");
        o.bounds = Some(FeatureBounds::PerFeature(vec![(0.0, 1.0); 3]));
        assert!(fit_blobs(&o, 40, None).is_err());
    }
}
