//! The privacy facts a saved model carries: what guarantee it was trained under (ε, δ, the
//! accountant and what kind of number its ε is, σ, q, steps, clipping norm, the neighbouring
//! relation), on what data (name and size), whether the run was seeded, which dpml wrote it
//! and when.
//!
//! A model file travels without the run's JSON output, so whoever receives it can only judge
//! its guarantee from the file itself. [`crate::dpsgd::io`] stores these facts as JSON under
//! one safetensors metadata key, [`crate::dpsgd::io::FACTS_KEY`]. Only public facts are
//! stored: no accuracy or loss, which are computed from private data without noise.

use std::time::SystemTime;

use dpml_accounting::BoundKind;
use dpml_data::SplitBasis;
use serde::{Deserialize, Serialize};

use crate::dpsgd::{Objective, TrainReport};
use crate::label_dp::LabelDpReport;
use crate::label_dp::Task;
use crate::perturbation::input::PerturbationReport;

/// The kind of guarantee a model was trained under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    /// DP-SGD over whole records (possibly on top of input perturbation).
    DpSgd,
    /// Label DP: each training label privatised once; features not protected.
    LabelDp,
    /// Local DP on the features only (input perturbation without DP-SGD).
    InputPerturbation,
    /// No guarantee at all (ε = ∞), not a zero cost.
    NonPrivate,
}

/// Local DP on the features that preceded training (`dpml train --input-perturbation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputPerturbationFacts {
    /// "laplace" or "gaussian".
    pub mechanism: String,
    /// ε of one record's features.
    pub epsilon_per_record: f64,
    /// δ at which `epsilon_per_record` holds (0 for Laplace).
    pub delta_per_record: f64,
}

/// How a regression model's one output reads as a label value: prediction = output ×
/// `output_scale`, clamped to [0, `label_values` − 1] (the label's index in its declared
/// range). Public: both come from the declared label range and the training recipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressionFacts {
    /// Number of label values K of the declared label range the model was trained on.
    pub label_values: usize,
    /// The label value one output unit stands for.
    pub output_scale: f64,
}

/// How a model was chosen by a private hyperparameter search (`dpml tune`): the best of a
/// random number of DP-SGD trials. The facts' ε, δ and accountant are then the whole search's
/// (an RDP bound: Papernot & Steinke's when only the best trial was released, composition over
/// the random number of trials when every trial was); σ, q and steps are the kept trial's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuningFacts {
    /// The law of the number of trials.
    pub repetitions: dpml_mechanisms::Repetitions,
    /// ε of one trial by itself (its DP-SGD run and its noisy score), at the facts' δ.
    pub epsilon_per_trial: f64,
    /// ε the kept trial's run alone would have claimed (its recipe's accountant), had the
    /// search not been counted.
    pub epsilon_kept_run: Option<f64>,
    /// What the trials were scored on: a private validation split (noisy counts) or a public
    /// validation set.
    pub validation: String,
    /// The kept trial's score: its noisy validation accuracy (or exact, on a public set).
    pub score: f64,
    /// What the search released, and so which bound the facts' ε is: the best trial only
    /// (Papernot & Steinke; files without the field) or every trial (composition over the
    /// random number of trials).
    #[serde(default)]
    pub released: dpml_mechanisms::TrialRelease,
}

/// The train/test split a training run cut from its records: public (a key drawn independently
/// of the data, and the share held out), so `dpml eval` can hold out the same records by
/// default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitFacts {
    /// The split key, 64 hex digits (the run's `"split_key"`).
    pub key: String,
    /// The share of records held out for testing.
    pub test_fraction: f64,
}

