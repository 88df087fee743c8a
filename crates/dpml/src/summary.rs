//! The human rendering of a command's result (without `--json`): a headline that says what
//! happened, a small aligned table of the fields that matter, then the diagnostics under a
//! heading that says what they are. Built from the same JSON value `--json` prints, so
//! commands need not change; `--json` has every field.
//!
//! Each command with a summary of its own has a headline function and a list of key fields
//! ([`SPECIFIC`]); any other command gets a generic headline and its top-level scalars.

use std::fmt::Write as _;

use serde_json::Value;

use crate::privacy_model::{DIAGNOSTICS_KEY, DIAGNOSTICS_MEANING};

/// A command's headline, from its result and (when printed) its diagnostics.
type Headline = fn(&Value, Option<&Value>) -> String;

/// One command's summary: headline, the key fields (dotted paths into the JSON), and for a
/// result that is a list (`"presets"`, `"results"`), that list's key and the columns shown.
struct Summary {
    command: &'static str,
    headline: Headline,
    fields: &'static [&'static str],
    rows: Option<(&'static str, &'static [&'static str])>,
}

/// The commands with a summary of their own.
const SPECIFIC: &[Summary] = &[
    Summary {
        command: "train",
        headline: train,
        fields: &[
            "model",
            "dataset",
            "epsilon",
            "delta",
            "accountant",
            "noise_multiplier",
            "sampling_rate",
            "steps",
            "epochs",
            "batch_size",
            "learning_rate",
            "max_grad_norm",
            "train_size",
            "model_file",
            "split_key",
            "notes",
            "seeded",
            "wall_seconds",
        ],
        rows: None,
    },
    Summary {
        command: "tune",
        headline: tune,
        fields: &[
            "model",
            "dataset",
            "epsilon",
            "epsilon_per_trial",
            "epsilon_kept_run",
            "delta",
            "tuning.description",
            "tuning.released",
            "best.learning_rate",
            "best.max_grad_norm",
            "best.batch_size",
            "best.epochs",
            "best.momentum",
            "best.noisy_score",
            "best.noise_multiplier",
            "score.validation",
            "score.validation_size",
            "train_size",
            "model_file",
            "split_key",
            "notes",
            "seeded",
        ],
        rows: None,
    },
    Summary {
        command: "eval",
        headline: eval,
        fields: &[
            "model_file",
            "dataset",
            "model_privacy.guarantee",
            "model_privacy.epsilon",
            "model_privacy.delta",
            "split_key",
        ],
        rows: None,
    },
    Summary {
        command: "account",
        headline: account,
        fields: &[
            "epsilon.pld",
            "pld_lower",
            "pld_gap",
            "epsilon.rdp",
            "epsilon.gdp",
            "delta",
            "inputs.noise_multiplier",
            "inputs.sampling_rate",
            "inputs.steps",
            "mu",
        ],
        rows: None,
    },
    Summary {
        command: "calibrate",
        headline: calibrate,
        fields: &[
            "noise_multiplier",
            "epsilon",
            "target_epsilon",
            "delta",
            "accountant",
            "inputs.sampling_rate",
            "inputs.steps",
        ],
        rows: None,
    },
    Summary {
        command: "release",
        headline: released,
        fields: &["values", "mechanism", "epsilon", "delta", "scale", "count"],
        rows: None,
    },
    Summary {
        command: "query",
        headline: released,
        fields: &[
            "value",
            "aggregate",
            "column",
            "mechanism",
            "epsilon",
            "delta",
            "scale",
            "sensitivity",
            "ledger.spent",
            "ledger.remaining",
        ],
        rows: None,
    },
    Summary {
        command: "sql",
        headline: sql,
        fields: &[
            "epsilon",
            "delta",
            "ledger.spent",
            "ledger.remaining",
            "seeded",
        ],
        rows: Some((
            "columns",
            &[
                "name",
                "mechanism",
                "epsilon",
                "noise_scale",
                "half_width_95",
            ],
        )),
    },
    Summary {
        command: "inspect",
        headline: |v, _| {
            let privacy = v.get("privacy").unwrap_or(&Value::Null);
            let what = match privacy.get("guarantee").and_then(Value::as_str) {
                Some("unknown") | None => "privacy facts unknown (not written by this dpml)".into(),
                Some("invalid") => "privacy facts invalid: no stated guarantee".into(),
                Some("non-private") => "non-private".into(),
                Some(g) => format!("{g}, {}", guarantee(privacy)),
            };
            format!(
                "{} on records of shape {}, {} parameters: {what}",
                field(v, "architecture.name"),
                field(v, "architecture.input_shape"),
                field(v, "parameters")
            )
        },
        fields: &[
            "model",
            "privacy.guarantee",
            "privacy.problems",
            "privacy.epsilon",
            "privacy.delta",
            "privacy.accountant",
            "privacy.bounds",
            "privacy.noise_multiplier",
            "privacy.sampling_rate",
            "privacy.steps",
            "privacy.max_grad_norm",
            "privacy.label_mechanism",
            "privacy.neighbouring",
            "privacy.dataset",
            "privacy.train_size",
            "privacy.seeded",
            "privacy.dpml_version",
            "privacy.created",
            "privacy.note",
            "input_transform.shift",
            "input_transform.scale",
        ],
        rows: Some(("layers", &["index", "layer", "tensors"])),
    },
    Summary {
        command: "arch show",
        headline: |v, _| {
            format!(
                "{} on records of shape {}: {} parameters, {} FLOPs per sample",
                field(v, "name"),
                field(v, "input_shape"),
                field(v, "parameters"),
                field(v, "flops_per_sample")
            )
        },
        fields: &["output_shape", "flops_counted_as"],
        rows: Some((
            "layers",
            &["index", "type", "output_shape", "parameters", "flops"],
        )),
    },
    Summary {
        command: "ledger create",
        headline: |v, _| {
            format!(
                "created ledger {} with the budget ε = {}, δ = {}",
                field(v, "ledger"),
                field(v, "budget.epsilon"),
                field(v, "budget.delta")
            )
        },
        fields: &[
            "ledger",
            "key",
            "budget.epsilon",
            "budget.delta",
            "composition",
        ],
        rows: None,
    },
    Summary {
        command: "ledger show",
        headline: |v, _| {
            format!(
                "ledger {}: ε spent {} of {}, {} remaining ({} entries); {}",
                field(v, "ledger"),
                field(v, "spent"),
                field(v, "budget.epsilon"),
                field(v, "remaining"),
                count(v, "entries"),
                ledger_delta(v)
            )
        },
        fields: &[
            "budget.epsilon",
            "budget.delta",
            "spent",
            "remaining",
            "spent_delta",
            "remaining_delta",
            "composition",
            "plot",
        ],
        rows: Some((
            "entries",
            &[
                "id",
                "time",
                "command",
                "dataset",
                "label",
                "neighbouring",
                "epsilon_at_ledger_delta",
                "spent_after",
            ],
        )),
    },
    Summary {
        command: "rr",
        headline: |v, _| {
            format!(
                "estimated frequency {} (95% interval {}) from {} randomised answers, {}",
                field(v, "estimate"),
                field(v, "ci95"),
                field(v, "n_records"),
                guarantee(v)
            )
        },
        fields: &[
            "estimate",
            "ci95",
            "std_error",
            "n_records",
            "categories",
            "epsilon",
        ],
        rows: None,
    },
    Summary {
        command: "kmeans",
        headline: |v, _| {
            format!(
                "clustered {} records into {} clusters ({}), {}",
                field(v, "train_size"),
                field(v, "k"),
                field(v, "algorithm"),
                guarantee(v)
            )
        },
        fields: &[
            "algorithm",
            "k",
            "iterations",
            "train_size",
            "epsilon",
            "delta",
            "seeded",
        ],
        rows: Some(("centroids", &[])),
    },
    Summary {
        command: "label-dp",
        headline: |v, d| {
            format!(
                "trained {} on {} with label DP ({}){}, {}",
                field(v, "model"),
                field(v, "dataset"),
                field(v, "mechanism"),
                diagnostic_accuracy(d, "test_accuracy", "test accuracy"),
                guarantee(v)
            )
        },
        fields: &[
            "model",
            "dataset",
            "mechanism",
            "epsilon",
            "epochs",
            "learning_rate",
            "train_size",
            "seeded",
            "wall_seconds",
        ],
        rows: None,
    },
    Summary {
        command: "predict",
        headline: |v, _| {
            // The total adds the queries up; a ledger composes its entries with the tighter of
            // that and its accountant, so its figure can be smaller: say which is which.
            let ledger = match v.get("ledger") {
                Some(l) if !l.is_null() => format!(
                    "; the ledger's spend is {} (composed: {})",
                    field(l, "spent"),
                    field(l, "composition")
                ),
                _ => String::new(),
            };
            format!(
                "answered {} queries with output perturbation: ε = {} per query, {} in all by adding them up{ledger}",
                field(v, "queries"),
                field(v, "epsilon"),
                field(v, "epsilon_total")
            )
        },
        fields: &[
            "predictions",
            "model_file",
            "dataset",
            "epsilon",
            "epsilon_total",
            "noise_scale",
            "ledger.spent",
            "ledger.remaining",
            "ledger.composition",
        ],
        rows: None,
    },
    Summary {
        command: "tradeoff",
        headline: |v, _| {
            format!(
                "trade-off curve of DP-SGD: μ = {}, ε = {} (PLD, δ = {}); plot {}",
                field(v, "mu"),
                field(v, "epsilon.pld"),
                field(v, "delta"),
                field(v, "png")
            )
        },
        fields: &[
            "mu",
            "epsilon.pld",
            "epsilon.rdp",
            "delta",
            "points",
            "csv",
            "png",
            "svg",
        ],
        rows: None,
    },
    Summary {
        command: "sweep",
        headline: |v, _| {
            let folds = match v.get("folds").and_then(Value::as_u64) {
                Some(k) => format!(" of {k} folds each"),
                None => String::new(),
            };
            format!(
                "sweep of {} on {}: {} runs{folds} over ε in {}; plot {}",
                field(v, "experiment"),
                field(v, "dataset"),
                field(v, "runs"),
                field(v, "epsilons"),
                field(v, "png")
            )
        },
        fields: &[
            "experiment",
            "dataset",
            "epsilons",
            "repeats",
            "runs",
            "results_csv",
            "summary_csv",
            "png",
            "svg",
        ],
        rows: None,
    },
    Summary {
        command: "audit",
        headline: audit,
        fields: &[
            "epsilon_lower_bound",
            "epsilon_theoretical",
            "verdict",
            "best_attack",
            "confidence",
            "train_size",
            "reference_models",
            "models_trained",
            "models_from_cache",
            "report",
            "wall_seconds",
        ],
        rows: None,
    },
    Summary {
        command: "bench dpsgd",
        headline: |v, _| {
            format!(
                "DP-SGD throughput of {}: {} samples/s private, {} non-private (ratio {})",
                field(v, "model"),
                field(v, "private_samples_per_sec"),
                field(v, "nonprivate_samples_per_sec"),
                field(v, "ratio")
            )
        },
        fields: &[
            "model",
            "parameters",
            "batch_size",
            "steps",
            "threads",
            "private_samples_per_sec",
            "nonprivate_samples_per_sec",
            "exact_noise_samples_per_sec",
        ],
        rows: None,
    },
    Summary {
        command: "presets",
        headline: |v, _| {
            format!(
                "{} training presets (dpml train --preset NAME)",
                count(v, "presets")
            )
        },
        fields: &[],
        rows: Some((
            "presets",
            &[
                "name",
                "dataset",
                "model",
                "epsilon",
                "expected_accuracy",
                "time",
            ],
        )),
    },
    Summary {
        command: "data list",
        headline: |v, _| format!("{} data sets", count(v, "datasets")),
        fields: &[],
        rows: Some((
            "datasets",
            &[
                "name",
                "available",
                "rows",
                "features",
                "classes",
                "location",
            ],
        )),
    },
    Summary {
        command: "data verify",
        headline: |v, _| {
            format!(
                "verified {} files: {} ok, {} mismatched, {} missing",
                count(v, "files"),
                field(v, "ok"),
                field(v, "mismatched"),
                field(v, "missing")
            )
        },
        fields: &[],
        rows: Some(("files", &["status", "path"])),
    },
    Summary {
        command: "bench sql",
        headline: |v, _| {
            format!(
                "DP SQL against DataFusion without DP: {} TPC-H queries at scale factor {} ({} runs each)",
                count(v, "queries"),
                field(v, "scale_factor"),
                field(v, "runs")
            )
        },
        fields: &[
            "machine.cpu",
            "machine.cores",
            "memory_limit",
            "epsilon",
            "delta",
        ],
        rows: Some((
            "queries",
            &[
                "name",
                "dp_seconds",
                "plain_seconds",
                "time_ratio",
                "rows_per_second",
                "peak_rss_bytes",
                "median_relative_error",
            ],
        )),
    },
    Summary {
        command: "bench accounting",
        headline: |v, _| format!("accounting benchmark: {} step counts", count(v, "results")),
        fields: &["noise_multiplier", "sampling_rate", "delta", "repeats"],
        rows: Some((
            "results",
            &[
                "steps",
                "rdp.epsilon",
                "pld.epsilon",
                "gdp.epsilon",
                "rdp.ms",
                "pld.ms",
                "calibration_pld.ms",
            ],
        )),
    },
];

/// The human text for `command`'s `result` (its diagnostics already taken out and passed as
/// `diagnostics` when they are to be printed).
pub fn render(command: &str, result: &Value, diagnostics: Option<&Value>) -> String {
    let specific = SPECIFIC.iter().find(|s| s.command == command);
    let mut out = String::new();
    let headline = specific.map_or_else(
        || generic_headline(command, result),
        |s| (s.headline)(result, diagnostics),
    );
    let _ = writeln!(out, "{headline}");
    let rows: Vec<(String, String)> = match specific {
        Some(s) => s
            .fields
            .iter()
            .filter_map(|path| {
                lookup(result, path)
                    .filter(|v| !v.is_null())
                    .map(|v| (path.to_string(), text(v)))
            })
            .collect(),
        None => top_level_scalars(result),
    };
    table(&mut out, &rows);
    if let Some((key, columns)) = specific.and_then(|s| s.rows) {
        list(&mut out, result.get(key), columns);
    }
    if let Some(d) = diagnostics {
        let _ = writeln!(out, "\n{DIAGNOSTICS_KEY} ({DIAGNOSTICS_MEANING}):");
        table(&mut out, &flatten(d));
        // Lists of records (a sweep's summary rows) as tables of their scalar columns.
        for (key, items) in d.as_object().into_iter().flatten() {
            let first = items
                .as_array()
                .and_then(|a| a.first())
                .and_then(Value::as_object);
            if let Some(first) = first {
                let columns: Vec<&str> = first
                    .iter()
                    .filter(|(_, v)| is_scalar(v))
                    .map(|(k, _)| k.as_str())
                    .collect();
                let _ = write!(out, "  {key}:");
                list(&mut out, Some(items), &columns);
            }
        }
    }
    let _ = writeln!(out, "\n(every field: add --json)");
    out
}

fn train(v: &Value, d: Option<&Value>) -> String {
    // A regression's headline figure is its test MSE (its "accuracy" is only the share of
    // predictions within 0.5 of the label).
    let accuracy = match d.and_then(|d| d.get("test_mse")).and_then(Value::as_f64) {
        Some(mse) => format!("test MSE {}", short(mse)),
        None => diagnostic_accuracy(d, "test_accuracy", "test accuracy"),
    };
    let accuracy = accuracy.trim_start_matches(", ");
    let sep = if accuracy.is_empty() { "" } else { ", " };
    format!(
        "trained {} on {}: {accuracy}{sep}{}",
        field(v, "model"),
        field(v, "dataset"),
        guarantee(v)
    )
}

/// `dpml tune`: what was kept, its test accuracy (a diagnostic) and the search's guarantee
/// beside one trial's and the kept run's own.
fn tune(v: &Value, d: Option<&Value>) -> String {
    if v.get("best").is_none() {
        return format!(
            "the search drew no trial: nothing was trained; {}",
            guarantee(v)
        );
    }
    format!(
        "kept {} on {} (noisy validation score {}){}: {} for the whole search, {} for one \
         trial, {} the kept run alone would claim",
        field(v, "model"),
        field(v, "dataset"),
        field(v, "best.noisy_score"),
        diagnostic_accuracy(d, "test_accuracy", "test accuracy"),
        guarantee(v),
        field(v, "epsilon_per_trial"),
        field(v, "epsilon_kept_run"),
    )
}

/// The audit's headline: the best attack's AUC and TPR at 0.1% FPR, the empirical lower bound
/// and what it is checked against (or that there is no claim to check).
fn audit(v: &Value, _: Option<&Value>) -> String {
    // The attack with the best bound; when none bounds ε above 0, the one of highest AUC.
    let attacks = v.get("attacks").and_then(Value::as_object);
    let auc = |a: &Value| a.get("auc").and_then(Value::as_f64).unwrap_or(0.0);
    let best = v
        .get("best_attack")
        .and_then(Value::as_str)
        .filter(|b| !b.is_empty())
        .and_then(|b| attacks?.get_key_value(b))
        .or_else(|| attacks?.iter().max_by(|x, y| auc(x.1).total_cmp(&auc(y.1))));
    let attack = match best {
        Some((name, a)) => format!(
            "{name} (AUC {}, TPR {} at 0.1% FPR)",
            field(a, "auc"),
            a.get("tpr_at_fpr")
                .and_then(|t| t.get("0.001"))
                .and_then(Value::as_f64)
                .map_or("-".into(), percent)
        ),
        None => "-".into(),
    };
    let claim = match v.get("epsilon_theoretical").filter(|e| !e.is_null()) {
        Some(e) => format!("the model's ε {}: {}", text(e), field(v, "verdict")),
        None => "no claim to check (the model states no ε)".into(),
    };
    format!(
        "audit on {}: attack {attack}, empirical ε ≥ {} (confidence {}); {claim}",
        field(v, "dataset"),
        field(v, "epsilon_lower_bound"),
        field(v, "confidence"),
    )
}

/// What a ledger's δ figures mean: spent by adding up (basic composition), or the δ at which
/// the accountant's ε holds (the whole budget's δ, not a sum spent).
fn ledger_delta(v: &Value) -> String {
    match v.get("composition").and_then(Value::as_str) {
        Some(c) if c.starts_with("basic") => format!("δ spent {}", field(v, "spent_delta")),
        Some(c) => format!(
            "ε composed by {c} holds at the budget's δ = {} (δ is not spent entry by entry)",
            field(v, "budget.delta")
        ),
        None => String::new(),
    }
}

fn eval(v: &Value, d: Option<&Value>) -> String {
    format!(
        "evaluated {} on {}{}",
        field(v, "model_file"),
        field(v, "dataset"),
        diagnostic_accuracy(d, "test_accuracy", "test accuracy")
    )
}

/// `, test accuracy 94.9%` from the diagnostics, or nothing when they are not printed: the
/// headline must not show what `--no-diagnostics` leaves out.
fn diagnostic_accuracy(d: Option<&Value>, key: &str, name: &str) -> String {
    d.and_then(|d| d.get(key))
        .and_then(Value::as_f64)
        .map_or(String::new(), |a| format!(", {name} {}", percent(a)))
}

fn account(v: &Value, _: Option<&Value>) -> String {
    let eps = |k: &str| lookup(v, &format!("epsilon.{k}")).map_or("-".into(), text);
    if v.get("tuning").is_some() {
        return format!(
            "ε = {} (RDP) for the search ({}; released: {}), {} for one trial, at δ = {}",
            eps("rdp"),
            field(v, "tuning.description"),
            field(v, "tuning.released"),
            field(v, "epsilon_per_trial"),
            field(v, "delta")
        );
    }
    // The PLD's own error bar: its lower bound beside the upper bound it reports.
    let pld = match lookup(v, "pld_lower") {
        Some(lower) => format!("{} (PLD; lower bound {})", eps("pld"), text(lower)),
        None => format!("{} (PLD)", eps("pld")),
    };
    format!(
        "ε = {pld}, {} (RDP), {} (GDP approximation) at δ = {}",
        eps("rdp"),
        eps("gdp"),
        field(v, "delta")
    )
}

fn calibrate(v: &Value, _: Option<&Value>) -> String {
    format!(
        "noise multiplier σ = {} reaches {}",
        field(v, "noise_multiplier"),
        guarantee(v)
    )
}

/// `release` and `query`: what was released and under which guarantee.
fn released(v: &Value, _: Option<&Value>) -> String {
    let what = v
        .get("value")
        .or_else(|| v.get("values"))
        .map_or("-".into(), text);
    format!("released {what} with {}", guarantee(v))
}

/// `dpml sql`: the released rows as a table (their noise per column follows the headline's
/// fields); with `--explain`, the plan and each aggregate's groups instead.
fn sql(v: &Value, _: Option<&Value>) -> String {
    let mut out = String::new();
    if v.get("explain").is_some() {
        let _ = writeln!(
            out,
            "would release {} aggregate(s) with {}, reading no private row",
            count(v, "columns"),
            guarantee(v)
        );
        let _ = writeln!(
            out,
            "
plan run on the released cells:
{}",
            field(v, "plan")
        );
        for (i, a) in v["aggregates"].as_array().into_iter().flatten().enumerate() {
            let _ = writeln!(out, "aggregate {} of {}:", i + 1, text(&a["tables"]));
            for unit in a["privacy_units"].as_array().into_iter().flatten() {
                let _ = writeln!(out, "  privacy unit of {}", text(unit));
            }
            let _ = writeln!(
                out,
                "  L0 = {}, L∞ = {}",
                text(&a["max_groups_per_unit"]),
                text(&a["max_rows_per_unit_per_group"])
            );
            for g in a["groups"].as_array().into_iter().flatten() {
                let _ = writeln!(
                    out,
                    "  GROUP BY {}: {}",
                    text(&g["expression"]),
                    text(&g["keys"])
                );
            }
            if let Some(t) = a.get("threshold").filter(|t| !t.is_null()) {
                let chances: Vec<String> = t["release_probability"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        format!(
                            "{} units: {}",
                            text(&p[0]),
                            percent(p[1].as_f64().unwrap_or(0.0))
                        )
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "  keys released when the noisy unit count reaches τ = {} (noise scale {}); chance: {}",
                    text(&t["tau"]),
                    text(&t["noise_scale"]),
                    chances.join(", ")
                );
            }
        }
        return out.trim_end().to_string();
    }
    let names: Vec<String> = v["column_names"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    let rows = v["rows"].as_array().cloned().unwrap_or_default();
    let _ = write!(out, "released {} row(s) with {}", rows.len(), guarantee(v));
    let mut cells: Vec<Vec<String>> = vec![names.clone()];
    cells.extend(rows.iter().map(|r| {
        names
            .iter()
            .map(|n| r.get(n).map_or("-".into(), text))
            .collect()
    }));
    let _ = writeln!(out);
    let _ = writeln!(out);
    aligned(&mut out, &cells);
    for w in v["warnings"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  warning: {}", text(w));
    }
    out.trim_end().to_string()
}

/// `ε = 3.00 (δ = 1e-5, PLD upper bound)`, or `non-private` when ε is absent.
fn guarantee(v: &Value) -> String {
    let Some(eps) = v.get("epsilon").and_then(Value::as_f64) else {
        return "non-private (no ε)".into();
    };
    let mut note = Vec::new();
    match v.get("delta").and_then(Value::as_f64) {
        Some(d) if d > 0.0 => note.push(format!("δ = {}", short(d))),
        Some(_) => note.push("pure ε-DP".into()),
        None => {}
    }
    let accountant = v
        .get("accountant")
        .and_then(Value::as_str)
        .map(str::to_uppercase);
    let bound = v
        .get("bounds")
        .and_then(Value::as_str)
        .map(|b| b.replace('_', " "));
    let how: Vec<String> = accountant.into_iter().chain(bound).collect();
    if !how.is_empty() {
        note.push(how.join(" "));
    }
    if note.is_empty() {
        format!("ε = {}", short(eps))
    } else {
        format!("ε = {} ({})", short(eps), note.join(", "))
    }
}

fn generic_headline(command: &str, v: &Value) -> String {
    match v.get("epsilon").filter(|e| e.is_number()) {
        Some(_) => format!("{command}: done, {}", guarantee(v)),
        None => format!("{command}: done"),
    }
}

/// The value at a dotted path (`"epsilon.pld"`).
fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

/// A top-level field as text, `-` when absent.
fn field(v: &Value, path: &str) -> String {
    lookup(v, path).map_or("-".into(), text)
}

fn count(v: &Value, key: &str) -> usize {
    v.get(key).and_then(Value::as_array).map_or(0, Vec::len)
}

/// The top-level fields worth a line: numbers, short strings, booleans, short lists of
/// scalars. Objects and long texts (the privacy-model notes) stay in `--json`.
fn top_level_scalars(v: &Value) -> Vec<(String, String)> {
    let Value::Object(map) = v else {
        return vec![("result".into(), text(v))];
    };
    map.iter()
        .filter(|(_, v)| match v {
            Value::Array(items) => items.iter().all(is_scalar) && text(v).chars().count() <= 60,
            Value::Object(_) => false,
            _ => text(v).chars().count() <= 60,
        })
        .map(|(k, v)| (k.clone(), text(v)))
        .collect()
}

/// Every scalar of an object, nested ones under dotted names (diagnostics are small).
fn flatten(v: &Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(map) => {
                for (k, val) in map {
                    let name = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&name, val, out);
                }
            }
            Value::Array(items) if items.iter().any(Value::is_object) => {}
            other => out.push((prefix.to_string(), text(other))),
        }
    }
    let mut out = Vec::new();
    walk("", v, &mut out);
    out
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

