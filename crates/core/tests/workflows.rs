//! The workflows called as a front calls them: plain options in, JSON (or an error) out,
//! progress to an observer.

use dpml_core::Error;
use dpml_core::data::Source;
use dpml_core::learn::dpsgd::{OptimizerKind, Solo, TrainConfig};
use dpml_core::mechanisms::DpRng;
use dpml_core::observe::{Event, Silent};
use dpml_core::release::{Mechanism, ReleaseOptions, release};
use dpml_core::sweep::{Job, Row, summarise};
use dpml_core::train::{OptimizerChoice, RecipeOptions, TrainEnd, TrainOptions, train};
use serde_json::Value;

fn seeded(seed: u64) -> DpRng {
    DpRng::new(Some(seed)).expect("a seeded generator")
}

/// A short private run on iris (built-in classes and bounds).
fn iris(folds: Option<usize>) -> TrainOptions {
    let mut o = TrainOptions::new(
        Source::Iris,
        RecipeOptions {
            epsilon: Some(3.0),
            epochs: Some(2.0),
            ..RecipeOptions::default()
        },
    );
    o.folds = folds;
    o
}

fn released(end: TrainEnd) -> Value {
    match end {
        TrainEnd::Released(mut v) => {
            // Timings differ between runs; everything else repeats under a seed.
            v.as_object_mut().map(|m| m.remove("wall_seconds"));
            v["diagnostics"]
                .as_object_mut()
                .map(|m| m.remove("samples_per_sec"));
            v
        }
        TrainEnd::Stopped { step, .. } => panic!("a run without a stop stopped at {step}"),
    }
}

#[test]
fn overrides_refuse_momentum_for_adam_and_give_mlp_a_layer() {
    let adam = RecipeOptions {
        optimizer: Some(OptimizerChoice::Adam),
        momentum: Some(0.5),
        ..RecipeOptions::default()
    };
    match adam.apply(TrainConfig::default()) {
        Err(Error::Usage(m)) => assert!(m.contains("--momentum 0.5"), "{m}"),
        other => panic!("expected a usage error, got {other:?}"),
    }
    let sgd = RecipeOptions {
        model: Some("mlp".into()),
        optimizer: Some(OptimizerChoice::Sgd),
        momentum: Some(0.25),
        ..RecipeOptions::default()
    };
    let cfg = sgd.apply(TrainConfig::default()).expect("a valid recipe");
    assert!(!cfg.hidden.is_empty());
    assert!(matches!(cfg.optimizer, OptimizerKind::Sgd { momentum, .. } if momentum == 0.25));
}

#[test]
fn a_run_without_a_privacy_choice_or_preset_is_refused() {
    let o = TrainOptions::new(Source::Iris, RecipeOptions::default());
    let e = train(&o, &mut seeded(1), &Solo, &mut Silent, None).expect_err("no privacy mode");
    assert!(
        matches!(&e, Error::Usage(m) if m.contains("--epsilon")),
        "{e}"
    );
}

#[test]
fn training_releases_epsilon_keeps_diagnostics_apart_and_repeats_under_a_seed() {
    let mut events = Vec::new();
    let mut observer = |e: Event<'_>| {
        events.push(match e {
            Event::RunStarted => "started",
            Event::Training(_) => "training",
            Event::RunFinished => "finished",
            _ => "other",
        })
    };
    let first = released(train(&iris(None), &mut seeded(7), &Solo, &mut observer, None).unwrap());
    let epsilon = first["epsilon"].as_f64().expect("epsilon released");
    assert!(epsilon > 0.0 && epsilon <= 3.0 + 1e-9, "{epsilon}");
    assert!(first.get("test_accuracy").is_none());
    assert!(first["diagnostics"]["test_accuracy"].is_number());
    assert_eq!(first["dataset"], "iris");
    assert_eq!(events.first(), Some(&"started"));
    assert_eq!(events.last(), Some(&"finished"));
    assert!(events.contains(&"training"));
    let again = released(train(&iris(None), &mut seeded(7), &Solo, &mut Silent, None).unwrap());
    assert_eq!(first, again);
}

#[test]
fn cross_validation_composes_the_folds() {
    let v = released(train(&iris(Some(3)), &mut seeded(3), &Solo, &mut Silent, None).unwrap());
    let all = v["epsilon_all_folds"].as_f64().unwrap();
    let one = v["epsilon_per_model"].as_f64().unwrap();
    assert!(all > one, "all folds {all}, one model {one}");
    assert_eq!(v["epsilon"], v["epsilon_all_folds"]);
    assert_eq!(v["fold_sizes"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        v["diagnostics"]["fold_accuracies"].as_array().map(Vec::len),
        Some(3)
    );
}

#[test]
fn releases_compose_over_their_count_and_refuse_a_stray_delta() {
    let o = ReleaseOptions {
        mechanism: Mechanism::Laplace,
        value: 10.0,
        sensitivity: 1.0,
        epsilon: 0.5,
        delta: None,
        count: 4,
        calibration: dpml_core::mechanisms::Calibration::Analytic,
    };
    let v = release(&o, &mut seeded(2), None).unwrap();
    assert_eq!(v["values"].as_array().map(Vec::len), Some(4));
    assert_eq!(v["epsilon_total"], 2.0);
    assert_eq!(v["mechanism"], "laplace");
    let stray = ReleaseOptions {
        delta: Some(1e-5),
        ..o
    };
    assert!(matches!(
        release(&stray, &mut seeded(2), None),
        Err(Error::Usage(_))
    ));
}

#[test]
fn sweep_summaries_are_per_epsilon_and_metric() {
    let job = |epsilon, repeat| Job { epsilon, repeat };
    let row = |job, value| Row {
        job,
        metric: "test_accuracy",
        fold: None,
        value,
    };
    let rows = [
        row(job(None, 0), 0.9),
        row(job(None, 1), 0.7),
        row(job(Some(1.0), 0), 0.5),
    ];
    let s = summarise(&rows);
    assert_eq!(s.len(), 2);
    assert!(s[0].epsilon.is_none() && s[0].n == 2);
    assert!((s[0].mean - 0.8).abs() < 1e-12);
    assert_eq!(s[1].epsilon, Some(1.0));
    assert!((s[1].mean - 0.5).abs() < 1e-12);
}
