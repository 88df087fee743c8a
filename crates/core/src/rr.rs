//! A randomized-response survey of one column, simulated: each respondent answers through the
//! randomizer, only the noisy answers are used, and the population frequency is estimated with
//! its standard error and 95% interval. The true frequency is never released.

use std::path::PathBuf;

use dpml_data::{LoadOptions, Source, load_table};
use dpml_mechanisms::{DpRng, FrequencyEstimate, RandomizedResponse};
use serde_json::{Value, json};

use crate::budget::{self, Charge, Ledger, Neighbouring};
use crate::error::{Error, Result};
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};

/// The survey.
#[derive(Debug, Clone)]
pub struct RrOptions {
    /// The table.
    pub dataset: Source,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// Column holding each respondent's true answer.
    pub column: String,
    /// The answer categories (default: 0 and 1, a yes/no question, whose estimate is the
    /// share of "yes").
    pub categories: Option<Vec<f64>>,
    /// ε of each answer (k-ary randomized response).
    pub epsilon: Option<f64>,
    /// The fair-coin protocol instead (yes/no questions, ε = ln 3).
    pub fair_coin: bool,
}

/// Simulates the survey of `a` (each respondent's answer randomised with `rng`) and estimates
/// the population frequency from the noisy answers alone; with a `ledger`, each answer's ε is
/// charged (checked before any answer is drawn, recorded before the estimate is returned).
///
/// # Errors
/// Usage errors naming the bad value: fewer than 2 or repeated categories, the fair coin on
/// more than 2, no protocol, an empty column or a value outside the categories.
pub fn rr(a: &RrOptions, rng: &mut DpRng, ledger: Option<&Ledger>) -> Result<Value> {
    let categories = a.categories.clone().unwrap_or_else(|| vec![0.0, 1.0]);
    if categories.len() < 2 {
        return Err(Error::usage(format!(
            "--categories needs at least 2 values, got {}",
            categories.len()
        )));
    }
    for (i, c) in categories.iter().enumerate() {
        if categories[..i].contains(c) {
            return Err(Error::usage(format!("--categories lists {c} twice")));
        }
    }
    let rr = match (a.fair_coin, a.epsilon) {
        (true, _) if categories.len() != 2 => {
            return Err(Error::usage(
                "--coin fair is a yes/no protocol: give exactly 2 categories",
            ));
        }
        (true, _) => RandomizedResponse::fair_coin(),
        (false, Some(eps)) => RandomizedResponse::k_ary(eps, categories.len() as u32)?,
        (false, None) => return Err(Error::usage("give --epsilon E or --coin fair")),
    };
    let charge = Charge::of("rr", a.dataset.name(), rr.event(), rr.epsilon(), 0.0)
        .labelled(format!("randomized response on {}", a.column))
        .under(Neighbouring::Answer);
    budget::check(ledger, &charge)?;
    let opts = LoadOptions {
        data_dir: a.data_dir.clone(),
        label_column: a.label_column.clone(),
        ..LoadOptions::default()
    };
    let table = load_table(&a.dataset, &opts)?;
    let column = table.column(&a.column)?;
    if column.is_empty() {
        return Err(Error::usage(format!("column {} has no rows", a.column)));
    }
    let mut answers = vec![0u64; categories.len()];
    for (row, v) in column.iter().enumerate() {
        let truth = categories.iter().position(|c| c == v).ok_or_else(|| {
            Error::usage(format!(
                "row {}: value {v} of column {} is not among the categories {:?} (pass --categories)",
                row + 1,
                a.column,
                categories
            ))
        })?;
        answers[rr.respond(rng, truth)?] += 1;
    }
    let est = rr.estimate(&answers)?;
    let balance = budget::charge(ledger, &charge)?;
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
    obj["protocol"] = json!(if a.fair_coin {
        "fair coin"
    } else {
        "k-ary randomized response"
    });
    obj["true_value_withheld"] = json!(true);
    obj["event"] = json!(rr.event());
    obj["seeded"] = json!(rng.is_seeded());
    // Every figure comes from the randomised answers and the public survey size.
    let model = PrivacyModel::new(neighbouring::ANSWER, &[public::SURVEY]);
    if let Some(b) = balance {
        obj["ledger"] = crate::ledger_json::balance(&b);
    }
    let fields = match obj {
        Value::Object(m) => m,
        _ => return Err(Error::internal("rr result is not an object")),
    };
    Ok(Release::from_map(fields, &model).into_value())
}
