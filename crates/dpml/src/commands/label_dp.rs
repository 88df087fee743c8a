//! `dpml label-dp`: label differential privacy on a classification data set. Each training
//! label is privatised once (Laplace, randomized response or RR-with-prior), a model is trained
//! without further noise, and the test utility is reported next to ε (ε-label-DP: features are
//! not protected) as diagnostics: it is measured against the true labels.

use std::path::{Path, PathBuf};

use clap::Args;
use dpml_core::label_dp::{DEFAULT_MECHANISM, LabelDpOptions, LabelDpRecipe, label_dp};
use dpml_core::observe::Event;
use dpml_learn::label_dp::{LabelDpProgress, LabelMechanism, PostProcess, Task, TopKRule};

use super::train::SplitArgs;
use crate::args::{self, DataArgs, SeedArg};
use crate::error::CliResult;
use crate::ledger_args::LedgerArgs;
use crate::output::Output;
use crate::progress::Progress;
use crate::schema_args::SchemaArgs;

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
    #[arg(long, value_parser = parse::<LabelMechanism>, default_value = DEFAULT_MECHANISM.name())]
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
    pub ledger: LedgerArgs,
    #[command(flatten)]
    pub seed: SeedArg,
}

/// Run `dpml label-dp`.
pub fn run(a: &LabelDpArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let recipe = LabelDpRecipe {
        task: a.task,
        mechanism: a.mechanism,
        postprocess: a.postprocess,
        epsilon: a.epsilon,
        stages: a.stages.map(|s| s as usize),
        prior_temperature: a.prior_temperature,
        top_k_rule: a.top_k_rule,
        model: a.model.clone(),
        hidden: a
            .hidden
            .as_ref()
            .map(|h| h.iter().map(|&v| v as usize).collect()),
        epochs: a.epochs,
        batch_size: a.batch_size,
        lr: a.lr,
        optimizer: a.optimizer.clone(),
        ema: a.ema,
        no_ema: a.no_ema,
    };
    let options = LabelDpOptions {
        dataset: a.data.dataset.clone(),
        label_column: a.data.label_column.clone(),
        data_dir: data_dir.map(Path::to_path_buf),
        declarations: a.schema.declarations(),
        recipe,
        save_model: a.save_model.clone(),
        split: a.split.options(),
    };
    let mut bar: Option<Progress> = None;
    let mut observer = |e: Event<'_>| match e {
        Event::RunStarted => bar = Some(Progress::new(1, "label-dp", "step", false)),
        Event::RunFinished => {
            if let Some(b) = bar.take() {
                b.finish_and_clear();
            }
        }
        Event::LabelDp(p) => {
            if let Some(bar) = &bar {
                stage_progress(bar, p);
            }
        }
        _ => {}
    };
    let ledger = a.ledger.open(&a.seed)?;
    let release = label_dp(&options, &mut a.seed.rng()?, &mut observer, ledger.as_ref())?;
    out.emit(&release);
    Ok(())
}

/// Label-DP training's progress on `bar`: a line per stage, the steps of each.
fn stage_progress(bar: &Progress, p: &LabelDpProgress) {
    match *p {
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
    }
}

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