/// `s` padded with spaces to `width` characters. By hand: a format width is limited to
/// `u16`, and a column (a long SQL expression) may be wider.
fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(width.saturating_sub(n)))
}

/// `key  value` lines, the values aligned.
fn table(out: &mut String, rows: &[(String, String)]) {
    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    for (k, v) in rows {
        let _ = writeln!(out, "  {}  {v}", pad(k, width));
    }
}

/// A list of objects as a table with a header row, one column per path in `columns`.
/// A list of lists of numbers (k-means' centroids), without `columns`, is a table with a row
/// number and one column per entry.
fn list(out: &mut String, items: Option<&Value>, columns: &[&str]) {
    let Some(items) = items.and_then(Value::as_array) else {
        return;
    };
    let mut cells: Vec<Vec<String>> = if columns.is_empty() {
        let width = items
            .iter()
            .filter_map(Value::as_array)
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        let mut rows = vec![
            std::iter::once("#".to_string())
                .chain((0..width).map(|j| format!("x{j}")))
                .collect::<Vec<_>>(),
        ];
        rows.extend(items.iter().enumerate().map(|(i, row)| {
            let values = row.as_array().map(Vec::as_slice).unwrap_or_default();
            std::iter::once(i.to_string())
                .chain((0..width).map(|j| values.get(j).map_or("-".into(), text)))
                .collect()
        }));
        rows
    } else {
        vec![columns.iter().map(|c| c.to_string()).collect()]
    };
    if !columns.is_empty() {
        cells.extend(items.iter().map(|item| {
            columns
                .iter()
                .map(|c| lookup(item, c).map_or("-".into(), text))
                .collect()
        }));
    }
    let _ = writeln!(out);
    aligned(out, &cells);
}

