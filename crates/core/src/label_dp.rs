//! Label differential privacy on a classification data set: each training label is
//! privatised once (Laplace, randomized response or RR-with-prior), a model is trained without
//! further noise, and the test utility is reported next to ε (ε-label-DP: features are not
//! protected) as diagnostics: it is measured against the true labels.

use std::path::PathBuf;

use dpml_data::{Dataset, Source};
use dpml_learn::dpsgd::{Normalization, OptimizerKind, TrainConfig};
use dpml_learn::label_dp::{
    LabelDpConfig, LabelMechanism, PostProcess, RrWithPrior, Task, TopKRule, default_training,
    run as run_label_dp, train as train_label_dp,
};
use dpml_learn::model_facts::{Guarantee, ModelFacts, SplitFacts};
use dpml_mechanisms::{DpRng, PrivacyEvent};
use serde_json::{Value, json};

use crate::budget::{self, Charge, Ledger, Neighbouring};
use crate::error::{Error, Result};
use crate::ledger_json;
use crate::observe::{Event, Observer};
use crate::privacy_model::{self, PrivacyModel, Release, neighbouring, public};
use crate::schema::{Declarations, Needs, clamp_diagnostics, provenance_report};
use crate::train::fit::{Fitted, RunContext};
use crate::train::{Loaded, SplitOptions, load_split, public_normalization};

/// How to train with label DP: the mechanism and the network. Unset recipe entries take
/// [`default_training`]'s (which adapt to the number of records).
#[derive(Debug, Clone)]
pub struct LabelDpRecipe {
    /// Classification or regression of the class index.
    pub task: Task,
    /// The label mechanism (default: RR-with-prior).
    pub mechanism: LabelMechanism,
    /// Laplace classification's post-processing.
    pub postprocess: Option<PostProcess>,
    /// ε of each label.
    pub epsilon: f64,
    /// RR-with-prior's stages.
    pub stages: Option<usize>,
    /// RR-with-prior's prior temperature.
    pub prior_temperature: Option<f64>,
    /// RR-with-prior's rule for each label's candidates.
    pub top_k_rule: Option<TopKRule>,
    /// Architecture.
    pub model: Option<String>,
    /// Hidden layer sizes of the mlp.
    pub hidden: Option<Vec<usize>>,
    /// Training epochs (of each stage).
    pub epochs: Option<f64>,
    /// Mini-batch size.
    pub batch_size: Option<u64>,
    /// Learning rate.
    pub lr: Option<f64>,
    /// `adam` or `sgd`.
    pub optimizer: Option<String>,
    /// Decay of the parameters' moving average.
    pub ema: Option<f64>,
    /// Use the last iterate instead of the moving average.
    pub no_ema: bool,
}

/// The ε of each label when none is given (the Python estimator's default; the command line
/// asks for it).
pub const DEFAULT_EPSILON: f64 = 1.0;

/// The label mechanism when none is given: RR-with-prior, the most accurate of the three.
pub const DEFAULT_MECHANISM: LabelMechanism = LabelMechanism::RrPrior;

impl Default for LabelDpRecipe {
    fn default() -> Self {
        Self {
            task: Task::Classification,
            mechanism: DEFAULT_MECHANISM,
            postprocess: None,
            epsilon: DEFAULT_EPSILON,
            stages: None,
            prior_temperature: None,
            top_k_rule: None,
            model: None,
            hidden: None,
            epochs: None,
            batch_size: None,
            lr: None,
            optimizer: None,
            ema: None,
            no_ema: false,
        }
    }
}

impl LabelDpRecipe {
    /// The label-DP configuration of this recipe on `n` training records scaled by
    /// `normalize`: [`default_training`] with every given entry applied, the default batch
    /// fitted to RR-with-prior's first stage.
    ///
    /// # Errors
    /// A usage error for a refused combination or value (named by its `dpml label-dp` flag).
    pub fn config(&self, normalize: Normalization, n: usize) -> Result<LabelDpConfig> {
        let mut cfg = LabelDpConfig {
            task: self.task,
            mechanism: self.mechanism,
            postprocess: self.postprocess,
            epsilon: self.epsilon,
            stages: self.stages,
            prior_temperature: self.prior_temperature,
            top_k_rule: self.top_k_rule,
            training: self.training(normalize, n)?,
        };
        if self.batch_size.is_none() {
            // RR-with-prior trains on each stage's share of the records only: the default batch
            // must fit the first stage (a given batch size is the caller's to fix, by name).
            let stage = (n / cfg.effective_stages()).max(1);
            cfg.training.batch_size = cfg.training.batch_size.min(stage);
            cfg.training.physical_batch = cfg.training.batch_size;
        }
        Ok(cfg)
    }

