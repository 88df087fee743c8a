//! End-to-end tests of the trainer on the embedded `digits` data (1797 records of 8×8): fast
//! enough for the dev profile, real enough to show learning and its absence.

use dpml_data::{Dataset, LoadOptions, Source, SplitBasis, SplitKey, train_test_split};
use dpml_mechanisms::DpRng;

use super::*;

fn digits() -> (Dataset, Dataset) {
    let all = dpml_data::load(
        &"digits".parse::<Source>().unwrap(),
        &LoadOptions::default(),
    )
    .unwrap()
    .train;
    train_test_split(&all, 0.25, &SplitKey::from_seed(7), SplitBasis::Record).unwrap()
}

fn mlp(privacy: Privacy, epochs: f64) -> TrainConfig {
    TrainConfig {
        model: "mlp".into(),
        hidden: vec![64],
        epochs,
        batch_size: 64,
        max_grad_norm: 1.0,
        lr: 0.5,
        optimizer: OptimizerKind::Sgd {
            momentum: 0.9,
            nesterov: false,
        },
        privacy,
        normalize: Normalization::PublicRange,
        ..TrainConfig::default()
    }
}

fn run(cfg: &TrainConfig, seed: u64) -> TrainOutcome {
    let (tr, te) = digits();
    train(cfg, &tr, Some(&te), &mut DpRng::seeded(seed), &mut |_| {}).unwrap()
}

#[test]
fn non_private_mlp_learns_digits() {
    let mut cfg = mlp(Privacy::NonPrivate, 10.0);
    cfg.lr = 0.1;
    let out = run(&cfg, 1);
    let acc = out.report.test_accuracy.unwrap();
    eprintln!("non-private test accuracy {acc}");
    assert!(acc > 0.94, "test accuracy {acc}");
    assert_eq!(out.report.epsilon, None);
    assert!(out.event.is_none());
    assert!(out.report.seeded);
}

/// At ε = 8 DP-SGD is far above chance (10 classes: 0.1; it reaches about 0.9); at ε = 0.01
/// (σ in the hundreds) the updates are noise, and accuracy stays near chance. 450 test records: the accuracy of a
/// chance-level classifier has sd ≈ √(0.1·0.9/450) = 0.014, so ≤ 0.3 is 14 sd of slack for
/// a model that learnt a little and still failed.
#[test]
fn private_accuracy_tracks_epsilon() {
    let high = run(&mlp(Privacy::TargetEpsilon(8.0), 4.0), 2);
    let acc = high.report.test_accuracy.unwrap();
    eprintln!("epsilon 8: test accuracy {acc}");
    assert!(acc > 0.8, "epsilon 8: test accuracy {acc}");
    assert!(high.report.epsilon.unwrap() <= 8.0);
    let low = run(&mlp(Privacy::TargetEpsilon(0.01), 10.0), 2);
    let acc = low.report.test_accuracy.unwrap();
    eprintln!(
        "epsilon 0.01: test accuracy {acc}, sigma {:?}",
        low.report.noise_multiplier
    );
    assert!(acc < 0.3, "epsilon 0.01: test accuracy {acc}");
    assert!(low.report.noise_multiplier.unwrap() > 50.0);
}

#[test]
fn report_and_event_match_the_plan_and_observer_sees_every_step() {
    let (tr, te) = digits();
    let mut cfg = mlp(Privacy::TargetEpsilon(2.0), 3.0);
    cfg.accountant = AccountantKind::Rdp;
    let (mut steps, mut epochs, mut started) = (0u64, Vec::new(), false);
    let out = train(
        &cfg,
        &tr,
        Some(&te),
        &mut DpRng::seeded(3),
        &mut |p| match p {
            Progress::Started { .. } => started = true,
            Progress::Step { .. } => steps += 1,
            Progress::Epoch(log) => epochs.push(log.clone()),
        },
    )
    .unwrap();
    let r = &out.report;
    let n = tr.n as u64;
    assert!(started);
    assert_eq!(r.steps, (3 * n).div_ceil(64));
    assert_eq!(steps, r.steps);
    assert_eq!(epochs.len(), r.steps.div_ceil(n.div_ceil(64)) as usize);
    assert_eq!(epochs, r.epoch_log);
    assert_eq!(r.sampling_rate, 64.0 / n as f64);
    assert_eq!(r.accountant, "rdp");
    assert_eq!(r.bounds, Some(dpml_accounting::BoundKind::UpperBound));
    let eps = r.epsilon.unwrap();
    assert!(eps <= 2.0 && eps > 1.99, "{eps}");
    // ε so far grows epoch by epoch and ends at the reported ε.
    assert!(epochs.windows(2).all(|w| w[0].epsilon < w[1].epsilon));
    assert_eq!(epochs.last().unwrap().epsilon, Some(eps));
    assert_eq!(
        out.event,
        Some(dpml_mechanisms::PrivacyEvent::dp_sgd(
            r.noise_multiplier.unwrap(),
            r.sampling_rate,
            r.steps
        ))
    );
    assert!(r.samples_per_sec > 0.0 && r.wall_seconds > 0.0);
    // Exact noise, the default: the grid adds g·√d to C (a fraction of a percent).
    assert!(r.exact_noise);
    let s = r.sensitivity.unwrap();
    assert!(s > 1.0 && s < 1.01, "{s}");
}

