//! `dpml rr`: simulate a randomized-response survey of one column — each respondent answers
//! through the randomizer, only the noisy answers are used — and estimate the population
//! frequency with its standard error and 95% interval. The true frequency is never printed.

use std::path::Path;

use clap::{Args, ValueEnum};
use dpml_core::rr::{RrOptions, rr};

use crate::args::{self, DataArgs, SeedArg};
use crate::error::CliResult;
use crate::ledger_args::LedgerArgs;
use crate::output::Output;

/// Coin-flip protocols.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum Coin {
    /// Heads: answer truthfully; tails: toss again and answer yes on heads (ε = ln 3).
    Fair,
}

/// Flags of `dpml rr`.
#[derive(Args, Debug)]
pub struct RrArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// Column holding each respondent's true answer.
    #[arg(long)]
    pub column: String,
    /// The answer categories, e.g. 0,1,2 (default: a yes/no column with values 0 and 1).
    #[arg(long, value_delimiter = ',', value_parser = args::finite, allow_hyphen_values = true)]
    pub categories: Option<Vec<f64>>,
    /// ε of each answer.
    #[arg(long, value_parser = args::positive, conflicts_with = "coin", required_unless_present = "coin")]
    pub epsilon: Option<f64>,
    /// The coin-flip survey protocol instead of --epsilon (yes/no questions).
    #[arg(long, value_enum)]
    pub coin: Option<Coin>,
    #[command(flatten)]
    pub ledger: LedgerArgs,
    #[command(flatten)]
    pub seed: SeedArg,
}

/// Run `dpml rr`.
pub fn run(a: &RrArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let options = RrOptions {
        dataset: a.data.dataset.clone(),
        label_column: a.data.label_column.clone(),
        data_dir: data_dir.map(Path::to_path_buf),
        column: a.column.clone(),
        categories: a.categories.clone(),
        epsilon: a.epsilon,
        fair_coin: matches!(a.coin, Some(Coin::Fair)),
    };
    let ledger = a.ledger.open(&a.seed)?;
    out.emit(&rr(&options, &mut a.seed.rng()?, ledger.as_ref())?);
    Ok(())
}