    /// Refuses bad values and combinations before any data is read.
    ///
    /// # Errors
    /// A usage error naming the first.
    pub fn validate(&self) -> Result<()> {
        self.config(Normalization::None, 1)?
            .validate()
            .map_err(Error::usage)
    }

    /// [`default_training`] on `n` records with every given entry applied.
    fn training(&self, normalize: Normalization, n: usize) -> Result<TrainConfig> {
        let mut cfg = default_training(normalize, n);
        if let Some(m) = &self.model {
            cfg.model = m.clone();
        }
        if let Some(h) = &self.hidden {
            cfg.hidden = h.clone();
        }
        if let Some(e) = self.epochs {
            cfg.epochs = e;
        }
        if let Some(b) = self.batch_size {
            cfg.batch_size = usize::try_from(b)
                .map_err(|_| Error::usage(format!("--batch-size {b} is too large")))?;
            cfg.physical_batch = cfg.batch_size;
        }
        if let Some(lr) = self.lr {
            cfg.lr = lr as f32;
        }
        match self.optimizer.as_deref() {
            None | Some("adam") => {}
            Some("sgd") => {
                cfg.optimizer = OptimizerKind::Sgd {
                    momentum: 0.9,
                    nesterov: false,
                }
            }
            Some(other) => {
                return Err(Error::usage(format!(
                    "unknown --optimizer {other:?}; known optimizers: sgd, adam"
                )));
            }
        }
        if let Some(d) = self.ema {
            cfg.ema = Some(d as f32);
        }
        if self.no_ema {
            cfg.ema = None;
        }
        Ok(cfg)
    }
}

/// What to train with label DP, on what, and where to save it.
#[derive(Debug, Clone)]
pub struct LabelDpOptions {
    /// The data source.
    pub dataset: Source,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// What is declared about the data: classes or label range fix the label domain.
    pub declarations: Declarations,
    /// The mechanism and the network.
    pub recipe: LabelDpRecipe,
    /// Save the trained model here.
    pub save_model: Option<PathBuf>,
    /// How the test set is cut.
    pub split: SplitOptions,
}

/// Privatises each training label once as `a` says, trains on the noisy labels drawing from
/// `rng`, and returns the release (ε-label-DP: the features are not protected) with the test
/// utility, measured against the true labels, as diagnostics. With a `ledger`, each label's ε
/// is checked before any label is privatised and recorded before the model is written or the
/// release returned.
///
/// # Errors
/// Usage errors for refused combinations (before any data is read), data that do not load,
/// a label domain not declared, or a recipe that does not fit the data.
pub fn label_dp(
    a: &LabelDpOptions,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    ledger: Option<&Ledger>,
) -> Result<Value> {
    // Combinations are refused before any data is read.
    a.recipe.validate()?;
    if let Some(path) = &a.save_model {
        crate::output_path::check_writable("--save-model", path)?;
    }
    let key = a.split.key(rng);
    let opts = a
        .declarations
        .load_options(a.data_dir.as_deref(), a.label_column.as_deref())?;
    // Only the labels are private: their domain must be declared; the features need no bounds.
    let needs = Needs {
        classes: a.recipe.task == Task::Classification,
        label_range: a.recipe.task == Task::Regression,
        bounds: false,
    };
    let Loaded {
        train,
        test,
        schema,
        split_key,
        clamped,
    } = load_split(
        &a.dataset,
        &opts,
        needs,
        a.split.test_fraction,
        Some(key),
        // Neighbours differ in one label: the split hashes the features only.
        Guarantee::LabelDp.split_basis(),
    )?;
    let normalize = public_normalization(&a.dataset, &schema, &train)?;
    let ctx = RunContext {
        dataset: a.dataset.name(),
        dataset_label: privacy_model::dataset_label(&a.dataset),
        preset: None,
        schema: &schema,
        split: split_key.map(|k| SplitFacts {
            key: k.to_string(),
            test_fraction: a.split.test_fraction,
        }),
        test_size: Some(test.n),
        notes: Vec::new(),
    };
    let mut fitted = fit_label_dp(
        &a.recipe,
        &train,
        Some(&test),
        normalize,
        &ctx,
        rng,
        observer,
        ledger,
    )?;
    privacy_model::add_diagnostics(
        &mut fitted.release,
        clamp_diagnostics(&clamped, &train.feature_names, train.n + test.n),
    );
    if let Some(path) = &a.save_model {
        fitted.save(path)?;
        fitted.release["model_file"] = json!(path.display().to_string());
    }
    Ok(fitted.release)
}

