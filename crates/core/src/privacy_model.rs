//! What a private command's JSON says about its guarantee, and how it keeps the release apart
//! from its diagnostics. One place for the wording, so every command states it the same way.
//!
//! # Layout of a private command's JSON
//! - At top level, only what the mechanism released or what is assumed public: the model
//!   file, the noisy statistics, ε, δ, the accountant, the privacy event, the recipe and its
//!   parameters, and the unit of privacy: `"neighbouring"` (which data sets the guarantee
//!   calls neighbours) and `"public"` (what the guarantee assumes an adversary already knows).
//! - Under `"diagnostics"`, every number computed from the private data WITHOUT noise
//!   (accuracies, losses, clustering quality, noisy-label accuracy against the true labels, …).
//!   They help the operator and are not differentially private: publishing them can leak
//!   what the release protects. A front may leave them out (`dpml --no-diagnostics`).
//!
//! # Sizes
//! The size N of the set a release is computed from is assumed public and listed in
//! `"public"`: DP-SGD divides the noisy gradient sum by the expected batch q·N and the
//! accountant uses q = B/N, so its guarantee is stated for a known N; k-means and
//! randomized-response estimates likewise report N. Sizes of sets used only to evaluate a
//! release (a test split, the records a model's accuracy is measured on) are diagnostics,
//! beside the figures they qualify.
//!
//! # One name per concept
//! Every command names a field the same way (the README's table lists the flags too):
//! `train_size` is the N of the records a model or centroids are fitted on (also the
//! accountants' `inputs`), `test_size` the records a model is evaluated on (a diagnostic),
//! `n_records` the records a statistic is computed from, `runs` the runs behind a mean;
//! `epsilon` is the ε of the release (and `target_epsilon` appears only beside an achieved
//! `epsilon`), `epsilon_total` its composition over several releases; `learning_rate`,
//! `batch_size`, `physical_batch_size`; `model` is an architecture name and `model_file` the
//! path of a model file read or written.
//!
//! Evaluation experiments (`dpml sweep`, `dpml audit`, `dpml eval`) release nothing: their
//! utility figures are diagnostics by nature, and their JSON says so in
//! [`DIAGNOSTICS_NOTE_KEY`].

use serde_json::{Map, Value, json};

/// The key of the object holding the un-noised figures.
pub const DIAGNOSTICS_KEY: &str = "diagnostics";

/// What a diagnostic is, in the words of `--no-diagnostics`' help and the human rendering.
pub const DIAGNOSTICS_MEANING: &str =
    "computed from private data without noise: not differentially private";

/// The top-level key of evaluation experiments that says their figures are diagnostics.
pub const DIAGNOSTICS_NOTE_KEY: &str = "diagnostics_note";

/// The prefix of a CSV column that holds a diagnostic (a figure computed from private data
/// without noise: not differentially private).
pub const CSV_DIAGNOSTIC_PREFIX: &str = "diagnostic_";

/// The header of a CSV log of per-epoch figures (`dpml train --log`): steps and ε come from
/// public parameters; the losses and accuracies are diagnostics, named with
/// [`CSV_DIAGNOSTIC_PREFIX`].
pub const CSV_LOG_HEADER: &str = "epoch,steps,diagnostic_train_loss,diagnostic_train_accuracy,diagnostic_test_accuracy,diagnostic_test_loss,epsilon";

/// Neighbouring relations: the unit of privacy each guarantee is stated for.
pub mod neighbouring {
    /// Central DP over whole records (DP-SGD, DPLloyd, queries, output perturbation).
    pub const ADD_REMOVE: &str = "add/remove one record of the input data set";
    /// Output perturbation (`dpml predict`): the model's training data are protected; the noise
    /// covers any change of an answer's probability vector.
    pub const MODEL_TRAINING: &str = "add/remove one record of the model's training data (the noise covers any change of each answer's probability vector)";
    /// Label DP: each label is privatised once; the features are not protected.
    pub const LABEL: &str =
        "change the label of one record of the input data set (only the labels are private)";
    /// Local DP on answers: each respondent randomises their own answer.
    pub const ANSWER: &str = "change one respondent's answer (local DP: each answer is randomised on its own before it is counted)";
    /// Local DP on features: each record's features are perturbed once, on their own.
    pub const FEATURES: &str = "change the features of one record of the input data set (local DP on the features; the labels are not protected)";
    /// `dpml release`: the caller's value, whose neighbours differ by at most the sensitivity.
    pub const VALUE: &str =
        "change the value by at most the declared sensitivity (one record's contribution)";
}

