//! `dpml`: differentially private machine learning from the command line.
//!
//! The binary only parses flags, calls the library crates and prints (design doc). Every
//! command takes `--json`; exit codes: 0 success, 2 bad input or usage, 1 internal failure.

mod args;
mod cluster;
mod commands;
mod error;
mod ledger_args;
mod output;
mod plot;
mod privacy_model;
mod progress;
mod report;
mod schema_args;
mod summary;
mod trials_args;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::error::CliError;
use crate::output::{Output, diag};

/// dpml: train, account for and audit differentially private machine learning.
#[derive(Parser, Debug)]
#[command(name = "dpml", version, about, propagate_version = true)]
struct Cli {
    /// Print exactly one JSON object on stdout (progress and logs go to stderr).
    #[arg(long, global = true)]
    json: bool,
    /// Leave out the "diagnostics" object of every output: figures computed from private data
    /// without noise: not differentially private (accuracies, losses, clustering quality).
    #[arg(long, global = true)]
    no_diagnostics: bool,
    #[command(flatten)]
    data_dir: args::DataDir,
    #[command(subcommand)]
    command: Option<Command>,
}

/// What `dpml` does with no command: the main job on an embedded data set, no download needed.
const DEFAULT_JOB: &[&str] = &["dpml", "train", "--preset", "digits-eps1"];

#[derive(Subcommand, Debug)]
enum Command {
    /// Train a model with DP-SGD (or without privacy) and report accuracy and ε.
    Train(commands::train::TrainArgs),
    /// Private hyperparameter search: the best of a secret, random number of DP-SGD trials;
    /// --epsilon is the total ε of the whole search.
    Tune(commands::tune::TuneArgs),
    /// Evaluate a saved model on a data set's test split.
    Eval(commands::train::EvalArgs),
    /// List the named training recipes (`dpml train --preset NAME`).
    Presets,
    /// Release a value with calibrated noise (Laplace, Gaussian, discrete variants).
    Release(commands::release::ReleaseArgs),
    /// A DP count, sum, mean or histogram of a column, optionally charged to a budget ledger.
    Query(commands::query::QueryArgs),
    /// Answer a SQL query over Parquet/CSV tables with differential privacy (one budget).
    Sql(commands::sql::SqlArgs),
    /// Simulate a randomized-response survey of a column and estimate the population frequency.
    Rr(commands::rr::RrArgs),
    /// ε of DP-SGD (or any composition) under the RDP, PLD and GDP accountants, side by side.
    Account(commands::account::AccountArgs),
    /// The noise multiplier that reaches a target ε.
    Calibrate(commands::calibrate::CalibrateArgs),
    /// Draw f-DP trade-off curves (type I against type II error) for DP-SGD.
    Tradeoff(commands::tradeoff::TradeoffArgs),
    /// Run an experiment over a grid of ε and plot utility against ε.
    Sweep(commands::sweep::SweepArgs),
    /// Benchmarks that print what they measure in one run.
    #[command(subcommand)]
    Bench(commands::bench::BenchCommand),
    /// k-means clustering, plain or differentially private (DPLloyd, input perturbation).
    Kmeans(commands::kmeans::KMeansArgs),
    /// Label differential privacy: privatise each training label once, train, report utility.
    LabelDp(commands::label_dp::LabelDpArgs),
    /// Answer classification queries with output perturbation, charged to a budget ledger.
    Predict(commands::predict::PredictArgs),
    /// Attack a trained model (loss, LiRA, one-run) and compare empirical and theoretical ε.
    Audit(commands::audit::AuditArgs),
    /// List, verify and fetch data sets.
    #[command(subcommand)]
    Data(commands::data::DataCommand),
    /// Show a saved model's architecture and the privacy facts it was saved with.
    Inspect(commands::inspect::InspectArgs),
    /// Show an architecture (a built-in name or a JSON file): layers, parameters, FLOPs.
    #[command(subcommand)]
    Arch(commands::arch::ArchCommand),
    /// Create a budget ledger, or show its entries, spent and remaining budget.
    #[command(subcommand)]
    Ledger(commands::ledger::LedgerCommand),
}

fn main() {
    quiet_engine_panics();
    // Under mpirun every rank runs this; the guard finalises MPI when main returns.
    let _mpi = cluster::init();
    let json = error::json_requested(std::env::args_os());
    let (cli, command_name) = match allow_negative_numbers(Cli::command())
        .try_get_matches_from(join_negative_values(std::env::args_os()))
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, command_path(&m))))
    {
        Ok(parsed) => parsed,
        Err(e) => exit_on_clap_error(e, json),
    };
    let command = match cli.command {
        Some(c) => c,
        None => default_job(json),
    };
    let out = Output {
        json: cli.json,
        diagnostics: !cli.no_diagnostics,
        command: command_name.unwrap_or(DEFAULT_JOB[1]),
    };
    let data_dir = cli.data_dir.data_dir.as_deref();
    let result = match &command {
        Command::Train(a) => commands::train::run(a, data_dir, out),
        Command::Tune(a) => commands::tune::run(a, data_dir, out),
        Command::Eval(a) => commands::train::eval(a, data_dir, out),
        Command::Presets => commands::train::presets(out),
        Command::Release(a) => commands::release::run(a, out),
        Command::Query(a) => commands::query::run(a, data_dir, out),
        Command::Sql(a) => commands::sql::run(a, out),
        Command::Rr(a) => commands::rr::run(a, data_dir, out),
        Command::Account(a) => commands::account::run(a, out),
        Command::Calibrate(a) => commands::calibrate::run(a, out),
        Command::Tradeoff(a) => commands::tradeoff::run(a, out),
        Command::Data(a) => commands::data::run(a, data_dir, out),
        Command::Audit(a) => commands::audit::run(a, data_dir, out),
        Command::Kmeans(a) => commands::kmeans::run(a, data_dir, out),
        Command::LabelDp(a) => commands::label_dp::run(a, data_dir, out),
        Command::Predict(a) => commands::predict::run(a, data_dir, out),
        Command::Bench(a) => commands::bench::run(a, out),
        Command::Sweep(a) => commands::sweep::run(a, data_dir, out),
        Command::Inspect(a) => commands::inspect::run(a, out),
        Command::Ledger(a) => commands::ledger::run(a, out),
        Command::Arch(a) => commands::arch::run(a, out),
    };
    if let Err(e) = result {
        e.exit(out.json);
    }
}