/// GDP is reported as an approximation (as `dpml account` labels it), and full-batch steps
/// (q = 1) compose exactly to √T/σ-GDP rather than by the CLT.
#[test]
fn gdp_epsilon_is_labelled_an_approximation_and_exact_at_full_batch() {
    use dpml_accounting::BoundKind;
    let (tr, _) = digits();
    let mut cfg = mlp(Privacy::NoiseMultiplier(2.0), 3.0);
    cfg.model = "logreg".into();
    cfg.hidden = vec![];
    cfg.batch_size = tr.n;
    cfg.accountant = AccountantKind::Gdp;
    let out = train(&cfg, &tr, None, &mut DpRng::seeded(4), &mut |_| {}).unwrap();
    let r = &out.report;
    assert_eq!((r.sampling_rate, r.steps), (1.0, 3));
    assert_eq!(r.bounds, Some(BoundKind::Approximation));
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["bounds"], "approximation");
    let exact = dpml_accounting::gdp::epsilon_for_delta(3f64.sqrt() / 2.0, cfg.delta).unwrap();
    assert_eq!(r.epsilon, Some(exact));
    // Non-private: no ε, so nothing to label.
    cfg.privacy = Privacy::NonPrivate;
    let out = train(&cfg, &tr, None, &mut DpRng::seeded(4), &mut |_| {}).unwrap();
    assert_eq!((out.report.epsilon, out.report.bounds), (None, None));
}

#[test]
fn save_load_evaluate_gives_the_same_accuracy() {
    let (tr, te) = digits();
    let mut cfg = mlp(Privacy::NoiseMultiplier(1.0), 2.0);
    cfg.ema = Some(0.9);
    let mut out = train(&cfg, &tr, Some(&te), &mut DpRng::seeded(4), &mut |_| {}).unwrap();
    let dir = std::env::temp_dir().join(format!("dpml-dpsgd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("digits.safetensors");
    save(&path, &out.model, &out.input).unwrap();
    let (mut back, input) = load(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(input, out.input);
    let again = evaluate(&mut back, &input, &te).unwrap();
    assert_eq!(Some(again.accuracy), out.report.test_accuracy);
    assert_eq!(again.n, te.n);
    assert_eq!(again.per_example_loss.len(), te.n);
    // The logits agree with the evaluation.
    let logits = predict_logits(&mut out.model, &out.input, &te).unwrap();
    assert_eq!(logits.shape(), &[te.n, 10]);
    let correct = dpml_nn::count_correct(
        &logits,
        &te.y.iter().map(|&c| c as usize).collect::<Vec<_>>(),
    );
    assert_eq!(correct as f64 / te.n as f64, again.accuracy);
}

#[test]
fn exact_noise_and_per_layer_clipping_train() {
    let mut cfg = mlp(Privacy::TargetEpsilon(8.0), 4.0);
    cfg.exact_noise = true;
    cfg.per_layer_clipping = true;
    let out = run(&cfg, 5);
    let r = &out.report;
    assert!(r.exact_noise);
    // d = 64·64 + 64 + 64·10 + 10 = 4810 parameters: the adjustment g√d stays below 1% of C.
    let s = r.sensitivity.unwrap();
    assert!(s > 1.0 && s < 1.01, "{s}");
    eprintln!(
        "exact noise, per-layer clipping: test accuracy {:?}, sensitivity {s}",
        r.test_accuracy
    );
    assert!(r.test_accuracy.unwrap() > 0.6, "{:?}", r.test_accuracy);
}

#[test]
fn bad_input_is_refused_with_a_named_error() {
    let (tr, te) = digits();
    let go = |cfg: &TrainConfig, data: &Dataset| {
        train(cfg, data, None, &mut DpRng::seeded(0), &mut |_| {})
            .unwrap_err()
            .to_string()
    };
    let base = mlp(Privacy::NoiseMultiplier(1.0), 1.0);
    let cnn = TrainConfig {
        model: "cnn".into(),
        ..base.clone()
    };
    let msg = go(&cnn, &tr);
    assert!(
        msg.contains("[1, 28, 28]") && msg.contains("[1, 8, 8]"),
        "{msg}"
    );
    let big = TrainConfig {
        batch_size: tr.n + 1,
        ..base.clone()
    };
    assert!(go(&big, &tr).contains(&format!("got {}", tr.n + 1)));
    assert!(
        go(
            &TrainConfig {
                batch_size: 0,
                ..base.clone()
            },
            &tr
        )
        .contains("batch_size")
    );
    assert!(
        go(
            &TrainConfig {
                max_grad_norm: 0.0,
                ..base.clone()
            },
            &tr
        )
        .contains("max_grad_norm")
    );
    assert!(
        go(
            &TrainConfig {
                model: "vgg".into(),
                ..base.clone()
            },
            &tr
        )
        .contains("vgg")
    );
    assert!(
        go(
            &TrainConfig {
                model: "mlp-batchnorm".into(),
                ..base.clone()
            },
            &tr
        )
        .contains("BatchNorm")
    );
    // A test set of another shape, a NaN feature, a label out of range.
    let other = Dataset {
        record_shape: vec![64],
        ..te.clone()
    };
    let err = train(&base, &tr, Some(&other), &mut DpRng::seeded(0), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("[64]"), "{err}");
    let mut nan = tr.clone();
    nan.x[70] = f32::NAN;
    assert!(go(&base, &nan).contains("record 1, feature 6 is NaN"));
    let mut lab = tr.clone();
    lab.y[3] = 10;
    assert!(go(&base, &lab).contains("record 3 has label 10"));
    // Public-range normalisation on data without a declared range.
    let norange = Dataset {
        feature_range: None,
        ..tr.clone()
    };
    assert!(go(&base, &norange).contains("public"));
    // Evaluation refuses data the model cannot take.
    let mut out = train(&base, &tr, None, &mut DpRng::seeded(0), &mut |_| {}).unwrap();
    let e = evaluate(&mut out.model, &out.input, &other)
        .unwrap_err()
        .to_string();
    assert!(e.contains("[64]") && e.contains("[1, 8, 8]"), "{e}");
}
