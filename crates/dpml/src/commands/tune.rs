//! `dpml tune`: a private hyperparameter search. DP-SGD trials with hyperparameters drawn at
//! random from `--search`, a secret random number of them (`--trials poisson` or
//! `truncated-negative-binomial`, mean `--trials-mean`), each scored on a private validation
//! split with noise (or on `--public-validation` records), the best model released with the
//! guarantee of the whole search: `--epsilon` is the TOTAL, and every trial's noise is
//! calibrated to meet it (refused before any training when it cannot be met). With
//! `--release-trials` every trial's hyperparameters and noisy score are released too, under
//! the composition bound over the random number of trials.

use std::path::{Path, PathBuf};

use clap::Args;
use dpml_core::observe::{Event, Observer};
use dpml_core::tune::{
    self as core_tune, DEFAULT_VALIDATION_FRACTION, Hyperparameter, SearchSpace, TrialProgress,
    TuneOptions, ValidationChoice,
};
use dpml_data::Source;
use dpml_mechanisms::TrialRelease;
use serde_json::json;

use super::train::{Bars, SourceArgs, SplitArgs, TrainingArgs};
use crate::args::{self, SeedArg};
use crate::error::{CliError, CliResult};
use crate::ledger_args::LedgerArgs;
use crate::output::{Output, diag};
use crate::plot::{self, Chart, Series, Style};
use crate::schema_args::SchemaArgs;
use crate::summary::short;
use crate::trials_args::{LawArg, TrialsArgs};

/// Flags of `dpml tune`.
#[derive(Args, Debug)]
pub struct TuneArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// The search space: comma-separated name=VALUES with VALUES LO..HI (uniform), LO..HI log
    /// (log-uniform) or A|B|C (choices), names learning-rate, max-grad-norm, batch-size, epochs,
    /// momentum; or a .toml/.json file of such entries. Batch size and epochs are whole numbers.
    #[arg(long, value_name = "SPACE")]
    pub search: String,
    /// The law of the number of trials (drawn in secret; only the best trial is released,
    /// unless --release-trials).
    #[arg(long, value_enum, value_name = "LAW", default_value = "poisson")]
    pub trials: LawArg,
    #[command(flatten)]
    pub law: TrialsArgs,
    /// Release every trial's hyperparameters and noisy score (top-level "trials"), and so
    /// their number: accounted by composition over the random number of trials instead of
    /// Papernot & Steinke's best-only bound, a larger ε (the noise is calibrated to it).
    #[arg(long)]
    pub release_trials: bool,
    /// Share of the training records held out to score the trials (per record, keyed by the
    /// split key: removing one record moves only that record).
    #[arg(long, value_parser = args::open_unit, default_value_t = DEFAULT_VALIDATION_FRACTION)]
    pub validation_fraction: f64,
    /// ε of each trial's noisy validation count (discrete Laplace, sensitivity 1; default: the
    /// total --epsilon / 10; the score sees only the validation records and
    /// training only the others, so a trial costs the larger of the two, not their sum).
    #[arg(long, value_parser = args::positive, conflicts_with = "public_validation")]
    pub score_epsilon: Option<f64>,
    /// Score the trials exactly on this data set's records (its test split if it has one),
    /// declared public: they cost no ε and are not protected.
    #[arg(long, value_name = "DATASET", value_parser = args::dataset)]
    pub public_validation: Option<Source>,
    /// The recipe the trials start from; --epsilon is the search's TOTAL ε (every trial's
    /// noise is calibrated to meet it), --noise-multiplier every trial's σ instead.
    #[command(flatten)]
    pub training: TrainingArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub seed: SeedArg,
    /// What is declared about the data (as for `dpml train`).
    #[command(flatten)]
    pub schema: SchemaArgs,
    /// Save the kept model to FILE, with the search's guarantee in its privacy facts.
    #[arg(long, value_name = "FILE", alias = "out")]
    pub save_model: Option<PathBuf>,
    /// Draw every trial's score against each hyperparameter to DIR/tune.png and .svg (a
    /// diagnostic: the trials other than the kept one are not covered by ε).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub ledger: LedgerArgs,
}

