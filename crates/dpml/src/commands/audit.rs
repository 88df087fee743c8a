//! `dpml audit`: train a target model with dpml's trainer, attack it (loss, LiRA online and
//! offline with reference models, the one-run canary audit, attribute inference on a
//! sensitive column of a tabular data set), and put each attack's empirical
//! ε lower bound beside the accountant's ε. Writes `audit.json`, `roc.png`/`roc.svg` and a
//! self-contained `report.html` under `--out`; exits 1 (after writing) when a lower bound
//! exceeds the theoretical ε.

use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args};
use dpml_audit::driver::{AttackOutcome, AuditReport, DriverError, ModelReady};
use dpml_audit::lira::Variance;
use dpml_core::audit_workflow::{self, AuditOptions, AuditOutcome, AuditPlan, Claim};
use dpml_learn::dpsgd::TrainConfig;
use serde_json::{Value, json};

use super::train::TrainingArgs;
use crate::args::{self, DataArgs, SeedArg};
use crate::error::{CliError, CliResult};
use crate::ledger_args::LedgerArgs;
use crate::output::{Output, diag};
use crate::plot::{self, Chart, Series, Style};
use crate::report;
use crate::schema_args::SchemaArgs;
use dpml_core::budget;

/// Flags of `dpml audit`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("privacy").required(true).args(["epsilon", "noise_multiplier", "non_private"])))]
// `--scores` audits a model dpml did not train: no data set, recipe or attack to name.
// `--epsilon` with `--scores` is the ε the scored model claims.
#[command(mut_group("privacy", |g| g.arg("scores").multiple(true)))]
#[command(mut_arg("dataset", |a| a.required(false).required_unless_present("scores").default_value("iris").hide_default_value(true)))]
#[command(mut_arg("attack", |a| a.required(false).required_unless_present("scores").default_value("").hide_default_value(true)))]
pub struct AuditArgs {
    /// Audit a model dpml did not train from its attack scores: a CSV with a header and the
    /// columns score (higher = member) and member (1 or 0). Uses --epsilon (the ε the model
    /// claims, checked against the attack), --delta, --confidence, --seed and --out; no data
    /// set, model or attack is needed.
    #[arg(long, value_name = "FILE", value_parser = args::input_path, conflicts_with_all = ["noise_multiplier", "non_private"])]
    pub scores: Option<PathBuf>,
    #[command(flatten)]
    pub data: DataArgs,
    /// What is declared about the data (bounds, classes), as for `dpml train`.
    #[command(flatten)]
    pub schema: SchemaArgs,
    /// The target's training recipe (the reference models reuse it). Defaults: mlp with 256
    /// hidden units, 20 epochs, batch min(64, the fewest records a model of the audit may
    /// train on), lr 0.1, SGD momentum 0.9, C = 1, δ = 1e-5.
    #[command(flatten)]
    pub training: TrainingArgs,
    #[command(flatten)]
    pub seed: SeedArg,
    /// Every model the audit trains on the data set is charged (a DP recipe only; refused
    /// before the first model when it would not fit). Not with --scores, gradient-canary or
    /// worst-case-init.
    #[command(flatten)]
    pub ledger: LedgerArgs,
    /// Records the target trains on (N); N held-out records are the non-members
    /// [default: min(2000, half the data set)].
    #[arg(long, alias = "target-size")]
    pub train_size: Option<usize>,
    /// Attacks, comma-separated: loss, lira, lira-offline, one-run, attribute, all (attribute
    /// is part of all when --sensitive-column is given); or alone: gradient-canary
    /// (white-box DP-SGD audit with Dirac gradient canaries) or worst-case-init (black-box
    /// audit of the final model from worst-case initial parameters, over --runs trainings).
    #[arg(long)]
    pub attack: String,
    /// The sensitive feature of the attribute attack, by name as in the data set's feature
    /// names (tabular data sets only; not the label).
    #[arg(long)]
    pub sensitive_column: Option<String>,
    /// Quantile bins of a sensitive column with more than 10 distinct values (each bin is
    /// represented by its median).
    #[arg(long, default_value = "5")]
    pub attribute_bins: usize,
    /// Reference models K for LiRA.
    #[arg(long, default_value = "16")]
    pub reference_models: usize,
    /// LiRA's variance model: global (one pooled variance, best below ~64 reference models)
    /// or per-example.
    #[arg(long, value_enum, default_value = "global")]
    pub lira_variance: LiraVarianceArg,
    /// Which copies of each record LiRA queries: single, or shifts (the image and its four
    /// 1-pixel shifts, log-likelihood ratios summed; images only, and useful only for models
    /// trained with such augmentations: on MNIST MLPs trained without them it lowered AUC).
    #[arg(long, default_value = "single")]
    pub lira_queries: String,
    /// Canaries m of the one-run audit [default: min(500, N/2), so that its model trains on
    /// at least N/2 records even when every canary is left out]; of the gradient-canary audit
    /// [default: min(1000, the training records)].
    #[arg(long)]
    pub canaries: Option<usize>,
    /// How the gradient-canary audit scores each canary: lr (the per-step likelihood ratio of
    /// the subsampled Gaussian, the optimal test) or sum (the plain sum of its coordinate).
    #[arg(long, value_enum, default_value = "lr")]
    pub canary_score: super::audit_white_box::CanaryScoreArg,
    /// Trainings of the worst-case-init audit (half with the target record, half without).
    #[arg(long, default_value = "200")]
    pub runs: usize,
    /// Epochs of the non-private pretraining that gives the worst-case-init audit its initial
    /// parameters.
    #[arg(long, default_value = "10")]
    pub pretrain_epochs: f64,
    /// Confidence of the lower bounds.
    #[arg(long, value_parser = args::open_unit, default_value = "0.95")]
    pub confidence: f64,
    /// Threads training models side by side [default: the CPU count].
    #[arg(long, value_parser = args::at_least_one_at_most(args::MAX_THREADS))]
    pub threads: Option<u64>,
    /// Model cache folder [default: $XDG_CACHE_HOME/dpml/audit-models, else
    /// ~/.cache/dpml/audit-models]. It holds models trained on the private data: folders it
    /// creates are private to you (mode 0700), every model file too (0600). Only seeded runs
    /// use it.
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Do not read or write cached models.
    #[arg(long)]
    pub no_cache: bool,
    /// Output folder for audit.json, roc.png, roc.svg and report.html.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `--lira-variance`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiraVarianceArg {
    /// One pooled within-example variance (IN and OUT separately).
    Global,
    /// Each example's own variance.
    PerExample,
}

