//! `dpml label-dp`: label differential privacy on a classification data set. Each training
//! label is privatised once (Laplace, randomized response or RR-with-prior), a model is trained
//! without further noise, and the test utility is reported next to ε (ε-label-DP: features are
//! not protected) as diagnostics: it is measured against the true labels.

use std::path::{Path, PathBuf};

use clap::Args;
use dpml_data::{Dataset, Schema, Source};
use dpml_learn::dpsgd::{OptimizerKind, Privacy, TrainConfig, save_with_facts};
use dpml_learn::label_dp::{
    LabelDpConfig, LabelDpProgress, LabelMechanism, PostProcess, Task, TopKRule, default_training,
    run as run_label_dp,
};
use dpml_learn::model_facts::ModelFacts;
use serde_json::{Value, json};

use super::train::{Loaded, SplitArgs, load_split, public_normalization};
use crate::args::{self, DataArgs, SeedArg};
use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::privacy_model::{self, PrivacyModel, Release, neighbouring, public};
use crate::progress::Progress;
use crate::schema_args::{Needs, SchemaArgs, provenance_report};

/// Parses a name with its `FromStr` (clap value parser).
pub(crate) fn parse<T: std::str::FromStr>(s: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    s.parse::<T>().map_err(|e| e.to_string())
}

/// Flags of `dpml label-dp`.
#[derive(Args, Debug)]
pub struct LabelDpArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// classification (test accuracy) or regression (the class index as a number; test MSE, MAE).
    #[arg(long, default_value = "classification", value_parser = parse::<Task>)]
    pub task: Task,
    /// laplace, rr (k-ary randomized response) or rr-prior (RR-with-prior, multi-stage).
    #[arg(long, value_parser = parse::<LabelMechanism>)]
    pub mechanism: LabelMechanism,
    /// Laplace classification only: clamp-round (default, multi-hot + BCE), argmax or soft.
    #[arg(long, value_parser = parse::<PostProcess>)]
    pub postprocess: Option<PostProcess>,
    /// ε of each label (the per-record ε-label-DP guarantee).
    #[arg(long, value_parser = args::positive, allow_hyphen_values = true)]
    pub epsilon: f64,
    /// rr-prior only: number of stages (default 2).
    #[arg(long, value_parser = args::at_least_one)]
    pub stages: Option<u64>,
    /// rr-prior only: temperature T of the prior softmax(logits/T) (default 1).
    #[arg(long, value_parser = args::positive)]
    pub prior_temperature: Option<f64>,
    /// rr-prior only: how each label's candidate classes and encoding are chosen:
    /// information (default: the RR or unary-encoding release of most mutual information with
    /// the label under the prior) or expected-accuracy (Ghazi et al.'s top-k with RR).
    #[arg(long, value_parser = parse::<TopKRule>)]
    pub top_k_rule: Option<TopKRule>,
    /// Architecture to train (default: mlp).
    #[arg(long, value_name = "NAME", value_parser = args::ModelName)]
    pub model: Option<String>,
    /// Hidden layer sizes of the mlp, comma-separated (default: 512).
    #[arg(long, value_delimiter = ',', value_parser = args::at_least_one_at_most(args::MAX_HIDDEN_WIDTH))]
    pub hidden: Option<Vec<u64>>,
    /// Training epochs (of each stage for rr-prior). Default: 3, or enough for 1,000 steps of
    /// the whole training set on small data sets. Few epochs are deliberate: networks memorise
    /// noisy labels (on MNIST at ε = 1, 3 epochs beat 10 for laplace and rr-prior).
    #[arg(long, value_parser = args::positive)]
    pub epochs: Option<f64>,
    /// Mini-batch size (default: 128, or every training record when there are fewer).
    #[arg(long, value_parser = args::at_least_one)]
    pub batch_size: Option<u64>,
    /// Learning rate (default 0.0003: small steps, because label noise dominates the gradients
    /// at small ε).
    #[arg(long = "learning-rate", alias = "lr", value_parser = args::positive)]
    pub lr: Option<f64>,
    /// adam or sgd (momentum 0.9) (default: adam).
    #[arg(long)]
    pub optimizer: Option<String>,
    /// Decay of the exponential moving average of the parameters that becomes the model (each
    /// stage's for rr-prior; default 0.999).
    #[arg(long, value_parser = args::open_unit, conflicts_with = "no_ema")]
    pub ema: Option<f64>,
    /// Use the last iterate as the model instead of the moving average.
    #[arg(long)]
    pub no_ema: bool,
    /// Save the trained model (safetensors, with its privacy facts: see `dpml inspect`) to
    /// FILE, e.g. for `dpml predict`.
    #[arg(long, value_name = "FILE")]
    pub save_model: Option<PathBuf>,
    /// What is declared about the data: its classes (classification) or label range
    /// (regression) fix the label domain, the noise scale and the output layer.
    #[command(flatten)]
    pub schema: SchemaArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub seed: SeedArg,
}

