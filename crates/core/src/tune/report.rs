//! The JSON release of a search: at top level the guarantee of the whole search and what it
//! covers (the kept model, its hyperparameters and its noisy score; and every trial's
//! hyperparameters and noisy score under `"trials"` when the search releases every trial),
//! beside the per-trial ε and the ε the kept run alone would have claimed; under the
//! diagnostics what it does not cover: by default the number of trials and every trial's
//! hyperparameters and score, and always every exact accuracy.

use dpml_data::Dataset;
use dpml_learn::dpsgd::Eval;
use dpml_mechanisms::TrialRelease;
use serde_json::{Value, json};

use super::search::{Search, SearchOutcome};
use super::space::Values;
use crate::account::tuning_json;
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};
use crate::schema::provenance_report;
use crate::train::fit::RunContext;

/// How the trials were scored.
pub(super) struct Scoring<'a> {
    /// In words: "private validation split" or "public validation set NAME".
    pub what: &'a str,
    /// ε of each noisy count (`None`: a public set, scored exactly).
    pub score_epsilon: Option<f64>,
    /// The validation records.
    pub set: &'a Dataset,
    /// The key of the validation cut (and of the test split, in the same run), when the
    /// trials were scored on a cut of the training records.
    pub key: Option<String>,
}

/// What the guarantee of a best-only search covers, and why the trials are diagnostics, in
/// the release's words.
const NOTE: &str = "epsilon is the guarantee of the whole search (Papernot & Steinke 2022, RDP): \
     it covers the kept model, its hyperparameters and its noisy score. The number of trials was \
     drawn in secret and only the best trial is released: listing every trial would reveal that \
     number (the list's length) and every trial's score, which this guarantee does not cover, \
     so the list sits under diagnostics. To release it, search with --release-trials \
     (release_trials=True in Python), accounted by composition over the random number of \
     trials: a larger epsilon. epsilon_per_trial is one trial's; epsilon_kept_run is what the \
     kept run alone would have claimed.";

/// What the guarantee of a search that releases every trial covers, in the release's words.
const NOTE_EVERY: &str = "epsilon is the guarantee of the whole search releasing every trial (RDP \
     composition over the random number of trials, drawn independently of the data): it covers \
     every trial's hyperparameters and noisy score (trials), their number, and the kept model. \
     The exact validation accuracies are not covered and sit under diagnostics. \
     epsilon_per_trial is one trial's; epsilon_kept_run is what the kept run alone would have \
     claimed.";

