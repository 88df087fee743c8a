//! `dpml ledger create` and `dpml ledger show`: a budget ledger's budget is given once, when
//! it is created; every command that releases something computed from private data then
//! charges it (`--ledger`), and `show` lists what was spent against it, by whom, on what, and
//! what remains, with a plot of the spend over time.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use dpml_core::accounting::ledger::{Budget, EntryReport, format_time};
use dpml_core::budget::{Ledger, LedgerOptions};
use serde_json::{Value, json};

use crate::args;
use crate::error::CliResult;
use crate::ledger_args::{DEFAULT_BUDGET_DELTA, balance_json, passphrase};
use crate::output::Output;
use crate::plot::{self, Chart, Series, Style};

/// `dpml ledger …`.
#[derive(Subcommand, Debug)]
pub enum LedgerCommand {
    /// Create a budget ledger holding its fixed (ε, δ) budget, sealed with a key kept beside
    /// it (FILE.key, 0600) or given; an existing file is refused.
    Create(CreateArgs),
    /// List a ledger's entries (command, data set, event, ε at the ledger's δ, time), with the
    /// budget spent and what remains.
    Show(ShowArgs),
}

/// Flags of `dpml ledger create`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// The ledger file to create (it must not exist yet).
    #[arg(long, value_parser = args::input_path)]
    pub ledger: PathBuf,
    /// Total ε budget, fixed for the ledger's life.
    #[arg(long, value_parser = args::positive, alias = "budget")]
    pub budget_epsilon: f64,
    /// Total δ budget, fixed for the ledger's life; 0 makes a pure-ε ledger, composed by plain
    /// sum, that refuses any spend with δ > 0.
    #[arg(long, value_parser = args::unit_from_zero, default_value_t = DEFAULT_BUDGET_DELTA)]
    pub budget_delta: f64,
    /// The key file that seals the ledger (made with 0600 permissions if missing; default:
    /// the ledger's path with `.key` appended). With DPML_LEDGER_PASSPHRASE set, the key is
    /// derived from that passphrase instead and no key file is made.
    #[arg(long, value_name = "FILE")]
    pub ledger_key: Option<PathBuf>,
}

/// Flags of `dpml ledger show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The ledger file (it must exist; `show` never creates one).
    #[arg(long, value_parser = args::input_path)]
    pub ledger: PathBuf,
    /// The key file that seals it (default: the ledger's path with `.key` appended).
    #[arg(long, value_name = "FILE")]
    pub ledger_key: Option<PathBuf>,
    /// Also plot the spend over time to this file (.png or .svg); each entry then says the
    /// total after it (`spent_after`).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// Run `dpml ledger …`.
pub fn run(cmd: &LedgerCommand, out: Output) -> CliResult<()> {
    match cmd {
        LedgerCommand::Create(a) => {
            let budget = Budget::new(a.budget_epsilon, a.budget_delta)?;
            let key = LedgerOptions::new(a.ledger.clone())
                .with_key(a.ledger_key.clone(), passphrase())
                .key;
            let ledger = Ledger::create_with(&a.ledger, budget, &key)?.with_tightest();
            let mut v = report(&ledger, None)?;
            v["key"] = json!(key.file_for(&a.ledger).map_or_else(
                || "passphrase (DPML_LEDGER_PASSPHRASE)".to_string(),
                |p| p.display().to_string()
            ));
            out.emit(&v);
        }
        LedgerCommand::Show(a) => {
            let key = LedgerOptions::new(a.ledger.clone())
                .with_key(a.ledger_key.clone(), passphrase())
                .key;
            if let Some(path) = &a.plot {
                dpml_core::output_path::check_writable("--plot", path)?;
            }
            let ledger = Ledger::open_stored_with(&a.ledger, &key)?.with_tightest();
            // The spend over time costs a composition per entry: only for the plot.
            let history = ledger.history(a.plot.is_some())?;
            let mut v = report(&ledger, Some(&history))?;
            if let Some(path) = &a.plot {
                plot::write_file(&[spend_chart(&ledger, &history)], path)?;
                v["plot"] = json!(path);
            }
            out.emit(&v);
        }
    }
    Ok(())
}

/// The ledger's file, budget and balance (as the spending commands report it); with its
/// `history`, every entry too, under `"entries"` instead of their count.
fn report(ledger: &Ledger, history: Option<&[EntryReport]>) -> CliResult<Value> {
    let budget = ledger.budget();
    let balance = ledger.balance()?;
    let mut v = balance_json(&balance);
    if let Some(history) = history {
        let entries: Vec<Value> = history.iter().map(dpml_core::ledger_json::entry).collect();
        v["entries"] = json!(entries);
    }
    v["ledger"] = json!(ledger.path());
    v["budget"] = json!({"epsilon": budget.epsilon, "delta": budget.delta});
    Ok(v)
}

/// The composed ε after each entry against the time it was recorded (hours since the first),
/// with the budget as a dashed line.
fn spend_chart(ledger: &Ledger, history: &[EntryReport]) -> Chart {
    let start = history.first().map_or(0, |e| e.entry.time_unix);
    let hours = |t: i64| (t - start) as f64 / 3600.0;
    let mut points = vec![(0.0, 0.0)];
    points.extend(
        history
            .iter()
            .filter_map(|e| Some((hours(e.entry.time_unix), e.spent_after?))),
    );
    let end = points.last().map_or(1.0, |p| p.0.max(1.0 / 60.0));
    let budget = ledger.budget().epsilon;
    Chart {
        title: format!("ε spent of the budget ε = {budget}"),
        x_label: format!("hours since {}", format_time(start)),
        y_label: format!("ε spent (at δ = {})", ledger.budget().delta),
        log_x: false,
        log_y: false,
        series: vec![
            Series::new("spent", points, Style::LineWithPoints),
            Series::new("budget", vec![(0.0, budget), (end, budget)], Style::Dashed),
        ],
    }
}
