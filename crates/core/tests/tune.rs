//! The private search workflow (`dpml tune`, `dpml.tuning`) on the embedded digits: its
//! guarantee, its noisy scores, the kept model's facts, and its refusals before training.

use dpml_core::Error;
use dpml_core::accounting::{Accountant, PrivacyEvent, RdpAccountant};
use dpml_core::budget::{self, Ledger, LedgerOptions};
use dpml_core::data::Source;
use dpml_core::learn::dpsgd;
use dpml_core::mechanisms::{DpRng, Repetitions, TrialRelease};
use dpml_core::observe::{Event, Observer};
use dpml_core::train::{RecipeOptions, SplitOptions};
use dpml_core::tune::{SearchSpace, TuneOptions, Tuned, ValidationChoice, tune};
use serde_json::Value;

/// A search of logistic regressions on digits, 2 epochs each: a second or so.
fn digits(epsilon: f64, mean: f64, validation: ValidationChoice) -> TuneOptions {
    TuneOptions {
        dataset: Some(Source::Digits),
        label_column: None,
        data_dir: None,
        preset: None,
        recipe: RecipeOptions {
            epsilon: Some(epsilon),
            epochs: Some(2.0),
            ..RecipeOptions::default()
        },
        split: SplitOptions {
            test_fraction: 0.2,
            key: None,
        },
        declarations: Default::default(),
        space: SearchSpace::parse("learning-rate=0.5..4 log, batch-size=64|128").unwrap(),
        repetitions: Repetitions::Poisson { mean },
        release: TrialRelease::Best,
        validation,
        save_model: None,
    }
}

fn private(score_epsilon: Option<f64>) -> ValidationChoice {
    ValidationChoice::Private {
        fraction: 0.2,
        score_epsilon,
    }
}

/// Counts the training runs that start.
#[derive(Default)]
struct Runs(usize);

impl Observer for Runs {
    fn observe(&mut self, event: Event<'_>) {
        if matches!(event, Event::RunStarted) {
            self.0 += 1;
        }
    }
}

/// A fresh ledger of budget ε = `epsilon` in a folder of its own.
fn ledger(epsilon: f64) -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let o = LedgerOptions::new(dir.path().join("search.ledger")).with_budget(epsilon, None);
    let ledger = budget::open(&o).unwrap();
    (dir, ledger)
}

/// The search `o` seeded with `seed`, charged to a ledger of ε = 100: the release, the runs
/// that started and the ledger's entries.
fn run(o: &TuneOptions, seed: u64) -> (Tuned, usize, usize) {
    let (_dir, ledger) = ledger(100.0);
    let mut runs = Runs::default();
    let tuned = tune(o, &mut DpRng::seeded(seed), &mut runs, Some(&ledger)).unwrap();
    (tuned, runs.0, ledger.balance().unwrap().entries)
}

#[test]
fn calibration_meets_the_total_and_the_release_keeps_the_trials_apart() {
    let o = digits(2.0, 3.0, private(None));
    let (tuned, runs, charges) = run(&o, 11);
    let r = &tuned.release;
    let eps = r["epsilon"].as_f64().unwrap();
    assert!(eps <= 2.0 && eps > 2.0 * 0.999, "{eps}");
    // One ledger entry, the whole search, its balance in the release.
    assert_eq!(charges, 1);
    assert_eq!(r["ledger"]["entries"], 1, "{r}");
    assert!(
        (r["ledger"]["spent"].as_f64().unwrap() - eps).abs() < 1e-9,
        "{r}"
    );
    // The released event is the whole search: accounting it again gives the same ε.
    let event: PrivacyEvent = serde_json::from_value(r["event"].clone()).unwrap();
    assert!(matches!(event, PrivacyEvent::RepeatAndSelect { .. }));
    assert_eq!(RdpAccountant::default().epsilon(&event, 1e-5).unwrap(), eps);
    let per_trial = r["epsilon_per_trial"].as_f64().unwrap();
    assert!(per_trial < eps, "{per_trial} vs {eps}");
    // The trials, their number and the exact accuracies are diagnostics.
    let d = &r["diagnostics"];
    let trials = d["trials"].as_array().unwrap();
    assert_eq!(trials.len(), runs);
    assert_eq!(d["trials_run"], runs);
    for k in [
        "trials",
        "trials_run",
        "validation_accuracy",
        "test_accuracy",
    ] {
        assert!(r.get(k).is_none(), "{k} at top level");
    }
    if runs > 0 {
        // The kept trial is the one with the best noisy score; its run alone claims less.
        let best = r["best"]["noisy_score"].as_f64().unwrap();
        let top = trials
            .iter()
            .map(|t| t["noisy_score"].as_f64().unwrap())
            .fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(best, top);
        assert!(r["epsilon_kept_run"].as_f64().unwrap() < per_trial);
        let lr = r["best"]["learning_rate"].as_f64().unwrap();
        assert!((0.5..=4.0).contains(&lr));
    }
    assert_eq!(r["tuning"]["repetitions"]["law"], "poisson");
    assert_eq!(
        r["tuning"]["released"],
        "best trial only (Papernot & Steinke)"
    );
    assert!(r["note"].as_str().unwrap().contains("--release-trials"));
}

