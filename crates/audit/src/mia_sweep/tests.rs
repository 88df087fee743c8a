//! The sweep's settings, points and local-DP inputs, without training.

use dpml_data::Dataset;
use dpml_learn::dpsgd::{Privacy, TrainConfig};
use dpml_mechanisms::DpRng;

use super::*;

/// `n` records of 8 features in [0, 1], two classes: the learn crate's shared fixture.
fn population(n: usize) -> Dataset {
    dpml_learn::test_data::synthetic(n, 8)
}

fn sweep(epsilons: Vec<f64>) -> MiaSweepConfig {
    MiaSweepConfig {
        audit: AuditConfig {
            target_size: 50,
            reference_models: 4,
            ..AuditConfig::new(TrainConfig {
                batch_size: 10,
                ..TrainConfig::default()
            })
        },
        epsilons,
        feature_ranges: vec![(0.0, 1.0); 8],
    }
}

#[test]
fn bad_grids_are_refused_by_value() {
    let data = population(200);
    let err = |e: Vec<f64>| sweep(e).validate_for(&data).unwrap_err().to_string();
    assert!(err(vec![]).contains("epsilons is empty"));
    assert!(err(vec![1.0, -2.0]).contains("-2"));
    assert!(err(vec![f64::NAN]).contains("NaN"));
    // The attacks are always the loss attack and LiRA, whatever the audit asked for.
    let audit = sweep(vec![1.0]).validate_for(&data).unwrap();
    assert_eq!(audit.attacks, vec![AttackKind::Loss, AttackKind::Lira]);
}

#[test]
fn points_are_the_baseline_then_both_mechanisms_at_each_epsilon() {
    let cfg = sweep(vec![0.5, 4.0]);
    assert_eq!(
        cfg.points(),
        vec![
            (Mechanism::NonPrivate, None),
            (Mechanism::DpSgd, Some(0.5)),
            (Mechanism::LocalDp, Some(0.5)),
            (Mechanism::DpSgd, Some(4.0)),
            (Mechanism::LocalDp, Some(4.0)),
        ]
    );
    assert_eq!(cfg.models_needed(), 5 * 5);
    let base = TrainConfig::default();
    assert_eq!(
        Mechanism::DpSgd.recipe(&base, Some(2.0)).privacy,
        Privacy::TargetEpsilon(2.0)
    );
    // Local DP's noise is on the inputs: its trainer adds none.
    assert_eq!(
        Mechanism::LocalDp.recipe(&base, Some(2.0)).privacy,
        Privacy::NonPrivate
    );
}

#[test]
fn local_inputs_perturb_every_record_and_state_the_per_record_epsilon() {
    let data = population(20);
    let local = LocalInputs::new(vec![(0.0, 1.0); 8], 2.0);
    assert_eq!(local.epsilon_per_record(), None);
    let noisy = local.prepare(data.clone(), &mut DpRng::seeded(1)).unwrap();
    assert_eq!(local.epsilon_per_record(), Some(2.0));
    assert_eq!(noisy.y, data.y);
    let moved = noisy.x.iter().zip(&data.x).filter(|(a, b)| a != b).count();
    assert_eq!(moved, data.x.len(), "every feature gets noise");
    // As drawn: nothing changes.
    assert_eq!(
        AsDrawn
            .prepare(data.clone(), &mut DpRng::seeded(1))
            .unwrap(),
        data
    );
}

#[test]
fn a_non_finite_model_output_names_the_point_as_a_runtime_failure() {
    let nan = || {
        DriverError::Audit(AuditError::NonFinite {
            what: "logits",
            index: 0,
            value: f64::NAN,
        })
    };
    let e = diverged(nan(), Mechanism::LocalDp, Some(1.5));
    let msg = e.to_string();
    assert!(matches!(e, DriverError::Diverged { .. }), "{e:?}");
    assert!(!e.is_user_error());
    assert!(
        msg.starts_with("local-dp at epsilon = 1.5: training diverged"),
        "{msg}"
    );
    assert!(
        msg.contains("logits[0]") && msg.contains("--learning-rate"),
        "{msg}"
    );
    assert!(
        diverged(nan(), Mechanism::NonPrivate, None)
            .to_string()
            .contains("no privacy")
    );
    // Other failures pass through unchanged.
    let other = diverged(
        DriverError::Invalid("bad".into()),
        Mechanism::DpSgd,
        Some(1.0),
    );
    assert!(matches!(other, DriverError::Invalid(ref m) if m == "bad"));
}