/// The release of `outcome`, a search of `search` on the records `ctx` describes, whose trials
/// trained on `train_size` records and were scored as `scoring` says; `test` is the kept
/// model's test evaluation (diagnostic).
pub(super) fn release(
    search: &Search,
    outcome: &SearchOutcome,
    scoring: &Scoring<'_>,
    ctx: &RunContext<'_>,
    train_size: usize,
    test: Option<&Eval>,
    seeded: bool,
) -> Value {
    let plan = &outcome.plan;
    let mut public_items = vec![
        public::TRAINING_SET_SIZE,
        public::SCHEMA,
        public::RECIPE,
        public::SEARCH,
        public::SPLIT_RULE,
    ];
    public_items.push(match scoring.score_epsilon {
        Some(_) => public::VALIDATION_SET_SIZE,
        None => public::PUBLIC_VALIDATION,
    });
    let model = PrivacyModel::new(neighbouring::ADD_REMOVE, &public_items);
    let mut r = Release::new(&model);
    let best = outcome.kept.as_ref().map(|k| {
        let trial = &outcome.trials[k.index];
        let report = &k.outcome.report;
        let mut hyper = trial.hyperparameters.clone();
        if let Value::Object(map) = &mut hyper {
            map.insert("noisy_score".into(), json!(trial.noisy_score));
            map.insert("noise_multiplier".into(), json!(trial.noise_multiplier));
            map.insert("sampling_rate".into(), json!(report.sampling_rate));
            map.insert("steps".into(), json!(report.steps));
        }
        hyper
    });
    r.insert("epsilon", json!(plan.epsilon))
        .insert("delta", json!(plan.delta))
        .insert("accountant", json!("rdp"))
        .insert("bounds", json!("upper_bound"))
        .insert("epsilon_per_trial", json!(plan.epsilon_per_trial))
        .insert(
            "epsilon_kept_run",
            json!(outcome.kept.as_ref().and_then(|k| k.outcome.report.epsilon)),
        )
        .insert("kept_run_accountant", json!(search.base.accountant.name()))
        .insert("tuning", {
            let mut t = tuning_json(&search.repetitions, plan.release);
            t["repetitions"] = json!(search.repetitions);
            t
        })
        .insert("search_space", space_json(search))
        .insert("noise", json!(plan.cells))
        .insert("best", json!(best))
        .insert(
            "score",
            json!({
                "validation": scoring.what,
                "statistic": match scoring.score_epsilon {
                    Some(_) => "correct predictions on the validation records plus discrete \
                                Laplace noise (sensitivity 1), over the validation size",
                    None => "accuracy on the public validation records (exact)",
                },
                "epsilon": scoring.score_epsilon,
                "validation_size": scoring.set.n,
            }),
        )
        .insert("event", json!(plan.search))
        .insert("dataset", json!(ctx.dataset))
        .insert("preset", json!(ctx.preset))
        .insert("schema", provenance_report(ctx.schema))
        .insert(
            "split_key",
            json!(ctx.split.as_ref().map(|s| &s.key).or(scoring.key.as_ref())),
        )
        .insert("notes", json!(ctx.notes))
        .insert("train_size", json!(train_size))
        .insert("model", json!(search.base.model))
        .insert("normalize", json!(search.base.normalize))
        .insert("seeded", json!(seeded))
        .insert(
            "note",
            json!(match plan.release {
                TrialRelease::Best => NOTE,
                TrialRelease::Every => NOTE_EVERY,
            }),
        );
    if plan.release == TrialRelease::Every {
        r.insert("trials", released_trials(outcome));
    }
    if outcome.kept.is_none() {
        r.insert(
            "outcome",
            json!("the law drew no trial (K = 0, as Poisson can): nothing was trained"),
        );
    }
    r.diagnostic("trials", json!(outcome.trials))
        .diagnostic("trials_run", json!(outcome.trials.len()))
        .diagnostic(
            "validation_accuracy",
            json!(
                outcome
                    .kept
                    .as_ref()
                    .map(|k| outcome.trials[k.index].validation_accuracy)
            ),
        )
        .diagnostic("test_accuracy", json!(test.map(|e| e.accuracy)))
        .diagnostic("test_size", json!(test.map(|e| e.n)));
    r.drop_nulls();
    r.into_value()
}

/// Every trial as a search that releases them all does: its hyperparameters, its σ (its cell's,
/// set before training) and its noisy score; not its exact accuracy or its time.
fn released_trials(outcome: &SearchOutcome) -> Value {
    outcome
        .trials
        .iter()
        .map(|t| {
            json!({
                "hyperparameters": t.hyperparameters,
                "noise_multiplier": t.noise_multiplier,
                "noisy_score": t.noisy_score,
            })
        })
        .collect()
}

/// The space as JSON: `{"learning_rate": {"range": [0.05, 2], "log": true}, …}`.
fn space_json(search: &Search) -> Value {
    let map: serde_json::Map<String, Value> = search
        .space
        .dimensions()
        .iter()
        .map(|d| {
            let v = match &d.values {
                Values::Range { lo, hi, log } => json!({"range": [lo, hi], "log": log}),
                Values::Choices(list) => json!({ "choices": list }),
            };
            (d.hyperparameter.key().to_string(), v)
        })
        .collect();
    Value::Object(map)
}