/// The privacy facts of a saved model. Field names follow `dpml train --json`; a field the
/// guarantee does not have is `null` (e.g. σ of a label-DP model, ε of a non-private one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFacts {
    /// The kind of guarantee.
    pub guarantee: Guarantee,
    /// ε of the guarantee (`None` when non-private). For label DP, the per-label ε.
    #[serde(default)]
    pub epsilon: Option<f64>,
    /// δ of the guarantee (0 for label DP; `None` when non-private).
    #[serde(default)]
    pub delta: Option<f64>,
    /// The unit of privacy: which data sets the guarantee calls neighbours.
    #[serde(default)]
    pub neighbouring: Option<String>,
    /// The accountant that computed ε: "pld", "rdp" or "gdp" (DP-SGD only).
    #[serde(default)]
    pub accountant: Option<String>,
    /// What kind of number ε is: "upper_bound" or "approximation" (DP-SGD only).
    #[serde(default)]
    pub bounds: Option<BoundKind>,
    /// Why ε is not the named accountant's own number, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accountant_note: Option<String>,
    /// Noise multiplier σ (DP-SGD only).
    #[serde(default)]
    pub noise_multiplier: Option<f64>,
    /// Sampling rate q = B/N (DP-SGD only).
    #[serde(default)]
    pub sampling_rate: Option<f64>,
    /// Steps T (DP-SGD only).
    #[serde(default)]
    pub steps: Option<u64>,
    /// Clipping norm C of each per-sample gradient (DP-SGD only).
    #[serde(default)]
    pub max_grad_norm: Option<f64>,
    /// The label mechanism: "laplace", "rr" or "rr-prior" (label DP only).
    #[serde(default)]
    pub label_mechanism: Option<String>,
    /// Input perturbation of the features before training, if any.
    #[serde(default)]
    pub input_perturbation: Option<InputPerturbationFacts>,
    /// What the model predicts: "classification" or "regression" (files written before this
    /// field are classifiers).
    #[serde(default)]
    pub task: Task,
    /// How a regression model's output reads as a label value (regression only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regression: Option<RegressionFacts>,
    /// The private hyperparameter search that chose the model, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<TuningFacts>,
    /// The split that held the test records out, when the run cut one (files written before
    /// this field, or models of a source with its own test split, have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitFacts>,
    /// The class names, in the order of the model's outputs (public: declared, never read
    /// from the records). Files written before this field have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<String>>,
    /// The data set trained on (its name, or `csv:PATH`).
    pub dataset: String,
    /// Training-set size N (public: the guarantee is stated for a known N).
    pub train_size: usize,
    /// Whether the generator was user-seeded: a seeded run's noise can be replayed, so the
    /// model is not a secure release.
    pub seeded: bool,
    /// Version of the dpml crates that wrote the file.
    pub dpml_version: String,
    /// When the file was written, UTC, RFC 3339 (e.g. `2026-01-31T12:00:00Z`).
    pub created: String,
}

impl ModelFacts {
    /// Facts with only the data, the seeding, this crate's version and the current time; every
    /// guarantee field empty.
    fn base(guarantee: Guarantee, dataset: &str, train_size: usize, seeded: bool) -> Self {
        Self {
            guarantee,
            epsilon: None,
            delta: None,
            neighbouring: None,
            accountant: None,
            bounds: None,
            accountant_note: None,
            noise_multiplier: None,
            sampling_rate: None,
            steps: None,
            max_grad_norm: None,
            label_mechanism: None,
            input_perturbation: None,
            task: Task::Classification,
            regression: None,
            tuning: None,
            split: None,
            classes: None,
            dataset: dataset.into(),
            train_size,
            seeded,
            dpml_version: env!("CARGO_PKG_VERSION").into(),
            created: now_rfc3339(),
        }
    }

    /// The facts of a DP-SGD (or non-private) training run reported by `report`, on
    /// `train_size` records of `dataset`, private under `neighbouring`.
    pub fn from_training(
        report: &TrainReport,
        dataset: &str,
        train_size: usize,
        neighbouring: &str,
    ) -> Self {
        let Some(epsilon) = report.epsilon else {
            return Self::base(Guarantee::NonPrivate, dataset, train_size, report.seeded);
        };
        Self {
            epsilon: Some(epsilon),
            delta: Some(report.delta),
            neighbouring: Some(neighbouring.into()),
            accountant: Some(report.accountant.clone()),
            bounds: report.bounds,
            accountant_note: report.accountant_note.clone(),
            noise_multiplier: report.noise_multiplier,
            sampling_rate: Some(report.sampling_rate),
            steps: Some(report.steps),
            max_grad_norm: Some(report.max_grad_norm),
            ..Self::base(Guarantee::DpSgd, dataset, train_size, report.seeded)
        }
    }

    /// The facts of a label-DP run reported by `report` on `dataset`, private under
    /// `neighbouring` (a pure ε-label-DP guarantee: δ = 0).
    pub fn from_label_dp(report: &LabelDpReport, dataset: &str, neighbouring: &str) -> Self {
        Self {
            epsilon: Some(report.epsilon),
            delta: Some(0.0),
            neighbouring: Some(neighbouring.into()),
            label_mechanism: Some(report.mechanism.clone()),
            ..Self::base(
                Guarantee::LabelDp,
                dataset,
                report.train_records,
                report.seeded,
            )
        }
    }