impl TuneArgs {
    /// What these flags ask of the library's search.
    fn options(&self, data_dir: Option<&Path>) -> CliResult<TuneOptions> {
        let space = if self.search.ends_with(".toml") || self.search.ends_with(".json") {
            SearchSpace::read(&args::input_path(&self.search).map_err(CliError::usage)?)?
        } else {
            SearchSpace::parse(&self.search)?
        };
        if matches!(
            self.training.accountant,
            Some(super::train::AccountantArg::Gdp)
        ) {
            return Err(CliError::usage(
                "--accountant gdp is an approximation: a search's kept run is reported with pld \
                 or rdp (the search's own ε is always RDP)",
            ));
        }
        Ok(TuneOptions {
            dataset: self.source.dataset.clone(),
            label_column: self.source.label_column.clone(),
            data_dir: data_dir.map(Path::to_path_buf),
            preset: self.source.preset.clone(),
            recipe: self.training.options(),
            split: self.split.options(),
            declarations: self.schema.declarations(),
            space,
            repetitions: self.law.repetitions(self.trials, "--trials")?,
            release: if self.release_trials {
                TrialRelease::Every
            } else {
                TrialRelease::Best
            },
            validation: match &self.public_validation {
                Some(source) => ValidationChoice::Public {
                    source: source.clone(),
                },
                None => ValidationChoice::Private {
                    fraction: self.validation_fraction,
                    score_epsilon: self.score_epsilon,
                },
            },
            save_model: self.save_model.clone(),
        })
    }
}

/// Run `dpml tune`.
pub fn run(a: &TuneArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let options = a.options(data_dir)?;
    // Open the ledger first: a bad or corrupt ledger stops the command before anything else.
    let ledger = a.ledger.open(&a.seed)?;
    // Once the ledger is open (`--budget` makes it), so that the plot is never written over it.
    if let Some(dir) = &a.plot {
        check_plot(dir, &options, out)?;
    }
    let mut rng = a.seed.rng()?;
    let mut progress = TrialLines {
        bars: Bars::new(out),
        diagnostics: out.diagnostics,
        law: options.repetitions.describe(),
        release: options.release,
    };
    let tuned = core_tune::tune(&options, &mut rng, &mut progress, ledger.as_ref())?;
    let mut release = tuned.release;
    if let Some(dir) = &a.plot {
        let charts = charts(&tuned.trials, &options.space, options.release);
        let (png, svg) = plot::write(&charts, dir, "tune")?;
        if let serde_json::Value::Object(map) = &mut release {
            map.insert("png".into(), json!(png));
            map.insert("svg".into(), json!(svg));
        }
    }
    if tuned.kept.is_none() {
        diag!("tune: the law drew no trial (K = 0): nothing was trained or saved");
    }
    out.emit(&release);
    Ok(())
}

/// Checks `--plot DIR` before any trial trains or is charged: its two files can be written
/// and are not the saved model, and the plot, which draws every trial, tells how many ran
/// only where that may be told (the number drawn is secret unless every trial is released).
fn check_plot(dir: &Path, options: &TuneOptions, out: Output) -> CliResult<()> {
    if !out.diagnostics && options.release != TrialRelease::Every {
        return Err(CliError::usage(
            "--plot draws every trial, which tells how many ran, and under --no-diagnostics \
             that number stays secret: drop --plot, or add --release-trials",
        ));
    }
    let files = ["tune.png", "tune.svg"];
    dpml_core::output_path::check_folder("--plot", dir, &files)?;
    if let Some(model) = &options.save_model {
        for f in files {
            dpml_core::output_path::check_distinct(&[
                ("--save-model", model),
                ("--plot", &dir.join(f)),
            ])?;
        }
    }
    Ok(())
}