/// Public assumptions, listed under `"public"`.
pub mod public {
    /// N of the set a model or statistic is computed from (see the module doc, "Sizes").
    pub const DATA_SET_SIZE: &str = "data-set size N";
    /// DP-SGD's reason for N being public.
    pub const TRAINING_SET_SIZE: &str = "training-set size N (DP-SGD divides the noisy gradient sum by the expected batch q·N, and the accountant uses q = B/N)";
    /// Cross-validation: every fold's training set size is public, as N is.
    pub const FOLD_SIZES: &str =
        "data-set size N and the fold sizes (each model's q = B/N uses its training folds' size)";
    /// Feature ranges, classes, label range: declared or published, never read off the data.
    pub const SCHEMA: &str = "schema: feature bounds, classes, label range";
    /// The features, in label DP.
    pub const FEATURES: &str = "the features of every record (label DP protects labels only)";
    /// The recipe.
    pub const RECIPE: &str = "model architecture and hyperparameters";
    /// How a test set or folds are cut from the data (a rule, not the records).
    pub const SPLIT_RULE: &str = "the train/test split rule and its seed";
    /// Clustering and other non-neural algorithms.
    pub const ALGORITHM: &str = "the algorithm and its parameters (k, iterations, budget split)";
    /// Declared clamping bounds and the column queried.
    pub const QUERY: &str = "the column queried and its declared bounds and bins";
    /// Survey size and categories.
    pub const SURVEY: &str = "the number of respondents and the answer categories";
    /// `dpml predict`: the query records are the querier's.
    pub const QUERIES: &str =
        "the query records answered (their features) and the model architecture";
    /// `dpml release`: the sensitivity is declared by the caller.
    pub const SENSITIVITY: &str = "the declared sensitivity";
    /// `dpml tune`: what a search is, before it sees data.
    pub const SEARCH: &str = "the search space, the law of the number of trials and its mean, \
         and the noise of each cell of trials";
    /// `dpml tune`: the size its noisy scores are divided by, as N is for DP-SGD.
    pub const VALIDATION_SET_SIZE: &str = "validation-set size (each noisy count of correct \
         predictions is divided by it)";
    /// `dpml tune --public-validation`: the records the trials are scored on.
    pub const PUBLIC_VALIDATION: &str =
        "the validation records, declared public (scores computed on them exactly)";
}

/// The unit of privacy of a release and what it assumes public.
#[derive(Debug, Clone)]
pub struct PrivacyModel {
    /// One of [`neighbouring`]'s relations.
    pub neighbouring: &'static str,
    /// Items of [`public`].
    pub public: Vec<&'static str>,
}

impl PrivacyModel {
    /// A model with `neighbouring` and the `public` assumptions.
    pub fn new(neighbouring: &'static str, public: &[&'static str]) -> Self {
        Self {
            neighbouring,
            public: public.to_vec(),
        }
    }
}

/// A private command's JSON result under construction: the released part (top level) and the
/// diagnostics, kept apart.
#[derive(Debug, Clone)]
pub struct Release {
    top: Map<String, Value>,
    diagnostics: Map<String, Value>,
}

impl Release {
    /// An empty result stating `model`'s `"neighbouring"` and `"public"`.
    pub fn new(model: &PrivacyModel) -> Self {
        Self::from_map(Map::new(), model)
    }