    /// These facts for a regression model trained with `objective` on labels with
    /// `label_values` declared values (unchanged for a classifier).
    pub fn with_objective(mut self, objective: Objective, label_values: usize) -> Self {
        if let Some(output_scale) = objective.output_scale() {
            self.task = Task::Regression;
            self.regression = Some(RegressionFacts {
                label_values,
                output_scale,
            });
        }
        self
    }

    /// These facts for a model kept by a private search whose guarantee is (`epsilon`,
    /// `delta`) from the RDP accountant: the search's, replacing the kept run's own.
    pub fn with_tuning(mut self, tuning: TuningFacts, epsilon: f64, delta: f64) -> Self {
        self.epsilon = Some(epsilon);
        self.delta = Some(delta);
        self.accountant = Some("rdp".into());
        self.bounds = Some(BoundKind::UpperBound);
        self.accountant_note = None;
        self.tuning = Some(tuning);
        self
    }

    /// These facts with the class names of the model's outputs.
    pub fn with_classes(mut self, classes: Vec<String>) -> Self {
        self.classes = Some(classes);
        self
    }

    /// These facts with the split that held the test records out.
    pub fn with_split(mut self, split: Option<SplitFacts>) -> Self {
        self.split = split;
        self
    }

    /// These facts with the input perturbation `p` that preceded training. Without DP-SGD the
    /// perturbation is the whole guarantee: local DP on the features, under `neighbouring`.
    pub fn with_input_perturbation(mut self, p: &PerturbationReport, neighbouring: &str) -> Self {
        if self.guarantee == Guarantee::NonPrivate {
            self.guarantee = Guarantee::InputPerturbation;
            self.epsilon = Some(p.epsilon_per_record);
            self.delta = Some(p.delta_per_record);
            self.neighbouring = Some(neighbouring.into());
        }
        self.input_perturbation = Some(InputPerturbationFacts {
            mechanism: p.mechanism.clone(),
            epsilon_per_record: p.epsilon_per_record,
            delta_per_record: p.delta_per_record,
        });
        self
    }
}

impl ModelFacts {
    /// What is wrong with these facts as a guarantee, one line each (empty when nothing is):
    /// a file can hold any JSON, and a reader must not take ε = −1 or a sampling rate of 7
    /// for the model's guarantee. Checks each number's domain and that the guarantee has the
    /// fields its kind needs (and a non-private model no ε).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |name: &str, v: Option<f64>, ok: fn(f64) -> bool, domain: &str| {
            if let Some(v) = v.filter(|&v| !ok(v)) {
                out.push(format!("{name} {v} is not {domain}"));
            }
        };
        check(
            "epsilon",
            self.epsilon,
            |e| e.is_finite() && e >= 0.0,
            "a finite number ≥ 0",
        );
        check(
            "delta",
            self.delta,
            |d| (0.0..1.0).contains(&d),
            "in [0, 1)",
        );
        check(
            "noise_multiplier",
            self.noise_multiplier,
            |s| s.is_finite() && s > 0.0,
            "a finite number > 0",
        );
        check(
            "sampling_rate",
            self.sampling_rate,
            |q| q > 0.0 && q <= 1.0,
            "in (0, 1]",
        );
        check(
            "max_grad_norm",
            self.max_grad_norm,
            |c| c.is_finite() && c > 0.0,
            "a finite number > 0",
        );
        if let Some(p) = &self.input_perturbation {
            check(
                "input_perturbation.epsilon_per_record",
                Some(p.epsilon_per_record),
                |e| e.is_finite() && e >= 0.0,
                "a finite number ≥ 0",
            );
            check(
                "input_perturbation.delta_per_record",
                Some(p.delta_per_record),
                |d| (0.0..1.0).contains(&d),
                "in [0, 1)",
            );
        }
        if let Some(t) = &self.tuning {
            check(
                "tuning.epsilon_per_trial",
                Some(t.epsilon_per_trial),
                |e| e.is_finite() && e >= 0.0,
                "a finite number ≥ 0",
            );
            check(
                "tuning.epsilon_kept_run",
                t.epsilon_kept_run,
                |e| e.is_finite() && e >= 0.0,
                "a finite number ≥ 0",
            );
        }
        if let Some(Err(e)) = self.tuning.as_ref().map(|t| t.repetitions.validate()) {
            out.push(format!("tuning.repetitions: {e}"));
        }
        let private = self.guarantee != Guarantee::NonPrivate;
        if private && (self.epsilon.is_none() || self.delta.is_none()) {
            out.push(format!(
                "a {} guarantee without epsilon and delta",
                self.guarantee.name()
            ));
        }
        if !private && self.epsilon.is_some() {
            out.push("a non-private model with an epsilon".into());
        }
        if self.guarantee == Guarantee::DpSgd
            && (self.noise_multiplier.is_none()
                || self.sampling_rate.is_none()
                || self.steps.is_none())
        {
            out.push("a dp-sgd guarantee without noise_multiplier, sampling_rate and steps".into());
        }
        out
    }
}