/// A search that releases every trial: the list at top level with each trial's
/// hyperparameters and noisy score (never its exact accuracy), its event the composition over
/// the random number of trials (accounted again to the same ε, charged to the ledger), and the
/// kept model's facts say which bound its ε is.
#[test]
fn releasing_every_trial_puts_the_noisy_scores_at_top_level_under_the_larger_bound() {
    let o = TuneOptions {
        release: TrialRelease::Every,
        ..digits(2.0, 3.0, private(None))
    };
    let (tuned, runs, charges) = run(&o, 11);
    let r = &tuned.release;
    let eps = r["epsilon"].as_f64().unwrap();
    assert!(eps <= 2.0 && eps > 2.0 * 0.999, "{eps}");
    assert_eq!(charges, 1);
    let event: PrivacyEvent = serde_json::from_value(r["event"].clone()).unwrap();
    assert!(matches!(event, PrivacyEvent::RepeatAndReleaseAll { .. }));
    assert_eq!(RdpAccountant::default().epsilon(&event, 1e-5).unwrap(), eps);
    assert!((r["ledger"]["spent"].as_f64().unwrap() - eps).abs() < 1e-9);
    assert_eq!(
        r["tuning"]["released"],
        "every trial (composition over the random number of trials)"
    );
    // At the same total, each trial gets less than in a best-only search.
    let (best_only, _, _) = run(&digits(2.0, 3.0, private(None)), 11);
    let per_trial = |r: &Value| r["epsilon_per_trial"].as_f64().unwrap();
    assert!(per_trial(r) < per_trial(&best_only.release));
    let released = r["trials"].as_array().unwrap();
    assert_eq!(released.len(), runs);
    assert!(runs > 0, "this seed draws trials");
    for (t, record) in released.iter().zip(&tuned.trials) {
        let keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["hyperparameters", "noise_multiplier", "noisy_score"]);
        assert_eq!(t["noisy_score"].as_f64().unwrap(), record.noisy_score);
        assert_eq!(t["hyperparameters"], record.hyperparameters);
    }
    // The exact accuracies stay diagnostics.
    assert!(r["diagnostics"]["trials"][0]["validation_accuracy"].is_number());
    let kept = tuned.kept.as_ref().unwrap();
    let tuning = kept.facts.tuning.as_ref().unwrap();
    assert_eq!(tuning.released, TrialRelease::Every);
    assert_eq!(kept.facts.epsilon, Some(eps));
}

#[test]
fn the_score_is_a_noisy_count_of_disjoint_validation_records() {
    // ε_score = 0.2: noise of scale 5 counts moves most scores by a whole number of counts.
    let loud = digits(3.0, 6.0, private(Some(0.2)));
    let (tuned, runs, _) = run(&loud, 6);
    let n = tuned.release["score"]["validation_size"].as_f64().unwrap();
    let moved: Vec<f64> = tuned
        .trials
        .iter()
        .map(|t| (t.noisy_score - t.validation_accuracy) * n)
        .collect();
    assert_eq!(moved.len(), runs);
    assert!(runs >= 2);
    assert!(
        moved.iter().all(|m| (m - m.round()).abs() < 1e-6),
        "{moved:?}"
    );
    assert!(
        moved.iter().filter(|m| m.abs() > 0.5).count() * 2 >= runs,
        "{moved:?}"
    );
    // The trial's event: the worst of its training (one of two cells) and its score, the
    // score a discrete Laplace count of sensitivity 1 and scale 1/ε_score.
    let event: PrivacyEvent = serde_json::from_value(tuned.release["event"].clone()).unwrap();
    let PrivacyEvent::RepeatAndSelect { event: trial, .. } = event else {
        panic!("{event:?}")
    };
    let PrivacyEvent::WorstOf { events } = *trial else {
        panic!("{trial:?}")
    };
    assert!(matches!(&events[0], PrivacyEvent::WorstOf { events } if events.len() == 2));
    match &events[1] {
        PrivacyEvent::DiscreteLaplace { scale, sensitivity } => {
            assert_eq!(*sensitivity, 1);
            assert!((scale - 5.0).abs() < 1e-9, "{scale}");
        }
        other => panic!("{other:?}"),
    }
    // The validation records are cut from the training records: the trials train on the rest.
    let train = tuned.release["train_size"].as_f64().unwrap();
    assert!(train + n > 1300.0 && train + n < 1600.0, "{train} + {n}");
}