/// Privatises each label of `train` once with `recipe`'s mechanism and trains on the noisy
/// labels (features scaled by `normalize`), evaluating on `test` when given: the model, its
/// facts and its release (ε-label-DP; figures against the true labels as diagnostics). With a
/// `ledger`, each label's ε is checked before any label is privatised and recorded (as
/// `label-dp` on `ctx`'s data set) before the model is returned, its balance under
/// `"ledger"`.
///
/// # Errors
/// Usage errors for a refused recipe or one that does not fit the data; the ledger's
/// refusals.
#[allow(clippy::too_many_arguments)]
pub fn fit_label_dp(
    recipe: &LabelDpRecipe,
    train: &Dataset,
    test: Option<&Dataset>,
    normalize: Normalization,
    ctx: &RunContext<'_>,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    ledger: Option<&Ledger>,
) -> Result<Fitted> {
    let cfg = recipe.config(normalize, train.n)?;
    let planned = PrivacyEvent::EpsilonDelta {
        epsilon: recipe.epsilon,
        delta: 0.0,
    };
    budget::check(
        ledger,
        &Charge::of("label-dp", &ctx.dataset, planned, recipe.epsilon, 0.0)
            .under(Neighbouring::Label),
    )?;
    observer.observe(Event::RunStarted);
    let mut progress = |p| observer.observe(Event::LabelDp(&p));
    let outcome = match test {
        Some(test) => run_label_dp(&cfg, train, test, rng, &mut progress),
        None => train_label_dp(&cfg, train, rng, &mut progress),
    };
    observer.observe(Event::RunFinished);
    let outcome = outcome.map_err(Error::usage)?;
    // Recorded before the model is returned (and so before a front writes it): ε-label-DP,
    // each label used once.
    let balance = budget::charge(
        ledger,
        &Charge::of(
            "label-dp",
            &ctx.dataset,
            outcome.event.clone(),
            recipe.epsilon,
            0.0,
        )
        .labelled(
            format!(
                "label DP ({:?}), epsilon {} per label",
                recipe.mechanism, recipe.epsilon
            )
            .to_lowercase(),
        )
        .under(Neighbouring::Label),
    )?;
    let facts = ModelFacts::from_label_dp(&outcome.report, &ctx.dataset_label, neighbouring::LABEL)
        .with_objective(
            dpml_learn::label_dp::objective(recipe.task, train.n_classes),
            train.n_classes,
        )
        .with_split(ctx.split.clone())
        .with_classes(train.class_names.clone());
    let mut report = match serde_json::to_value(&outcome.report).map_err(Error::internal)? {
        Value::Object(m) => m,
        _ => return Err(Error::internal("report is not an object")),
    };
    if test.is_none() {
        // No test set: no test figures to report, not empty ones.
        for k in ["test_accuracy", "test_mse", "test_mae", "test_size"] {
            report.remove(k);
        }
    }
    let model = PrivacyModel::new(
        neighbouring::LABEL,
        &[
            public::DATA_SET_SIZE,
            public::FEATURES,
            public::SCHEMA,
            public::RECIPE,
            public::SPLIT_RULE,
        ],
    );
    let test_split = match (&ctx.split, test) {
        (_, None) => None,
        (Some(_), Some(_)) => Some("per-record keyed split"),
        (None, Some(_)) => Some("published test split"),
    };
    let mut release = Release::from_map(report, &model);
    release
        .diagnose(LABEL_DP_DIAGNOSTICS)
        .insert("dataset", json!(ctx.dataset))
        // A pure ε-label-DP guarantee.
        .insert("delta", json!(0.0))
        .insert("test_split", json!(test_split))
        .insert("split_key", json!(ctx.split.as_ref().map(|s| &s.key)))
        .insert("schema", provenance_report(ctx.schema))
        .insert("model_file", Value::Null)
        .insert(
            "event",
            serde_json::to_value(&outcome.event).map_err(Error::internal)?,
        );
    // Regression has no accuracy and classification no MSE: drop the empty fields.
    release.drop_nulls();
    if let Some(b) = balance {
        release.insert("ledger", ledger_json::balance(&b));
    }
    Ok(Fitted {
        model: outcome.model,
        input: outcome.input,
        facts,
        release: release.into_value(),
        epoch_log: Vec::new(),
    })
}