/// `cells` (rows of equal length, the header first) as indented rows of left-aligned columns.
fn aligned(out: &mut String, cells: &[Vec<String>]) {
    let columns = cells.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in cells {
        let line: Vec<String> = row.iter().zip(&widths).map(|(c, w)| pad(c, *w)).collect();
        let _ = writeln!(out, "  {}", line.join("  ").trim_end());
    }
}

/// A JSON value as a person reads it: numbers short, lists inline, null as `-`.
fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        // Integers (counts, sizes, seeds) exactly; other numbers short.
        Value::Number(n) if n.is_u64() || n.is_i64() => n.to_string(),
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), short),
        Value::Array(items) if items.len() > 8 => {
            let head: Vec<String> = items.iter().take(4).map(text).collect();
            format!("[{}, … ({} values)]", head.join(", "), items.len())
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(text).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(_) => "{…}".into(),
    }
}

/// `94.9%`: a fraction as a percentage with 3 significant digits.
fn percent(x: f64) -> String {
    format!("{}%", short(100.0 * x))
}

/// A number with 3 significant digits, in scientific form (`1e-5`, `2.5e12`) when very small
/// or large. Whole numbers up to a million print whole.
pub fn short(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let a = x.abs();
    if x == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        scientific(x)
    } else if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        let digits = 2 - a.log10().floor() as i32;
        let s = format!("{x:.*}", digits.max(0) as usize);
        // 0.99966 rounds up to 1.000: one digit fewer keeps 3 significant digits.
        match s.parse::<f64>() {
            Ok(r) if r.abs().log10().floor() > a.log10().floor() && digits > 0 => {
                format!("{x:.*}", (digits - 1) as usize)
            }
            _ => s,
        }
    }
}

