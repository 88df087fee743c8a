//! `dpml rr`: simulate a randomized-response survey of one column — each respondent answers
//! through the randomizer, only the noisy answers are used — and estimate the population
//! frequency with its standard error and 95% interval. The true frequency is never printed.

use std::path::Path;

use clap::{Args, ValueEnum};
use dpml_data::{LoadOptions, load_table};
use dpml_mechanisms::{FrequencyEstimate, RandomizedResponse};
use serde_json::{Value, json};

use crate::args::{self, DataArgs, SeedArg};
use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};

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
    pub seed: SeedArg,
}

/// Run `dpml rr`.
pub fn run(a: &RrArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let categories = a.categories.clone().unwrap_or_else(|| vec![0.0, 1.0]);
    if categories.len() < 2 {
        return Err(CliError::usage(format!(
            "--categories needs at least 2 values, got {}",
            categories.len()
        )));
    }
    for (i, c) in categories.iter().enumerate() {
        if categories[..i].contains(c) {
            return Err(CliError::usage(format!("--categories lists {c} twice")));
        }
    }
    let rr = match (a.coin, a.epsilon) {
        (Some(Coin::Fair), _) if categories.len() != 2 => {
            return Err(CliError::usage(
                "--coin fair is a yes/no protocol: give exactly 2 categories",
            ));
        }
        (Some(Coin::Fair), _) => RandomizedResponse::fair_coin(),
        (None, Some(eps)) => RandomizedResponse::k_ary(eps, categories.len() as u32)?,
        (None, None) => return Err(CliError::usage("give --epsilon E or --coin fair")),
    };
    let opts = LoadOptions {
        data_dir: data_dir.map(Path::to_path_buf),
        label_column: a.data.label_column.clone(),
        ..LoadOptions::default()
    };
    let table = load_table(&a.data.dataset, &opts)?;
    let column = table.column(&a.column)?;
    if column.is_empty() {
        return Err(CliError::usage(format!("column {} has no rows", a.column)));
    }
    let mut rng = a.seed.rng()?;
    let mut answers = vec![0u64; categories.len()];
    for (row, v) in column.iter().enumerate() {
        let truth = categories.iter().position(|c| c == v).ok_or_else(|| {
            CliError::usage(format!(
                "row {}: value {v} of column {} is not among the categories {:?} (pass --categories)",
                row + 1,
                a.column,
                categories
            ))
        })?;
        answers[rr.respond(&mut rng, truth)?] += 1;
    }
    let est = rr.estimate(&answers)?;
    // A yes/no survey reports the proportion of the second category ("yes").
    let result = if categories.len() == 2 && a.categories.is_none() {
        json!({"estimate": est[1].estimate, "std_error": est[1].std_error, "ci95": est[1].ci95})
    } else {
        let pick =
            |f: fn(&FrequencyEstimate) -> serde_json::Value| est.iter().map(f).collect::<Vec<_>>();
        json!({"estimate": pick(|e| json!(e.estimate)), "std_error": pick(|e| json!(e.std_error)),
               "ci95": pick(|e| json!(e.ci95))})
    };
    let mut obj = result;
    obj["categories"] = json!(categories);
    obj["noisy_answer_counts"] = json!(answers);
    obj["n_records"] = json!(column.len());
    obj["epsilon"] = json!(rr.epsilon());
    obj["protocol"] = json!(if a.coin.is_some() {
        "fair coin"
    } else {
        "k-ary randomized response"
    });
    obj["true_value_withheld"] = json!(true);
    obj["event"] = json!(rr.event());
    obj["seeded"] = json!(rng.is_seeded());
    // Every figure comes from the randomised answers and the public survey size.
    let model = PrivacyModel::new(neighbouring::ANSWER, &[public::SURVEY]);
    let fields = match obj {
        Value::Object(m) => m,
        _ => return Err(CliError::internal("rr result is not an object")),
    };
    out.emit(&Release::from_map(fields, &model).into_value());
    Ok(())
}