/// The patients table of `examples/` with its schema, the last 100 records copied to a file of
/// their own declared public.
fn patients(dir: &std::path::Path) -> TuneOptions {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let text = std::fs::read_to_string(examples.join("patients.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let public = dir.join("public.csv");
    let mut rows = vec![lines[0]];
    rows.extend(&lines[lines.len() - 100..]);
    std::fs::write(&public, rows.join("\n") + "\n").unwrap();
    let csv = |p: &std::path::Path| format!("csv:{}", p.display()).parse::<Source>().unwrap();
    TuneOptions {
        dataset: Some(csv(&examples.join("patients.csv"))),
        declarations: dpml_core::schema::Declarations {
            schema: Some(examples.join("patients.toml")),
            ..Default::default()
        },
        space: SearchSpace::parse("learning-rate=0.1..1 log, batch-size=32|64").unwrap(),
        validation: ValidationChoice::Public {
            source: csv(&public),
        },
        ..digits(3.0, 3.0, private(None))
    }
}

#[test]
fn a_public_validation_set_scores_exactly_at_no_cost() {
    let dir = tempfile::tempdir().unwrap();
    let o = patients(dir.path());
    let (tuned, runs, _) = run(&o, 3);
    assert!(runs > 0);
    for t in &tuned.trials {
        assert_eq!(t.noisy_score, t.validation_accuracy);
    }
    let r = &tuned.release;
    assert_eq!(r["score"]["validation_size"], 100);
    assert!(r["score"]["epsilon"].is_null());
    // No score in the trial's event: the trials' training alone.
    let event: PrivacyEvent = serde_json::from_value(r["event"].clone()).unwrap();
    let PrivacyEvent::RepeatAndSelect { event: trial, .. } = event else {
        panic!("{event:?}")
    };
    assert!(
        matches!(*trial, PrivacyEvent::WorstOf { ref events } if events.len() == 2
            && events.iter().all(|e| matches!(e, PrivacyEvent::SelfComposed { .. }))),
        "{trial:?}"
    );
    assert!(
        r["public"].to_string().contains("declared public"),
        "{}",
        r["public"]
    );
    // A set that does not fit the schema is refused before training.
    let mut runs = Runs::default();
    let other = TuneOptions {
        validation: ValidationChoice::Public {
            source: Source::Iris,
        },
        ..o.clone()
    };
    let e = tune(&other, &mut DpRng::seeded(1), &mut runs, None).unwrap_err();
    assert!(matches!(e, Error::Usage(_)), "{e}");
    assert_eq!(runs.0, 0);
    // The training data itself (no test split of its own) is private, not public.
    let itself = TuneOptions {
        validation: ValidationChoice::Public {
            source: Source::Digits,
        },
        ..digits(2.0, 3.0, private(None))
    };
    let e = tune(&itself, &mut DpRng::seeded(1), &mut runs, None).unwrap_err();
    assert!(e.to_string().contains("private"), "{e}");
}

#[test]
fn the_kept_model_carries_the_search_guarantee() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kept.safetensors");
    let mut o = digits(2.0, 4.0, private(None));
    o.save_model = Some(path.clone());
    // A seed whose draw runs at least one trial.
    let (tuned, runs, _) = (1..20)
        .map(|s| run(&o, s))
        .find(|(_, runs, _)| *runs > 0)
        .unwrap();
    assert!(runs > 0);
    let saved = dpsgd::load_saved(&path).unwrap();
    let facts = saved.facts.unwrap();
    let r = &tuned.release;
    // The facts are read back from JSON text: equal to the last bit or two.
    let close = |a: Option<f64>, b: Option<f64>| {
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!((a - b).abs() <= 1e-12 * b.abs(), "{a} vs {b}");
    };
    close(facts.epsilon, r["epsilon"].as_f64());
    assert_eq!(facts.delta, Some(1e-5));
    assert_eq!(facts.accountant.as_deref(), Some("rdp"));
    let tuning = facts.tuning.unwrap();
    assert_eq!(tuning.repetitions, Repetitions::Poisson { mean: 4.0 });
    close(
        Some(tuning.epsilon_per_trial),
        r["epsilon_per_trial"].as_f64(),
    );
    close(tuning.epsilon_kept_run, r["epsilon_kept_run"].as_f64());
    close(Some(tuning.score), r["best"]["noisy_score"].as_f64());
    close(
        facts.noise_multiplier,
        r["best"]["noise_multiplier"].as_f64(),
    );
    assert_eq!(r["model_file"], Value::from(path.to_str().unwrap()));
    // The split that held the test records out is recorded, as `dpml train` records it, so
    // `dpml eval` holds out the same records by default.
    let split = facts.split.unwrap();
    assert_eq!(Value::from(split.key), r["split_key"]);
    assert_eq!(split.test_fraction, 0.2);
    assert_eq!(facts.classes.map(|c| c.len()), Some(10));
}

#[test]
fn records_in_memory_are_searched_with_the_table_recipe_and_charged_alike() {
    use dpml_core::data::{FeatureBounds, LoadOptions, load};
    use dpml_core::train::{FitOptions, MEMORY_DATASET};
    use dpml_core::tune::{SearchFitOptions, fit};
    let iris = load(&Source::Iris, &LoadOptions::default()).unwrap().train;
    let o = SearchFitOptions {
        fit: FitOptions {
            recipe: RecipeOptions {
                epsilon: Some(3.0),
                epochs: Some(2.0),
                ..RecipeOptions::default()
            },
            bounds: Some(FeatureBounds::Uniform((0.0, 8.0))),
            classes: iris.class_names.clone(),
        },
        space: SearchSpace::parse("learning-rate=0.1..1 log, max-grad-norm=0.5..2").unwrap(),
        repetitions: Repetitions::TruncatedNegativeBinomial {
            eta: 0.0,
            mean: 2.0,
        },
        release: TrialRelease::Best,
        validation_fraction: 0.2,
        score_epsilon: None,
    };
    let (_dir, ledger) = ledger(10.0);
    let mut runs = Runs::default();
    let tuned = fit(&o, &iris, &mut DpRng::seeded(5), &mut runs, Some(&ledger)).unwrap();
    let r = &tuned.release;
    assert!(r["epsilon"].as_f64().unwrap() <= 3.0, "{r}");
    assert_eq!(r["dataset"], MEMORY_DATASET);
    // The trials' batch is the table recipe's (not searched): one cell of noise.
    assert_eq!(r["noise"][0]["batch_size"][0].as_f64(), Some(64.0), "{r}");
    assert!(r["split_key"].is_string(), "{r}");
    // The truncated negative binomial draws at least one trial: a model is kept.
    assert!(runs.0 >= 1);
    let kept = tuned.kept.unwrap();
    assert!(kept.facts.tuning.is_some() && kept.facts.split.is_none());
    assert_eq!(kept.epoch_log.len(), 2);
    let entries = ledger.entries().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (entries[0].command.as_str(), entries[0].dataset.as_str()),
        ("tune", MEMORY_DATASET)
    );
    assert!(matches!(
        entries[0].event,
        PrivacyEvent::RepeatAndSelect { .. }
    ));
    // Bounds are declared, never read from the records.
    let mut undeclared = o.clone();
    undeclared.fit.bounds = None;
    let e = fit(&undeclared, &iris, &mut DpRng::seeded(5), &mut runs, None).unwrap_err();
    assert!(e.to_string().contains("bounds"), "{e}");
}