impl Guarantee {
    /// The guarantee's name as files and reports spell it (`"dp-sgd"`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::DpSgd => "dp-sgd",
            Self::LabelDp => "label-dp",
            Self::InputPerturbation => "input-perturbation",
            Self::NonPrivate => "non-private",
        }
    }

    /// What the train/test split of a run under this guarantee hashes: the part of a record
    /// that the guarantee's neighbouring relation leaves fixed (see [`SplitBasis`]).
    pub const fn split_basis(self) -> SplitBasis {
        match self {
            Self::LabelDp => SplitBasis::Features,
            Self::InputPerturbation => SplitBasis::Position,
            Self::DpSgd | Self::NonPrivate => SplitBasis::Record,
        }
    }
}

/// The current time, UTC, RFC 3339 to the second.
fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(epsilon: Option<f64>) -> TrainReport {
        TrainReport {
            task: "classification".into(),
            test_mse: None,
            test_mae: None,
            test_accuracy: Some(0.9),
            train_accuracy: 0.95,
            test_loss: Some(0.3),
            epsilon,
            delta: 1e-5,
            accountant: "pld".into(),
            bounds: epsilon.map(|_| BoundKind::UpperBound),
            accountant_note: None,
            noise_multiplier: epsilon.map(|_| 1.1),
            sampling_rate: 0.01,
            steps: 300,
            epochs: 3.0,
            max_grad_norm: 1.0,
            sensitivity: epsilon.map(|_| 1.0),
            exact_noise: false,
            samples_per_sec: 1.0,
            wall_seconds: 1.0,
            seeded: true,
            epoch_log: Vec::new(),
        }
    }

    #[test]
    fn training_facts_round_trip_through_json() {
        let f = ModelFacts::from_training(&report(Some(2.5)), "digits", 1437, "add/remove");
        assert_eq!(f.guarantee, Guarantee::DpSgd);
        assert_eq!(
            (f.epsilon, f.delta, f.noise_multiplier),
            (Some(2.5), Some(1e-5), Some(1.1))
        );
        assert_eq!((f.sampling_rate, f.steps), (Some(0.01), Some(300)));
        assert!(f.seeded);
        assert_eq!(f.dpml_version, env!("CARGO_PKG_VERSION"));
        let json = serde_json::to_string(&f).unwrap();
        assert!(json.contains("\"guarantee\":\"dp-sgd\""), "{json}");
        assert!(json.contains("\"bounds\":\"upper_bound\""), "{json}");
        // Nothing computed from the private data without noise is stored.
        assert!(
            !json.contains("accuracy") && !json.contains("loss"),
            "{json}"
        );
        let back: ModelFacts = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn a_non_private_model_has_no_epsilon_unless_its_features_were_perturbed() {
        let f = ModelFacts::from_training(&report(None), "iris", 120, "add/remove");
        assert_eq!(f.guarantee, Guarantee::NonPrivate);
        assert_eq!((f.epsilon, f.neighbouring.as_deref()), (None, None));
        let json = serde_json::to_value(&f).unwrap();
        assert!(json["epsilon"].is_null(), "{json}");
        let p = PerturbationReport {
            mechanism: "laplace".into(),
            epsilon_per_feature: 0.5,
            epsilon_per_record: 2.0,
            delta_per_feature: 0.0,
            delta_per_record: 0.0,
            composition: "basic".into(),
            features: 4,
            records: 120,
            feature_range: crate::perturbation::input::PerFeature::Same((0.0, 1.0)),
            noise_scale: crate::perturbation::input::PerFeature::Same(2.0),
            event_per_record: dpml_mechanisms::PrivacyEvent::Laplace {
                noise_multiplier: 0.5,
            },
            seeded: true,
        };
        let local = f.clone().with_input_perturbation(&p, "features");
        assert_eq!(local.guarantee, Guarantee::InputPerturbation);
        assert_eq!(local.epsilon, Some(2.0));
        // On top of DP-SGD, ε stays DP-SGD's (over whole records).
        let both = ModelFacts::from_training(&report(Some(3.0)), "iris", 120, "add/remove")
            .with_input_perturbation(&p, "features");
        assert_eq!(
            (both.guarantee, both.epsilon),
            (Guarantee::DpSgd, Some(3.0))
        );
        assert_eq!(both.input_perturbation.unwrap().epsilon_per_record, 2.0);
    }

    #[test]
    fn a_tuned_model_carries_the_search_guarantee() {
        let tuning = TuningFacts {
            repetitions: dpml_mechanisms::Repetitions::Poisson { mean: 10.0 },
            epsilon_per_trial: 1.9,
            epsilon_kept_run: Some(1.6),
            validation: "private validation split".into(),
            score: 0.97,
            released: dpml_mechanisms::TrialRelease::Every,
        };
        let f = ModelFacts::from_training(&report(Some(1.6)), "mnist", 54000, "add/remove")
            .with_tuning(tuning.clone(), 3.0, 1e-5);
        assert_eq!(
            (f.epsilon, f.accountant.as_deref()),
            (Some(3.0), Some("rdp"))
        );
        assert_eq!(f.noise_multiplier, Some(1.1));
        let json = serde_json::to_string(&f).unwrap();
        assert!(
            json.contains(r#""tuning":{"repetitions":{"law":"poisson","mean":10.0}"#),
            "{json}"
        );
        let back: ModelFacts = serde_json::from_str(&json).unwrap();
        assert_eq!(back.tuning.as_ref(), Some(&tuning));
        assert!(f.problems().is_empty(), "{:?}", f.problems());
        let forged = f.clone().with_tuning(
            TuningFacts {
                repetitions: dpml_mechanisms::Repetitions::Poisson { mean: -2.0 },
                epsilon_per_trial: f64::NAN,
                ..tuning.clone()
            },
            3.0,
            1e-5,
        );
        let problems = forged.problems().join("; ");
        for name in ["tuning.repetitions", "tuning.epsilon_per_trial NaN"] {
            assert!(problems.contains(name), "{problems}");
        }
        assert!(json.contains(r#""released":"every""#), "{json}");
        // Files from before the field read as best-only searches.
        let older = json.replace(r#","released":"every""#, "");
        let back: ModelFacts = serde_json::from_str(&older).unwrap();
        assert_eq!(
            back.tuning.unwrap().released,
            dpml_mechanisms::TrialRelease::Best
        );
        // Files without the field read as untuned.
        let plain = ModelFacts::from_training(&report(Some(1.6)), "mnist", 54000, "add/remove");
        let json = serde_json::to_string(&plain).unwrap();
        assert!(!json.contains("tuning"));
    }

    #[test]
    fn forged_facts_are_named_and_true_ones_pass() {
        let f = ModelFacts::from_training(&report(Some(2.5)), "digits", 1437, "add/remove");
        assert_eq!(f.problems(), Vec::<String>::new());
        let forged = ModelFacts {
            epsilon: Some(-1.0),
            delta: Some(2.0),
            noise_multiplier: Some(-5.0),
            sampling_rate: Some(7.0),
            ..f.clone()
        };
        let problems = forged.problems().join("; ");
        for name in [
            "epsilon -1",
            "delta 2",
            "noise_multiplier -5",
            "sampling_rate 7",
        ] {
            assert!(problems.contains(name), "{problems}");
        }
        let nan = ModelFacts {
            epsilon: Some(f64::NAN),
            ..f.clone()
        };
        assert_eq!(nan.problems().len(), 1);
        let missing = ModelFacts { epsilon: None, ..f };
        assert!(missing.problems()[0].contains("without epsilon"));
        let none = ModelFacts::from_training(&report(None), "iris", 120, "add/remove");
        assert!(none.problems().is_empty());
    }

    #[test]
    fn created_is_rfc3339_utc() {
        let t = now_rfc3339();
        assert!(humantime::parse_rfc3339(&t).is_ok(), "{t}");
        assert!(t.ends_with('Z'), "{t}");
    }
}