    /// `fields` as the released part, with `model`'s `"neighbouring"` and `"public"` added;
    /// move the un-noised ones out with [`Release::diagnose`].
    pub fn from_map(mut fields: Map<String, Value>, model: &PrivacyModel) -> Self {
        fields.insert("neighbouring".into(), json!(model.neighbouring));
        fields.insert("public".into(), json!(model.public));
        Self {
            top: fields,
            diagnostics: Map::new(),
        }
    }

    /// Adds a released (or public) field.
    pub fn insert(&mut self, key: &str, value: Value) -> &mut Self {
        self.top.insert(key.into(), value);
        self
    }

    /// Adds a diagnostic.
    pub fn diagnostic(&mut self, key: &str, value: Value) -> &mut Self {
        self.diagnostics.insert(key.into(), value);
        self
    }

    /// Moves `keys` (those present) from the top level to the diagnostics.
    pub fn diagnose(&mut self, keys: &[&str]) -> &mut Self {
        for &k in keys {
            if let Some(v) = self.top.remove(k) {
                self.diagnostics.insert(k.into(), v);
            }
        }
        self
    }

    /// Drops null fields on both levels (figures a run does not have, e.g. regression's
    /// accuracy).
    pub fn drop_nulls(&mut self) -> &mut Self {
        self.top.retain(|_, v| !v.is_null());
        self.diagnostics.retain(|_, v| !v.is_null());
        self
    }

    /// The JSON object: the released fields, and the diagnostics under
    /// [`DIAGNOSTICS_KEY`] when there are any.
    pub fn into_value(self) -> Value {
        let mut top = self.top;
        if !self.diagnostics.is_empty() {
            top.insert(DIAGNOSTICS_KEY.into(), Value::Object(self.diagnostics));
        }
        Value::Object(top)
    }
}

/// Adds the fields of `extra` (an object, if any) to the diagnostics of a `release` already
/// built (an object).
pub fn add_diagnostics(release: &mut Value, extra: Option<Value>) {
    let (Some(Value::Object(extra)), Value::Object(top)) = (extra, release) else {
        return;
    };
    if let Value::Object(d) = top
        .entry(DIAGNOSTICS_KEY)
        .or_insert_with(|| Value::Object(Map::new()))
    {
        d.extend(extra);
    }
}

/// How a saved model's privacy facts name the data set it was trained on: its name, or for a
/// `csv:` file only the file's name (a model file travels; the folders of the machine that
/// trained it are none of its readers' business).
pub fn dataset_label(source: &dpml_data::Source) -> String {
    let paths = source.paths();
    if paths.is_empty() {
        return source.name();
    }
    let kind = source.name();
    let kind = kind.split_once(':').map_or("", |(k, _)| k);
    let names: Vec<String> = paths
        .iter()
        .map(|path| {
            path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into(),
            )
        })
        .collect();
    format!("{kind}:{}", names.join(","))
}

/// The [`DIAGNOSTICS_NOTE_KEY`] text of an evaluation experiment that releases nothing.
pub fn experiment_note(what: &str) -> Value {
    json!(format!(
        "an evaluation experiment, not a release: {what} are {DIAGNOSTICS_MEANING}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_keeps_diagnostics_apart() {
        let model = PrivacyModel::new(neighbouring::ADD_REMOVE, &[public::DATA_SET_SIZE]);
        let mut r = Release::from_map(
            json!({"epsilon": 1.0, "accuracy": 0.9, "loss": null})
                .as_object()
                .unwrap()
                .clone(),
            &model,
        );
        r.diagnose(&["accuracy", "loss", "absent"]).drop_nulls();
        let v = r.into_value();
        assert_eq!(v["epsilon"], 1.0);
        assert!(v.get("accuracy").is_none());
        assert_eq!(v["diagnostics"], json!({"accuracy": 0.9}));
        assert_eq!(v["neighbouring"], neighbouring::ADD_REMOVE);
        assert_eq!(v["public"], json!([public::DATA_SET_SIZE]));
        // Nothing to diagnose: no empty object.
        let v = Release::new(&model).into_value();
        assert!(v.get(DIAGNOSTICS_KEY).is_none());
    }
}