#[test]
fn a_target_that_cannot_be_met_is_refused_before_training() {
    let o = digits(0.05, 100.0, private(None));
    let (_dir, roomy) = ledger(100.0);
    let mut runs = Runs::default();
    let e = tune(&o, &mut DpRng::seeded(1), &mut runs, Some(&roomy)).unwrap_err();
    match e {
        Error::Usage(m) => assert!(m.contains("cannot meet epsilon = 0.05"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(runs.0, 0);
    assert_eq!(
        roomy.balance().unwrap().entries,
        0,
        "a refused search charged the ledger"
    );
    // A ledger the search would overspend stops it before it trains too, and records nothing.
    let (_dir, small) = ledger(1.0);
    let o = digits(2.0, 3.0, private(None));
    let e = tune(&o, &mut DpRng::seeded(1), &mut runs, Some(&small)).unwrap_err();
    assert!(e.to_string().contains("over budget"), "{e}");
    assert_eq!(runs.0, 0);
    assert_eq!(small.balance().unwrap().entries, 0);
}

#[test]
fn poisson_may_draw_no_trial_and_then_releases_no_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.safetensors");
    let mut o = digits(2.0, 1.0, private(None));
    o.recipe.epochs = Some(1.0);
    o.save_model = Some(path.clone());
    // P[K = 0] = e^{-1}: a seed among the first few draws none.
    let (tuned, _, charges) = (1..40)
        .map(|s| {
            let _ = std::fs::remove_file(&path);
            run(&o, s)
        })
        .find(|(_, runs, _)| *runs == 0)
        .unwrap();
    assert_eq!(charges, 1, "the guarantee is charged whatever K is");
    assert!(tuned.kept.is_none() && tuned.release.get("best").is_none());
    assert!(tuned.release["outcome"].as_str().unwrap().contains("K = 0"));
    assert!(!path.exists());
}

/// The white-box canary audit of a whole search: its lower bound stays below the search's ε
/// (the full experiment over many seeds is `examples/tune_audit.rs`).
#[test]
fn the_canary_audit_of_a_search_stays_below_its_epsilon() {
    use dpml_core::data::{LoadOptions, SplitBasis, SplitKey, load, validation_split};
    use dpml_core::tune::audit::audit_search;
    use dpml_core::tune::{Noise, Search, Validation};
    let digits = load(&Source::Digits, &LoadOptions::default())
        .unwrap()
        .train;
    let mut base = dpsgd::preset("digits-eps1").unwrap().config;
    base.epochs = 3.0;
    let search = Search {
        space: SearchSpace::parse("learning-rate=0.5..4 log, batch-size=64|128").unwrap(),
        repetitions: Repetitions::Poisson { mean: 2.0 },
        release: TrialRelease::Best,
        noise: Noise::TotalEpsilon(8.0),
        delta: 1e-5,
        base,
    };
    let mut rng = DpRng::seeded(7);
    let key = SplitKey::from_rng(rng.as_rng());
    let (fit, validation) = validation_split(&digits, 0.1, &key, SplitBasis::Record).unwrap();
    let a = audit_search(
        &search,
        &fit,
        Validation::Private {
            set: &validation,
            score_epsilon: 0.8,
        },
        400,
        0.95,
        &mut rng,
        &mut Runs::default(),
    )
    .unwrap();
    assert!(a.epsilon <= 8.0 && a.epsilon > 7.9, "{}", a.epsilon);
    assert_eq!(a.audit.is_some(), a.trials > 0);
    assert!(
        a.lower_bound() <= a.epsilon,
        "{} > {}",
        a.lower_bound(),
        a.epsilon
    );
}

/// A search's event holds calibrated σ and rates such as B/N: it must read back from JSON bit
/// for bit, as the budget ledger stores it (serde_json's float_roundtrip).
#[test]
fn search_events_read_back_from_json_exactly() {
    use dpml_core::tune::plan::{Noise, plan};
    use dpml_core::tune::space::Cell;
    for n in [1294usize, 1297, 1301, 54124] {
        let cells = [Cell {
            batch: (64.0, 256.0),
            epochs: (2.0, 3.0),
        }];
        let score = PrivacyEvent::DiscreteLaplace {
            scale: 1.0 / 0.3,
            sensitivity: 1,
        };
        let p = plan(
            &cells,
            n,
            Some(&score),
            Repetitions::Poisson { mean: 2.0 },
            TrialRelease::Best,
            1e-5,
            Noise::TotalEpsilon(2.0),
        )
        .unwrap();
        let text = serde_json::to_string(&p.search).unwrap();
        let back: PrivacyEvent = serde_json::from_str(&text).unwrap();
        assert_eq!(back, p.search, "{text}");
    }
}