pub use dpml_core::numbers::scientific;

/// `4,300`: a whole number with thousands separators.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_are_short() {
        assert_eq!(short(3.0), "3");
        assert_eq!(short(2.9996), "3.00");
        assert_eq!(short(0.99966), "1.00");
        assert_eq!(short(0.949999988079071), "0.950");
        assert_eq!(short(1e-5), "1e-5");
        assert_eq!(short(1e308), "1e308");
        assert_eq!(short(12345.678), "12346");
        assert_eq!(grouped(4300), "4,300");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(grouped(12), "12");
    }

    #[test]
    fn train_headline_states_accuracy_and_guarantee() {
        let v = json!({"model": "mlp", "dataset": "breast-cancer", "epsilon": 2.9996,
                       "delta": 1e-5, "accountant": "pld", "bounds": "upper_bound"});
        let d = json!({"test_accuracy": 0.949});
        let text = render("train", &v, Some(&d));
        assert!(
            text.starts_with(
                "trained mlp on breast-cancer: test accuracy 94.9%, ε = 3.00 (δ = 1e-5, PLD upper bound)\n"
            ),
            "{text}"
        );
        assert!(text.contains("diagnostics ("), "{text}");
        // Without diagnostics the headline cannot quote them.
        assert!(!render("train", &v, None).contains("accuracy"));
        let d = json!({"test_accuracy": 0.5, "test_mse": 1.25, "test_mae": 0.8});
        let text = render("train", &v, Some(&d));
        assert!(
            text.starts_with("trained mlp on breast-cancer: test MSE 1.25, ε = 3.00"),
            "{text}"
        );
    }

    #[test]
    fn headlines_lead_with_pld_and_say_how_totals_compose() {
        let v = json!({"mu": 0.5, "epsilon": {"pld": 1.2, "rdp": 1.5}, "delta": 1e-5});
        assert!(render("tradeoff", &v, None).contains("ε = 1.20 (PLD"));
        let v = json!({"queries": 10, "epsilon": 5.0, "epsilon_total": 50.0,
                       "ledger": {"spent": 30.0, "composition": "rdp"}});
        let text = render("predict", &v, None);
        assert!(
            text.contains("50 in all by adding them up; the ledger's spend is 30 (composed: rdp)"),
            "{text}"
        );
        let v = json!({"ledger": "l.db", "spent": 1.0, "remaining": 2.0, "entries": [],
                       "budget": {"epsilon": 3.0, "delta": 1e-5}, "spent_delta": 1e-5,
                       "composition": "rdp"});
        let text = render("ledger show", &v, None);
        assert!(text.contains("holds at the budget's δ = 1e-5"), "{text}");
        let v = json!({"experiment": "dpsgd", "dataset": "iris", "runs": 18, "folds": 3,
                       "epsilons": [1.0]});
        assert!(render("sweep", &v, None).contains("18 runs of 3 folds each"));
    }

    #[test]
    fn kmeans_shows_the_centroids_it_released() {
        let v = json!({"k": 2, "centroids": [[0.5, 1.25], [3.0, 4.0]]});
        let text = render("kmeans", &v, None);
        assert!(text.contains("  #  x0     x1\n"), "{text}");
        assert!(text.contains("  0  0.500  1.25\n"), "{text}");
        assert!(text.contains("  1  3      4\n"), "{text}");
    }

    #[test]
    fn unknown_commands_get_an_aligned_table_of_scalars() {
        let v = json!({"a": 1, "long_name": 0.123456, "nested": {"x": 1}, "s": "text"});
        let text = render("something", &v, None);
        assert!(text.starts_with("something: done\n"), "{text}");
        assert!(text.contains("  a          1\n"), "{text}");
        assert!(text.contains("  long_name  0.123\n"), "{text}");
        assert!(!text.contains('{'), "{text}");
    }
}