/// The training recipe for `source`: [`default_training`] (normalisation from public
/// constants only) with every given flag applied.
fn training(
    a: &LabelDpArgs,
    source: &Source,
    schema: &Schema,
    train: &Dataset,
) -> CliResult<TrainConfig> {
    let mut cfg = default_training(public_normalization(source, schema, train)?, train.n);
    if let Some(m) = &a.model {
        cfg.model = m.clone();
    }
    if let Some(h) = &a.hidden {
        cfg.hidden = h.iter().map(|&v| v as usize).collect();
    }
    if let Some(e) = a.epochs {
        cfg.epochs = e;
    }
    if let Some(b) = a.batch_size {
        cfg.batch_size = usize::try_from(b)
            .map_err(|_| CliError::usage(format!("--batch-size {b} is too large")))?;
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
            return Err(CliError::usage(format!(
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

/// Run `dpml label-dp`.
pub fn run(a: &LabelDpArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let cfg_probe = LabelDpConfig {
        task: a.task,
        mechanism: a.mechanism,
        postprocess: a.postprocess,
        epsilon: a.epsilon,
        stages: a.stages.map(|s| s as usize),
        prior_temperature: a.prior_temperature,
        top_k_rule: a.top_k_rule,
        training: TrainConfig {
            privacy: Privacy::NonPrivate,
            ..TrainConfig::default()
        },
    };
    // Combinations are refused before any data is read.
    cfg_probe.validate().map_err(CliError::usage)?;
    let mut rng = a.seed.rng()?;
    let key = a.split.key(&mut rng);
    let opts = a
        .schema
        .load_options(data_dir, a.data.label_column.as_deref())?;
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
        &a.data.dataset,
        &opts,
        needs,
        a.split.test_fraction,
        Some(key),
    )?;
    let test_split = match split_key {
        Some(_) => "per-record keyed split",
        None => "published test split",
    };
    let mut training = training(a, &a.data.dataset, &schema, &train)?;
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
    let bar = Progress::new(1, "label-dp", "step", false);
    let outcome = run_label_dp(&cfg, &train, &test, &mut rng, &mut |p| match p {
        LabelDpProgress::Stage {
            stage,
            stages,
            steps,
        } => {
            bar.set_length(steps);
            bar.set_position(0);
            bar.set_message(format!("stage {stage}/{stages}"));
            bar.line(&format!("stage {stage}/{stages}, {steps} steps"), None, "");
        }
        LabelDpProgress::Step { step, .. } => bar.set_position(step),
    });
    bar.finish_and_clear();
    let outcome = outcome.map_err(CliError::usage)?;
    if let Some(path) = &a.save_model {
        let facts = ModelFacts::from_label_dp(
            &outcome.report,
            &privacy_model::dataset_label(&a.data.dataset),
            neighbouring::LABEL,
        )
        .with_objective(
            dpml_learn::label_dp::objective(a.task, train.n_classes),
            train.n_classes,
        );
        save_with_facts(path, &outcome.model, &outcome.input, Some(&facts))
            .map_err(CliError::usage)?;
    }
    let report = match serde_json::to_value(&outcome.report).map_err(CliError::internal)? {
        Value::Object(m) => m,
        _ => return Err(CliError::internal("report is not an object")),
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
        .insert("dataset", json!(a.data.dataset.name()))
        .insert("test_split", json!(test_split))
        .insert("split_key", json!(split_key.map(|k| k.to_string())))
        .insert("schema", provenance_report(&schema))
        .insert(
            "event",
            serde_json::to_value(&outcome.event).map_err(CliError::internal)?,
        );
    if let Some(path) = &a.save_model {
        release.insert("model_file", json!(path.display().to_string()));
    }
    // Regression has no accuracy and classification no MSE: drop the empty fields.
    release.drop_nulls();
    out.emit(&release.into_value());
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanism_names_are_parsed_by_name() {
        assert!(
            parse::<LabelMechanism>("gauss")
                .unwrap_err()
                .contains("gauss")
        );
    }
}