/// Progress on stderr: the plan once the ledger (if any) accepted it, a line per trial (its
/// hyperparameters and σ; then its noisy score) unless `--no-diagnostics` (the number of
/// trials is secret unless every trial is released, and the scores of trials other than the
/// kept one are not covered by ε), and each trial's training as `dpml train` shows it.
struct TrialLines {
    bars: Bars,
    diagnostics: bool,
    /// The law of the number of trials, in words.
    law: String,
    /// What the search releases.
    release: TrialRelease,
}

impl Observer for TrialLines {
    fn observe(&mut self, event: Event<'_>) {
        // Each trial's lines, and its training's, tell how many trials ran: only where that
        // may be told.
        let tells_trials = self.diagnostics || self.release == TrialRelease::Every;
        let Event::Trial(t) = event else {
            if tells_trials {
                self.bars.observe(event);
            }
            return;
        };
        match t {
            TrialProgress::Planned { plan } => diag!(
                "tune: ε = {} in total ({} per trial), δ = {}; {}; released: {}",
                short(plan.epsilon),
                short(plan.epsilon_per_trial),
                plan.delta,
                self.law,
                plan.release.describe()
            ),
            TrialProgress::Drawn { trials } if self.release == TrialRelease::Every => {
                diag!("tune: {trials} trials drawn (released with the trials)");
            }
            TrialProgress::Drawn { trials } if self.diagnostics => {
                diag!("tune: {trials} trials drawn (secret: not part of the release)");
            }
            TrialProgress::Drawn { .. } => {}
            TrialProgress::Started {
                index,
                trials,
                point,
                noise_multiplier,
            } if tells_trials => {
                let values: Vec<String> = point
                    .values()
                    .iter()
                    .map(|&(h, v)| format!("{} {}", h.name(), short(v)))
                    .collect();
                diag!(
                    "tune: trial {index}/{trials}: {}, σ = {}",
                    values.join(", "),
                    short(*noise_multiplier)
                );
            }
            TrialProgress::Started { .. } => {}
            TrialProgress::Scored {
                index,
                record,
                best,
                ..
            } if self.diagnostics => {
                diag!(
                    "tune: trial {index}: noisy score {:.4}, validation accuracy {:.2}%{}",
                    record.noisy_score,
                    100.0 * record.validation_accuracy,
                    if *best { " (best so far)" } else { "" }
                );
            }
            TrialProgress::Scored { .. } => {}
        }
    }
}

/// One panel per hyperparameter the space varies: every trial's noisy score against its value
/// (log axis for a log range); a diagnostic unless `release` releases every trial.
fn charts(
    trials: &[core_tune::TrialRecord],
    space: &SearchSpace,
    release: TrialRelease,
) -> Vec<Chart> {
    let status = match release {
        TrialRelease::Best => "a diagnostic: only the kept trial is covered by ε",
        TrialRelease::Every => "every trial is covered by ε",
    };
    space
        .dimensions()
        .iter()
        .map(|d| {
            let h = d.hyperparameter;
            let log_x = matches!(d.values, core_tune::space::Values::Range { log: true, .. })
                || (h == Hyperparameter::BatchSize
                    && matches!(d.values, core_tune::space::Values::Choices(_)));
            let points = trials
                .iter()
                .filter_map(|t| Some((t.point().get(h)?, t.noisy_score)))
                .collect();
            Chart {
                title: format!(
                    "Noisy validation score against {} ({} trials; {status})",
                    h.name(),
                    trials.len(),
                ),
                x_label: if log_x {
                    format!("{} (log scale)", h.name())
                } else {
                    h.name().to_string()
                },
                y_label: "noisy validation score".into(),
                log_x,
                log_y: false,
                series: vec![Series::new("trial", points, Style::Points)],
            }
        })
        .collect()
}