/// The command as a user types it, for the `"command"` field: `"train"`, `"bench dpsgd"`,
/// `"data verify"`; `None` when no command was given. Leaked once per process so that
/// [`Output`] stays `Copy` for the commands that pass it around.
fn command_path(m: &clap::ArgMatches) -> Option<&'static str> {
    let mut names = Vec::new();
    let mut current = m;
    while let Some((name, sub)) = current.subcommand() {
        names.push(name);
        current = sub;
    }
    (!names.is_empty()).then(|| &*Box::leak(names.join(" ").into_boxed_str()))
}

/// The command `dpml` runs when none is given.
fn default_job(json: bool) -> Command {
    diag!(
        "dpml: no command given; running the default job: {}",
        DEFAULT_JOB[1..].join(" ")
    );
    diag!("dpml: see `dpml --help` for all commands");
    match Cli::try_parse_from(DEFAULT_JOB) {
        Ok(Cli {
            command: Some(c), ..
        }) => c,
        Ok(_) => exit_on_clap_error(
            Cli::command().error(clap::error::ErrorKind::MissingSubcommand, "no default job"),
            json,
        ),
        Err(e) => exit_on_clap_error(e, json),
    }
}

/// Help and version print as usual; usage errors become one `error: …` line (and with
/// `--json` the error object) and exit 2.
fn exit_on_clap_error(e: clap::Error, json: bool) -> ! {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => e.exit(),
        // `dpml bench --json`: a script gets the error object, not a help page.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand if json => {
            CliError::parse("a subcommand is required (see --help)").exit(json)
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        // A value the flag's parser refused (`--epsilon -1`, `--accountant foo`) is bad
        // input; anything else (an unknown flag, a missing argument) is a malformed command.
        ErrorKind::ValueValidation | ErrorKind::InvalidValue => {
            CliError::usage(fold_clap_message(&e.render().to_string())).exit(json)
        }
        _ => CliError::parse(fold_clap_message(&e.render().to_string())).exit(json),
    }
}

/// Clap's message on one line: everything before the usage synopsis (the missing flags, the
/// "a similar argument exists" tip, the possible values), without the leading `error: `.
/// The synopsis and the "try --help" footer only repeat what `--help` says.
fn fold_clap_message(rendered: &str) -> String {
    let kept: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .collect();
    let folded = kept.join(" ");
    let folded = folded.trim_start_matches("error: ");
    if folded.is_empty() {
        "invalid usage".to_string()
    } else {
        folded.to_string()
    }
}

/// The command line with every negative number that clap would take for a flag (`-1e-5`,
/// `-inf`: clap's own rule knows only digits and a point) joined to the long flag before it
/// (`--delta=-1e-5`), so that the flag's parser names the value and says why it is refused.
/// Arguments after `--` are left alone.
fn join_negative_values(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut out: Vec<std::ffi::OsString> = Vec::new();
    let mut rest = false;
    for arg in args {
        let text = arg.to_str();
        rest |= text == Some("--");
        let negative = text.is_some_and(|t| t.starts_with('-') && t.parse::<f64>().is_ok());
        let after_flag = out
            .last()
            .and_then(|f| f.to_str())
            .is_some_and(|f| f.starts_with("--") && f.len() > 2 && !f.contains('='));
        match (negative && after_flag && !rest, out.last_mut()) {
            (true, Some(flag)) => {
                flag.push("=");
                flag.push(&arg);
            }
            _ => out.push(arg),
        }
    }
    out
}

/// A number that starts with `-` is a value (`--epsilon -1`), so the flag's own parser names
/// it and says why it is refused, instead of clap calling it an unknown flag. Clap does not
/// propagate this setting, so every subcommand gets it here.
fn allow_negative_numbers(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    names
        .into_iter()
        .fold(cmd.allow_negative_numbers(true), |cmd, name| {
            cmd.mut_subcommand(name, allow_negative_numbers)
        })
}

/// A panic inside the SQL engine's worker threads (DataFusion's, on a value too large for
/// arrow, say) is caught there and reported as the query's one-line error, so it prints
/// nothing of its own; any other panic prints as usual.
fn quiet_engine_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() != Some("tokio-rt-worker") {
            default(info);
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::join_negative_values;

    fn joined(args: &[&str]) -> Vec<String> {
        join_negative_values(args.iter().map(Into::into))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn negative_numbers_in_any_form_join_their_flag() {
        assert_eq!(
            joined(&[
                "dpml", "account", "--delta", "-1e-5", "--steps", "-inf", "-v"
            ]),
            ["dpml", "account", "--delta=-1e-5", "--steps=-inf", "-v"]
        );
        // A flag already holding its value, a short flag, and everything after `--` are kept.
        assert_eq!(
            joined(&["dpml", "--a=1", "-2e3", "-x", "-3", "--", "--b", "-4"]),
            ["dpml", "--a=1", "-2e3", "-x", "-3", "--", "--b", "-4"]
        );
    }
}
