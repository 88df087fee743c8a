//! Label differential privacy on a classification data set: each training label is
//! privatised once (Laplace, randomized response or RR-with-prior), a model is trained without
//! further noise, and the test utility is reported next to ε (ε-label-DP: features are not
//! protected) as diagnostics: it is measured against the true labels.

use std::path::PathBuf;

use dpml_data::{Dataset, Schema, Source};
use dpml_learn::dpsgd::{OptimizerKind, Privacy, TrainConfig, save_with_facts};
use dpml_learn::label_dp::{
    LabelDpConfig, LabelMechanism, PostProcess, Task, TopKRule, default_training,
    run as run_label_dp,
};
use dpml_learn::model_facts::{Guarantee, ModelFacts};
use dpml_mechanisms::DpRng;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::observe::{Event, Observer};
use crate::privacy_model::{self, PrivacyModel, Release, neighbouring, public};
use crate::schema::{Declarations, Needs, provenance_report};
use crate::train::{Loaded, SplitOptions, load_split, public_normalization};

/// What to train with label DP, on what. Unset recipe entries take [`default_training`]'s.
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
    /// Classification or regression of the class index.
    pub task: Task,
    /// The label mechanism.
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
    /// Save the trained model here.
    pub save_model: Option<PathBuf>,
    /// How the test set is cut.
    pub split: SplitOptions,
}

/// The training recipe for `source`: [`default_training`] (normalisation from public
/// constants only) with every given flag applied.
fn training(
    a: &LabelDpOptions,
    source: &Source,
    schema: &Schema,
    train: &Dataset,
) -> Result<TrainConfig> {
    let mut cfg = default_training(public_normalization(source, schema, train)?, train.n);
    if let Some(m) = &a.model {
        cfg.model = m.clone();
    }
    if let Some(h) = &a.hidden {
        cfg.hidden = h.clone();
    }
    if let Some(e) = a.epochs {
        cfg.epochs = e;
    }
    if let Some(b) = a.batch_size {
        cfg.batch_size = usize::try_from(b)
            .map_err(|_| Error::usage(format!("--batch-size {b} is too large")))?;
        cfg.physical_batch = cfg.batch_size;
    }
    if let Some(lr) = a.lr {
        cfg.lr = lr as f32;
    }
    match a.optimizer.as_deref() {
        None | Some("adam") => {}
        Some("sgd") => {
            cfg.optimizer = OptimizerKind::Sgd {
                momentum: 0.9,
                nesterov: false,
            }
        }
        Some(other) => {
            return Err(Error::usage(format!(
                "unknown optimizer {other:?}; known optimizers: sgd, adam"
            )));
        }
    }
    if let Some(d) = a.ema {
        cfg.ema = Some(d as f32);
    }
    if a.no_ema {
        cfg.ema = None;
    }
    Ok(cfg)
}

/// Privatises each training label once as `a` says, trains on the noisy labels drawing from
/// `rng`, and returns the release (ε-label-DP: the features are not protected) with the test
/// utility, measured against the true labels, as diagnostics.
///
/// # Errors
/// Usage errors for refused combinations (before any data is read), data that do not load,
/// a label domain not declared, or a recipe that does not fit the data.
pub fn label_dp(a: &LabelDpOptions, rng: &mut DpRng, observer: &mut dyn Observer) -> Result<Value> {
    let cfg_probe = LabelDpConfig {
        task: a.task,
        mechanism: a.mechanism,
        postprocess: a.postprocess,
        epsilon: a.epsilon,
        stages: a.stages,
        prior_temperature: a.prior_temperature,
        top_k_rule: a.top_k_rule,
        training: TrainConfig {
            privacy: Privacy::NonPrivate,
            ..TrainConfig::default()
        },
    };
    // Combinations are refused before any data is read.
    cfg_probe.validate().map_err(Error::usage)?;
    let key = a.split.key(rng);
    let opts = a
        .declarations
        .load_options(a.data_dir.as_deref(), a.label_column.as_deref())?;
    // Only the labels are private: their domain must be declared; the features need no bounds.
    let needs = Needs {
        classes: a.task == Task::Classification,
        label_range: a.task == Task::Regression,
        bounds: false,
    };
    let Loaded {
        train,
        test,
        schema,
        split_key,
    } = load_split(
        &a.dataset,
        &opts,
        needs,
        a.split.test_fraction,
        Some(key),
        // Neighbours differ in one label: the split hashes the features only.
        Guarantee::LabelDp.split_basis(),
    )?;
    let test_split = match split_key {
        Some(_) => "per-record keyed split",
        None => "published test split",
    };
    let mut training = training(a, &a.dataset, &schema, &train)?;
    if a.batch_size.is_none() {
        // RR-with-prior trains on each stage's share of the records only: the default batch
        // must fit the first stage (a given --batch-size is the user's to fix, by name).
        let stage = (train.n / cfg_probe.effective_stages()).max(1);
        training.batch_size = training.batch_size.min(stage);
        training.physical_batch = training.batch_size;
    }
    let cfg = LabelDpConfig {
        training,
        ..cfg_probe
    };
    observer.observe(Event::RunStarted);
    let outcome = run_label_dp(&cfg, &train, &test, rng, &mut |p| {
        observer.observe(Event::LabelDp(&p))
    });
    observer.observe(Event::RunFinished);
    let outcome = outcome.map_err(Error::usage)?;
    if let Some(path) = &a.save_model {
        let facts = ModelFacts::from_label_dp(
            &outcome.report,
            &privacy_model::dataset_label(&a.dataset),
            neighbouring::LABEL,
        )
        .with_objective(
            dpml_learn::label_dp::objective(a.task, train.n_classes),
            train.n_classes,
        );
        save_with_facts(path, &outcome.model, &outcome.input, Some(&facts))
            .map_err(Error::usage)?;
    }
    let report = match serde_json::to_value(&outcome.report).map_err(Error::internal)? {
        Value::Object(m) => m,
        _ => return Err(Error::internal("report is not an object")),
    };
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
    let mut release = Release::from_map(report, &model);
    release
        .diagnose(LABEL_DP_DIAGNOSTICS)
        .insert("dataset", json!(a.dataset.name()))
        .insert("test_split", json!(test_split))
        .insert("split_key", json!(split_key.map(|k| k.to_string())))
        .insert("schema", provenance_report(&schema))
        .insert(
            "event",
            serde_json::to_value(&outcome.event).map_err(Error::internal)?,
        );
    if let Some(path) = &a.save_model {
        release.insert("model_file", json!(path.display().to_string()));
    }
    // Regression has no accuracy and classification no MSE: drop the empty fields.
    release.drop_nulls();
    Ok(release.into_value())
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