impl From<LiraVarianceArg> for Variance {
    fn from(v: LiraVarianceArg) -> Self {
        match v {
            LiraVarianceArg::Global => Variance::Global,
            LiraVarianceArg::PerExample => Variance::PerExample,
        }
    }
}

/// Default batch size when `--batch-size` is not given (at most the smallest training set).
pub(super) use dpml_core::audit_workflow::DEFAULT_BATCH_SIZE;

/// The audit driver's error, classified by the library.
pub(super) fn driver_err(e: DriverError) -> CliError {
    dpml_core::Error::from(e).into()
}

/// The target's recipe ([`dpml_core::audit_workflow::recipe`]) under these flags.
pub(super) fn recipe(a: &AuditArgs) -> CliResult<TrainConfig> {
    Ok(audit_workflow::recipe(&a.training.options())?)
}

impl AuditArgs {
    /// What these flags ask of the library's audit.
    fn options(&self, data_dir: Option<&Path>) -> AuditOptions {
        AuditOptions {
            dataset: self.data.dataset.clone(),
            label_column: self.data.label_column.clone(),
            data_dir: data_dir.map(Path::to_path_buf),
            declarations: self.schema.declarations(),
            recipe: self.training.options(),
            seed: self.seed.seed,
            train_size: self.train_size,
            attack: self.attack.clone(),
            sensitive_column: self.sensitive_column.clone(),
            attribute_bins: self.attribute_bins,
            reference_models: self.reference_models,
            lira_variance: self.lira_variance.into(),
            lira_queries: self.lira_queries.clone(),
            canaries: self.canaries,
            confidence: self.confidence,
            threads: self.threads.map(|t| t as usize),
            cache: self.cache.clone(),
            no_cache: self.no_cache,
            out: self.out.clone(),
        }
    }
}

