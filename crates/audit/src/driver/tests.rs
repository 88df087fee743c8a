//! End-to-end audits on a small synthetic population where membership is easy to infer: random
//! labels on random features, so a model can only fit its training records by memorising them.

use std::sync::atomic::{AtomicUsize, Ordering};

use dpml_data::Dataset;
use dpml_learn::dpsgd::{OptimizerKind, Privacy, TrainConfig};
use dpml_mechanisms::DpRng;

use super::*;

/// `n` records of 24 uniform features with random labels among 4 classes.
fn noise_population(n: usize, seed: u64) -> Dataset {
    let mut rng = DpRng::seeded(seed);
    let d = 24;
    Dataset {
        name: "noise".into(),
        x: (0..n * d).map(|_| rng.uniform_f64() as f32).collect(),
        n,
        record_shape: vec![d],
        y: (0..n).map(|_| rng.below(4) as u32).collect(),
        n_classes: 4,
        feature_names: (0..d).map(|j| format!("f{j}")).collect(),
        class_names: (0..4).map(|c| c.to_string()).collect(),
        feature_range: None,
    }
}

fn recipe(privacy: Privacy) -> TrainConfig {
    TrainConfig {
        model: "mlp".into(),
        hidden: vec![64],
        epochs: 60.0,
        batch_size: 20,
        lr: 0.05,
        optimizer: OptimizerKind::Adam,
        privacy,
        physical_batch: 64,
        ..TrainConfig::default()
    }
}

fn metrics<'a>(r: &'a AuditReport, name: &str) -> &'a AttackMetrics {
    match &r.attacks[name] {
        AttackOutcome::Threshold(m) => m,
        other => panic!("{name} is not a threshold attack: {other:?}"),
    }
}

#[test]
fn lira_finds_memorised_members_and_the_cache_skips_retraining() {
    let data = noise_population(400, 1);
    let dir = std::env::temp_dir().join(format!("dpml-audit-driver-test-{}", std::process::id()));
    let cfg = AuditConfig {
        target_size: 100,
        attacks: AttackKind::ALL.to_vec(),
        reference_models: 8,
        canaries: 60,
        threads: 2,
        cache_dir: Some(dir.clone()),
        seed: Some(7),
        ..AuditConfig::new(recipe(Privacy::NonPrivate))
    };
    let count = AtomicUsize::new(0);
    let ready = |_: &ModelReady| {
        count.fetch_add(1, Ordering::Relaxed);
    };
    let first = run_audit(&cfg, &data, &mut DpRng::seeded(7), &ready).unwrap();
    assert_eq!(count.load(Ordering::Relaxed), cfg.models_needed());
    assert_eq!((first.models_trained, first.models_from_cache), (10, 0));
    // Random labels: the target fits its members and is at chance (1/4) on the rest.
    assert!(
        first.target_train_accuracy > 0.9,
        "{}",
        first.target_train_accuracy
    );
    assert!(
        first.target_holdout_accuracy < 0.45,
        "{}",
        first.target_holdout_accuracy
    );
    let (loss, lira) = (metrics(&first, "loss"), metrics(&first, "lira"));
    assert!(
        loss.auc > 0.8 && lira.auc > 0.8,
        "loss {} lira {}",
        loss.auc,
        lira.auc
    );
    assert!(metrics(&first, "lira_offline").auc > 0.7);
    // With 50 + 50 scores per half the Clopper–Pearson uppers are at least
    // 1 − 0.025^(1/50) ≈ 0.071, so even a perfect attack shows ε ≥ ln(0.93/0.071) ≈ 2.6 at
    // most; a clearly positive bound is what memorisation must give.
    assert!(first.epsilon_lower_bound > 0.5, "{first:?}");
    assert!(first.epsilon_theoretical.is_none() && first.consistent);
    assert!(
        first.attacks["one_run"].epsilon_lower_bound() > 0.0,
        "{:?}",
        first.attacks["one_run"]
    );

    let second = run_audit(&cfg, &data, &mut DpRng::seeded(7), &|_| {}).unwrap();
    assert_eq!((second.models_trained, second.models_from_cache), (0, 10));
    assert_eq!(second.attacks, first.attacks);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn private_training_keeps_every_bound_below_the_accountant() {
    let data = noise_population(400, 2);
    let cfg = AuditConfig {
        target_size: 100,
        attacks: vec![AttackKind::Loss, AttackKind::OneRun],
        canaries: 60,
        seed: Some(3),
        ..AuditConfig::new(recipe(Privacy::TargetEpsilon(2.0)))
    };
    let r = run_audit(&cfg, &data, &mut DpRng::seeded(3), &|_| {}).unwrap();
    let eps = r.epsilon_theoretical.unwrap();
    assert!(eps <= 2.0 && eps > 1.9, "{eps}");
    assert!(r.consistent, "{r:?}");
    assert!(r.epsilon_lower_bound <= eps);
    assert!(r.roc_bound.as_ref().is_some_and(|b| !b.is_empty()));
}

#[test]
fn bad_settings_fail_before_training() {
    let data = noise_population(50, 3);
    let cfg = AuditConfig {
        target_size: 30,
        ..AuditConfig::new(recipe(Privacy::NonPrivate))
    };
    let e = run_audit(&cfg, &data, &mut DpRng::seeded(1), &|_| panic!("trained")).unwrap_err();
    assert!(e.to_string().contains("got 30") && e.is_user_error(), "{e}");
}