/// The fields of a [`dpml_learn::label_dp::LabelDpReport`] computed from true labels without
/// noise: the test figures (the test labels are data too), the noisy labels' agreement with
/// the true ones, and the size of the test split. The rest (mean top-k, unary share) is
/// post-processing of the privatised labels and the public features.
const LABEL_DP_DIAGNOSTICS: &[&str] = &[
    "test_accuracy",
    "test_mse",
    "test_mae",
    "noisy_label_accuracy",
    "stage_noisy_label_accuracy",
    "test_size",
];

/// Labels released by RR-with-prior on their own (Ghazi et al. 2021), with what a learner
/// trains on.
#[derive(Debug, Clone)]
pub struct PriorRelease {
    /// The released class of each record.
    pub released: Vec<u32>,
    /// The probability of each record's output under every possible true label, `n × k` row
    /// by row (the channel a learner corrects for).
    pub likelihood: Vec<f32>,
    /// The event of one record's release (ε-label-DP per record).
    pub event: dpml_mechanisms::PrivacyEvent,
}

/// Releases each label `labels[i]` in `0..k` by randomized response over the candidate
/// classes its public prior (row `i` of `priors`, `n × k`) makes likely, under `rule` (the
/// default: [`TopKRule::Information`], as `dpml label-dp --top-k-rule`). ε-label-DP per record,
/// provided the priors do not depend on the private labels. With a `ledger`, ε is checked
/// before any label is released and recorded (as `rr-with-prior` on records in memory) before
/// the labels are returned.
///
/// # Errors
/// A usage error for a label outside `0..k`, priors of another shape, or a bad ε or prior;
/// the ledger's refusals.
pub fn rr_with_prior(
    labels: &[u32],
    priors: &[f64],
    k: usize,
    epsilon: f64,
    rule: Option<TopKRule>,
    rng: &mut DpRng,
    ledger: Option<&Ledger>,
) -> Result<PriorRelease> {
    if priors.len() != labels.len().saturating_mul(k) {
        return Err(Error::usage(format!(
            "priors must have one row of {k} classes per label ({} labels), got {} values",
            labels.len(),
            priors.len()
        )));
    }
    let rr = RrWithPrior::new(epsilon, k)
        .map_err(Error::usage)?
        .with_rule(rule.unwrap_or_default());
    // Each record's label is released once: one event of ε for the whole array.
    let charge = Charge::of(
        "rr-with-prior",
        crate::train::MEMORY_DATASET,
        rr.event(),
        epsilon,
        0.0,
    )
    .under(Neighbouring::Label);
    let ((released, likelihood), _) = budget::charged(ledger, &charge, || {
        let mut released = Vec::with_capacity(labels.len());
        let mut likelihood = Vec::with_capacity(priors.len());
        let mut row = Vec::with_capacity(k);
        for (&label, prior) in labels.iter().zip(priors.chunks_exact(k.max(1))) {
            if label as usize >= k {
                return Err(Error::usage(format!(
                    "labels must be in 0..{k}, got {label}"
                )));
            }
            let plan = rr.plan(prior).map_err(Error::usage)?;
            released.push(
                rr.release(rng, label, &plan, &mut row)
                    .map_err(Error::usage)?,
            );
            likelihood.extend_from_slice(&row);
        }
        Ok((released, likelihood))
    })?;
    Ok(PriorRelease {
        released,
        likelihood,
        event: rr.event(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rr_with_prior_over_budget_draws_nothing_and_within_it_is_charged_once() {
        let (_dir, ledger) = budget::test_ledger(1.0);
        let (labels, priors) = (vec![0, 1, 1], vec![0.5; 6]);
        let mut rng = DpRng::seeded(5);
        let e = rr_with_prior(&labels, &priors, 2, 2.0, None, &mut rng, Some(&ledger)).unwrap_err();
        assert!(e.to_string().contains("over budget"), "{e}");
        assert_eq!(
            rng.next_u64(),
            DpRng::seeded(5).next_u64(),
            "no label released"
        );
        rr_with_prior(&labels, &priors, 2, 0.5, None, &mut rng, Some(&ledger)).unwrap();
        let entries = ledger.entries().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(
            (entries[0].command.as_str(), entries[0].epsilon),
            ("rr-with-prior", 0.5)
        );
    }
}