/// Run `dpml audit`.
pub fn run(a: &AuditArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    // Before anything trains or is charged: the results are written there at the end.
    let check_out = || match &a.out {
        Some(dir) => dpml_core::output_path::check_folder(
            "--out",
            dir,
            &["audit.json", "roc.png", "roc.svg", "report.html"],
        ),
        None => Ok(()),
    };
    check_out()?;
    let uncharged = a.scores.is_some()
        || [
            super::audit_white_box::ATTACK,
            super::audit_worst_case::ATTACK,
        ]
        .contains(&a.attack.trim());
    if uncharged && a.ledger.ledger.is_some() {
        return Err(CliError::usage(
            "--ledger charges the audits that train the target recipe's models (loss, lira, \
             lira-offline, one-run, attribute); not --scores, gradient-canary or worst-case-init",
        ));
    }
    if let Some(scores) = &a.scores {
        return super::audit_scores::run(a, scores, out);
    }
    if a.attack.trim() == super::audit_white_box::ATTACK {
        return super::audit_white_box::run(a, data_dir, out);
    }
    if a.attack.trim() == super::audit_worst_case::ATTACK {
        return super::audit_worst_case::run(a, data_dir, out);
    }
    let plan = AuditPlan::new(&a.options(data_dir))?;
    let ledger = a.ledger.open(&a.seed)?;
    // Again once the ledger is open (`--budget` makes it): no result may be written over it.
    check_out()?;
    let cost = match &ledger {
        Some(l) => {
            let cost = plan.cost(&a.data.dataset.name())?;
            budget::check(Some(l), &cost)?;
            Some(cost)
        }
        None => None,
    };
    let mut rng = crate::cluster::shared_rng(a.seed.rng()?);
    let bar = out.progress(plan.cfg.models_needed() as u64, "audit", "model");
    let ready = |m: &ModelReady| {
        bar.set_message(if m.from_cache { "cached" } else { "trained" });
        bar.inc(1);
    };
    // Under mpirun the models are divided among the ranks; only the root reports.
    let outcome = plan.run(&mut rng, &ready, &crate::cluster::Ranks)?;
    bar.finish_and_clear();
    let Some(AuditOutcome { report, mut result }) = outcome else {
        return Ok(());
    };
    // Recorded before anything is written.
    if let Some(cost) = &cost {
        let balance = budget::charge(ledger.as_ref(), cost)?;
        result["ledger"] = json!(balance.as_ref().map(dpml_core::ledger_json::balance));
    }
    if let Some(dir) = &a.out {
        let files = write_outputs(dir, &report, &result, &plan.recipe.model)?;
        result["files"] = files;
        write_json(&dir.join("audit.json"), &result)?;
    }
    // With --json an inconsistent audit prints only the error object (one object on stdout);
    // its figures are in audit.json when --out is given.
    if report.consistent || !out.json {
        out.emit(&result);
    }
    if !report.consistent {
        diag!("{}", inconsistency_banner(&report, Claim::Accountant));
        return Err(audit_workflow::inconsistency_error(&report, Claim::Accountant).into());
    }
    Ok(())
}

/// The loud warning printed when the audit contradicts the ε claimed for the model: by
/// dpml's accountant for a model dpml trained (the contradiction is a bug in dpml), or by the
/// model's owner for scores handed in.
pub fn inconsistency_banner(r: &AuditReport, claim: Claim) -> String {
    let line = "!".repeat(78);
    let claimed = r
        .epsilon_theoretical
        .map_or("none".into(), |e| e.to_string());
    let verdict = match claim {
        Claim::Accountant => "This is a bug in dpml: report it.",
        Claim::Owner => "The model does not keep that claim.",
    };
    format!(
        "{line}\n!! PRIVACY AUDIT FAILED: attacks {:?} show epsilon >= {:.4} with {:.0}% confidence,\n!! \
         above {} epsilon {claimed} at delta {:e}. {verdict}\n{line}",
        r.violations,
        r.epsilon_lower_bound,
        100.0 * r.confidence,
        claim.whose(),
        r.delta
    )
}

/// The end of an audit that trains its own models: `result` written as `audit.json` under
/// `--out` (if given) and printed. When the audit's lower bound `found` exceeds the
/// accountant's ε `claimed`, the run fails (exit 1) after the evidence is written, naming the
/// `attack`.
pub(super) fn finish(
    dir: Option<&Path>,
    out: Output,
    result: &Value,
    attack: &str,
    found: f64,
    claimed: f64,
) -> CliResult<()> {
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::usage(format!("cannot create {}: {e}", dir.display())))?;
        write_json(&dir.join("audit.json"), result)?;
    }
    let consistent = found <= claimed;
    if consistent || !out.json {
        out.emit(result);
    }
    if consistent {
        return Ok(());
    }
    diag!(
        "PRIVACY AUDIT FAILED: {attack} lower bound {found} exceeds the accountant's epsilon {claimed}"
    );
    Err(audit_workflow::contradiction_error(found, attack, Some(claimed), Claim::Accountant).into())
}

pub(super) fn write_json(path: &Path, v: &Value) -> CliResult<()> {
    let text = serde_json::to_string_pretty(v).map_err(CliError::internal)?;
    std::fs::write(path, text)
        .map_err(|e| CliError::usage(format!("writing {}: {e}", path.display())))
}

/// Attacks drawn on the ROC plot: every threshold attack, in report order.
fn roc_chart(r: &AuditReport, model: &str) -> Chart {
    let mut series: Vec<Series> = r
        .attacks
        .iter()
        .filter_map(|(name, o)| match o {
            AttackOutcome::Threshold(m) => Some(Series::new(
                format!("{name} (AUC {})", report::short(m.auc)),
                m.roc.clone(),
                Style::Line,
            )),
            AttackOutcome::OneRun(_) | AttackOutcome::Attribute(_) => None,
        })
        .collect();
    // Below one false positive in the sample nothing is measured: start the reference lines there.
    let non_members = r
        .attacks
        .values()
        .find_map(|o| match o {
            AttackOutcome::Threshold(m) => Some(m.non_members),
            AttackOutcome::OneRun(_) | AttackOutcome::Attribute(_) => None,
        })
        .unwrap_or(1000);
    let min_fpr = 0.5 / non_members as f64;
    let grid: Vec<f64> = dpml_accounting::fdp::alpha_grid(100)
        .into_iter()
        .filter(|&a| a >= min_fpr)
        .collect();
    series.push(Series::new(
        "random guess",
        grid.iter().map(|&a| (a, a)).collect(),
        Style::Dashed,
    ));
    let trained = format!("{model} on {}", r.dataset);
    let title = match (&r.roc_bound, r.epsilon_theoretical) {
        (Some(bound), Some(eps)) => {
            series.push(Series::new(
                format!(
                    "f-DP bound of the accountant, ε = {} (no attack may cross)",
                    report::short(eps)
                ),
                bound.iter().copied().filter(|p| p.0 >= min_fpr).collect(),
                Style::Dashed,
            ));
            format!(
                "Membership-inference ROC ({trained}, ε = {}, δ = {})",
                report::short(eps),
                report::short(r.delta)
            )
        }
        _ => format!("Membership-inference ROC ({trained}, non-private: no bound)"),
    };
    Chart {
        title,
        x_label: "false-positive rate (log scale)".into(),
        y_label: "true-positive rate (log scale)".into(),
        log_x: true,
        log_y: true,
        series,
    }
}

pub(super) fn write_outputs(
    dir: &Path,
    r: &AuditReport,
    result: &Value,
    model: &str,
) -> CliResult<Value> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::usage(format!("cannot create {}: {e}", dir.display())))?;
    let (png, svg) = plot::write(&[roc_chart(r, model)], dir, "roc")?;
    let svg_text = std::fs::read_to_string(&svg)
        .map_err(|e| CliError::internal(format!("reading {}: {e}", svg.display())))?;
    let html = dir.join("report.html");
    std::fs::write(&html, report::audit_html(r, result, &svg_text))
        .map_err(|e| CliError::usage(format!("writing {}: {e}", html.display())))?;
    Ok(json!({
        "audit_json": dir.join("audit.json"),
        "roc_png": png,
        "roc_svg": svg,
        "report_html": html,
    }))
}
