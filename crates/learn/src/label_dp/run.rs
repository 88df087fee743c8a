//! One label-DP experiment end to end: privatise every training label once, train without
//! further noise, evaluate on the test set, and report the utility next to ε.

use std::time::Instant;

use dpml_data::Dataset;
use dpml_mechanisms::{DpRng, PrivacyEvent};
use dpml_nn::Sequential;
use serde::Serialize;

use super::config::{LabelDpConfig, LabelMechanism, Task};
use super::error::{LabelDpError, config_err};
use super::fit::{fit, predict_values, shuffle};
use super::rr_prior::{Encoding, RrWithPrior};
use super::targets::{self, Noised, Targets};
use crate::dpsgd::{self, InputTransform, Objective, Progress, evaluate, predict_logits};
use crate::perturbation::softmax_rows;

/// What the observer of [`run`] is told.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LabelDpProgress {
    /// A training stage starts (1-based; several only for RR-with-prior).
    Stage {
        /// Stage number, from 1.
        stage: usize,
        /// Number of stages.
        stages: usize,
        /// Training steps of this stage.
        steps: u64,
    },
    /// A training step finished.
    Step {
        /// Steps done in this stage, from 1.
        step: u64,
        /// Steps of this stage.
        steps: u64,
    },
}

/// The report of a run. Field names are the `dpml label-dp --json` contract.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelDpReport {
    /// "classification" or "regression".
    pub task: String,
    /// "laplace", "rr" or "rr-prior".
    pub mechanism: String,
    /// The post-processing used (Laplace classification only).
    pub postprocess: Option<String>,
    /// Test accuracy (classification).
    pub test_accuracy: Option<f64>,
    /// Test mean squared error of the prediction, clamped to [0, K−1], against the true label
    /// value (regression).
    pub test_mse: Option<f64>,
    /// Test mean absolute error (regression).
    pub test_mae: Option<f64>,
    /// Share of training labels still correct after noise and post-processing (see
    /// [`Targets::accuracy`]).
    pub noisy_label_accuracy: f64,
    /// The per-record ε-label-DP guarantee.
    pub epsilon: f64,
    /// Always "label-dp": only labels are protected, features are not.
    pub guarantee: String,
    /// Laplace scale per coordinate (Laplace only): 2/ε (one-hot) or (K−1)/ε (value).
    pub noise_scale: Option<f64>,
    /// Probability that RR keeps a label, e^ε/(e^ε + K − 1) (randomized response only).
    pub rr_keep_probability: Option<f64>,
    /// Stages (RR-with-prior), else 1.
    pub stages: usize,
    /// Noisy-label accuracy of each stage's labels (RR-with-prior: later stages are better).
    pub stage_noisy_label_accuracy: Vec<f64>,
    /// Mean k of the top-k sets (RR-with-prior only).
    pub mean_top_k: Option<f64>,
    /// RR-with-prior only: the rule choosing candidate sets and encodings.
    pub top_k_rule: Option<String>,
    /// RR-with-prior only: share of labels released by the unary encoding (the rest by RR).
    pub unary_share: Option<f64>,
    /// Training records (JSON `train_size`, as every command names the size of a training set).
    #[serde(rename = "train_size")]
    pub train_records: usize,
    /// Test records (JSON `test_size`).
    #[serde(rename = "test_size")]
    pub test_records: usize,
    /// Model architecture.
    pub model: String,
    /// Epochs of each training stage.
    pub epochs: f64,
    /// Learning rate of each training stage.
    pub learning_rate: f64,
    /// Decay of the parameter average that became each stage's model (`None`: the last
    /// iterate).
    pub ema: Option<f64>,
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
    /// Whether the generator was user-seeded (outputs are then not secure releases).
    pub seeded: bool,
}

/// A trained label-DP model with its report and its privacy cost.
#[derive(Debug)]
pub struct LabelDpOutcome {
    /// The final model.
    pub model: Sequential,
    /// The input transform the model expects.
    pub input: InputTransform,
    /// The report.
    pub report: LabelDpReport,
    /// The privacy cost of one record's label (ε-label-DP per record: each label is used once,
    /// the records are disjoint).
    pub event: PrivacyEvent,
}

/// Runs a label-DP experiment: privatises every training label of `train` once with
/// `cfg.mechanism`, trains `cfg.training.model` without gradient noise on the privatised
/// labels, and evaluates on `test` (true labels).
///
/// # Privacy
/// ε-label-DP per record: each record's label goes through exactly one ε-DP randomizer
/// ([`targets::laplace_one_hot`], [`targets::laplace_value`], [`targets::randomized_response`]
/// or [`RrWithPrior`]); training, evaluation and every number in the report other than
/// `noisy_label_accuracy` are post-processing of the privatised labels and the public
/// features. RR-with-prior splits the records at random (independently of the labels) into
/// stages; stage t's prior comes from the model trained on stages 1…t−1's privatised labels.
/// `noisy_label_accuracy` compares the noisy labels with the TRUE ones: it is a diagnostic for
/// the operator, not a private release. The features are not protected.
///
/// # Citations
/// K. Chaudhuri, D. Hsu, *Sample Complexity Bounds for Differentially Private Learning*, COLT
/// 2011 (label DP); B. Ghazi et al., *Deep Learning with Label Differential Privacy*, NeurIPS
/// 2021 (RR-with-prior, LP-MST).
///
/// # Errors
/// [`LabelDpError::InvalidConfig`] for a bad configuration ([`LabelDpConfig::validate`]) or a
/// test set whose classes or record shape differ; [`LabelDpError::Train`] when the trainer
/// refuses the training configuration or the data (e.g. a batch size above a stage's size).
/// All are reported before any label is privatised.
pub fn run(
    cfg: &LabelDpConfig,
    train: &Dataset,
    test: &Dataset,
    rng: &mut DpRng,
    observer: &mut dyn FnMut(LabelDpProgress),
) -> Result<LabelDpOutcome, LabelDpError> {
    let started = Instant::now();
    cfg.training.validate()?;
    cfg.training.validate_data(train, Some(test))?;
    let mut outcome = self::train(cfg, train, rng, observer)?;
    let k = train.n_classes;
    let report = &mut outcome.report;
    match cfg.task {
        Task::Classification => {
            report.test_accuracy =
                Some(evaluate(&mut outcome.model, &outcome.input, test)?.accuracy)
        }
        Task::Regression => {
            let pred = predict_values(
                &mut outcome.model,
                &outcome.input,
                test,
                (0.0, (k - 1) as f32),
            )?;
            let (mse, mae) = regression_errors(&pred, &test.y);
            (report.test_mse, report.test_mae) = (Some(mse), Some(mae));
        }
    }
    report.test_records = test.n;
    report.wall_seconds = started.elapsed().as_secs_f64();
    Ok(outcome)
}

/// The training half of [`run`], for callers who evaluate on their own (the Python
/// estimator): privatises every label of `train` once with `cfg.mechanism` and trains on the
/// privatised labels. The report's test fields are empty (`None`, `test_size` 0).
///
/// # Privacy
/// As [`run`]: ε-label-DP per record; `noisy_label_accuracy` is a diagnostic.
///
/// # Errors
/// As [`run`], without the test-set checks.
pub fn train(
    cfg: &LabelDpConfig,
    train: &Dataset,
    rng: &mut DpRng,
    observer: &mut dyn FnMut(LabelDpProgress),
) -> Result<LabelDpOutcome, LabelDpError> {
    let started = Instant::now();
    cfg.validate()?;
    cfg.training.validate()?;
    cfg.training.validate_data(train, None)?;
    let stages = cfg.effective_stages();
    if cfg.training.batch_size > train.n / stages {
        return Err(config_err(format!(
            "batch_size must be <= the records of the first stage (N/stages = {}/{stages} = {}), got {}",
            train.n,
            train.n / stages,
            cfg.training.batch_size
        )));
    }
    let k = train.n_classes;
    let mut stage_acc = Vec::new();
    let mut mean_top_k = None;
    let mut unary_share = None;
    let mut rr_keep = None;
    let (noised, model, input) = match cfg.mechanism {
        LabelMechanism::RrPrior => {
            let (noised, model, input, acc, top_k, unary) =
                rr_prior_stages(cfg, train, rng, observer)?;
            stage_acc = acc;
            mean_top_k = Some(top_k);
            unary_share = Some(unary);
            rr_keep = Some(keep_probability(cfg.epsilon, k));
            (noised, model, input)
        }
        mechanism => {
            let noised = match (cfg.task, mechanism) {
                (Task::Regression, _) => targets::laplace_value(&train.y, k, cfg.epsilon, rng)?,
                (Task::Classification, LabelMechanism::Rr) => {
                    rr_keep = Some(keep_probability(cfg.epsilon, k));
                    targets::randomized_response(&train.y, k, cfg.epsilon, rng)?
                }
                (Task::Classification, _) => {
                    let post = cfg
                        .effective_postprocess()
                        .ok_or_else(|| config_err("internal: no post-processing"))?;
                    targets::laplace_one_hot(&train.y, k, cfg.epsilon, post, rng)?
                }
            };
            let (model, input) = train_on(cfg, train, &noised.targets, rng, 1, 1, observer)?;
            stage_acc.push(noised.targets.accuracy(&train.y));
            (noised, model, input)
        }
    };

    let report = LabelDpReport {
        task: cfg.task.name().into(),
        mechanism: cfg.mechanism.name().into(),
        postprocess: cfg.effective_postprocess().map(|p| p.name().into()),
        test_accuracy: None,
        test_mse: None,
        test_mae: None,
        noisy_label_accuracy: noised.targets.accuracy(&train.y),
        epsilon: cfg.epsilon,
        guarantee: "label-dp".into(),
        noise_scale: noised.scale,
        rr_keep_probability: rr_keep,
        stages,
        stage_noisy_label_accuracy: stage_acc,
        mean_top_k,
        top_k_rule: (cfg.mechanism == LabelMechanism::RrPrior)
            .then(|| cfg.top_k_rule.unwrap_or_default().name().to_string()),
        unary_share,
        train_records: train.n,
        test_records: 0,
        model: cfg.training.model.clone(),
        epochs: cfg.training.epochs,
        learning_rate: crate::f32_json::decimal(cfg.training.lr),
        ema: cfg.training.ema.map(crate::f32_json::decimal),
        wall_seconds: started.elapsed().as_secs_f64(),
        seeded: rng.is_seeded(),
    };
    Ok(LabelDpOutcome {
        model,
        input,
        report,
        event: noised.event,
    })
}

/// e^ε/(e^ε + K − 1).
fn keep_probability(epsilon: f64, k: usize) -> f64 {
    1.0 / (1.0 + (k as f64 - 1.0) * (-epsilon).exp())
}

/// (MSE, MAE) of predictions against label values.
fn regression_errors(pred: &[f32], y: &[u32]) -> (f64, f64) {
    let n = pred.len().max(1) as f64;
    let (mut se, mut ae) = (0.0, 0.0);
    for (&p, &t) in pred.iter().zip(y) {
        let e = f64::from(p) - f64::from(t);
        se += e * e;
        ae += e.abs();
    }
    (se / n, ae / n)
}

/// Trains on `targets` (class labels through the DP-SGD trainer without privacy, other
/// targets through [`fit`]), reporting progress as stage `stage` of `stages`.
fn train_on(
    cfg: &LabelDpConfig,
    data: &Dataset,
    targets: &Targets,
    rng: &mut DpRng,
    stage: usize,
    stages: usize,
    observer: &mut dyn FnMut(LabelDpProgress),
) -> Result<(Sequential, InputTransform), LabelDpError> {
    let steps = (cfg.training.epochs * data.n as f64 / cfg.training.batch_size as f64)
        .ceil()
        .max(1.0) as u64;
    observer(LabelDpProgress::Stage {
        stage,
        stages,
        steps,
    });
    match targets {
        Targets::Classes(classes) => {
            let noisy = Dataset {
                y: classes.clone(),
                ..data.clone()
            };
            let out = dpsgd::train(&cfg.training, &noisy, None, rng, &mut |p| {
                if let Progress::Step { step, steps, .. } = p {
                    observer(LabelDpProgress::Step {
                        step: *step,
                        steps: *steps,
                    });
                }
            })?;
            Ok((out.model, out.input))
        }
        other => fit(&cfg.training, data, other, rng, &mut |step, steps| {
            observer(LabelDpProgress::Step { step, steps })
        }),
    }
}

/// LP-MST (Ghazi et al. 2021, Algorithm 3): split the records at random into `stages` equal
/// parts; stage 1 uses a uniform prior (plain RR), stage t > 1 the softmax of the model trained
/// on the privatised labels of stages 1…t−1; each stage's model is trained from scratch on all
/// labels privatised so far, with the forward-corrected loss on each label's likelihood
/// ([`Targets::Likelihood`]), so that its softmax estimates the TRUE label's posterior — the
/// prior the next stage needs (a model trained on raw RR labels would predict the noisy
/// labels' distribution, far flatter). The prior is softmax(z/T) with T =
/// `prior_temperature` (default 1). Returns the privatised labels in data order, the last model, the
/// per-stage noisy-label accuracy and the mean top-k size.
#[allow(clippy::type_complexity)]
fn rr_prior_stages(
    cfg: &LabelDpConfig,
    train: &Dataset,
    rng: &mut DpRng,
    observer: &mut dyn FnMut(LabelDpProgress),
) -> Result<(Noised, Sequential, InputTransform, Vec<f64>, f64, f64), LabelDpError> {
    let stages = cfg.effective_stages();
    let k = train.n_classes;
    let rr = RrWithPrior::new(cfg.epsilon, k)?.with_rule(cfg.top_k_rule.unwrap_or_default());
    let mut order: Vec<usize> = (0..train.n).collect();
    shuffle(&mut order, rng);
    let mut labels = vec![0u32; train.n];
    let mut seen: Vec<usize> = Vec::with_capacity(train.n);
    let mut stage_acc = Vec::with_capacity(stages);
    let (mut k_sum, mut k_count, mut unary) = (0usize, 0usize, 0usize);
    let mut last: Option<(Sequential, InputTransform)> = None;
    let uniform = vec![1.0 / k as f64; k];
    let mut channels = vec![0f32; train.n * k];
    let mut row = Vec::with_capacity(k);
    for s in 0..stages {
        let part = &order[s * train.n / stages..(s + 1) * train.n / stages];
        let subset = train.subset(part);
        let priors = match last.as_mut() {
            None => None,
            Some((m, input)) => {
                let mut logits = predict_logits(m, input, &subset)?;
                let t = cfg.prior_temperature.unwrap_or(1.0) as f32;
                logits.data_mut().iter_mut().for_each(|v| *v /= t);
                Some(softmax_rows(&logits))
            }
        };
        let mut correct = 0usize;
        for (j, &i) in part.iter().enumerate() {
            let prior = priors
                .as_ref()
                .map_or(uniform.as_slice(), |p| &p[j * k..(j + 1) * k]);
            let plan = rr.plan(prior)?;
            let noisy = rr.release(rng, train.y[i], &plan, &mut row)?;
            channels[i * k..(i + 1) * k].copy_from_slice(&row);
            labels[i] = noisy;
            correct += usize::from(noisy == train.y[i]);
            k_sum += plan.top.len();
            unary += usize::from(plan.encoding == Encoding::Unary);
            k_count += 1;
        }
        stage_acc.push(correct as f64 / part.len().max(1) as f64);
        seen.extend_from_slice(part);
        let so_far = train.subset(&seen);
        let values = seen
            .iter()
            .flat_map(|&i| channels[i * k..(i + 1) * k].iter().copied())
            .collect();
        let targets = Targets::Likelihood { k, values };
        last = Some(train_on(
            cfg,
            &so_far,
            &targets,
            rng,
            s + 1,
            stages,
            observer,
        )?);
    }
    let (model, input) = last.ok_or_else(|| config_err("internal: rr-prior ran no stage"))?;
    let noised = Noised {
        targets: Targets::Classes(labels),
        event: rr.event(),
        scale: None,
    };
    Ok((
        noised,
        model,
        input,
        stage_acc,
        k_sum as f64 / k_count.max(1) as f64,
        unary as f64 / k_count.max(1) as f64,
    ))
}

/// How a label-DP model trained for `task` on `label_values` classes reads its outputs: a
/// regression model is fitted to noisy values in the label's own units (one output unit is
/// one label value), unlike DP-SGD regression which scales its targets to [0, 1].
pub fn objective(task: Task, label_values: usize) -> Objective {
    match Objective::new(task, label_values) {
        Objective::Regression { top, .. } => Objective::Regression { top, scale: 1.0 },
        classification => classification,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpsgd::{Normalization, OptimizerKind, Privacy, TrainConfig};
    use crate::label_dp::TopKRule;
    use crate::label_dp::config::PostProcess;
    use dpml_data::{LoadOptions, Source, load};

    /// `digits` (1797 records, 10 classes), split 4:1 by index (a public rule).
    fn digits() -> (Dataset, Dataset) {
        let all = load(
            &"digits".parse::<Source>().unwrap(),
            &LoadOptions::default(),
        )
        .unwrap()
        .train;
        let (tr, te): (Vec<usize>, Vec<usize>) = (0..all.n).partition(|i| i % 5 != 0);
        (all.subset(&tr), all.subset(&te))
    }

    fn config(
        task: Task,
        mechanism: LabelMechanism,
        post: Option<PostProcess>,
        epsilon: f64,
    ) -> LabelDpConfig {
        LabelDpConfig {
            task,
            mechanism,
            postprocess: post,
            epsilon,
            stages: None,
            prior_temperature: None,
            top_k_rule: None,
            training: TrainConfig {
                model: "mlp".into(),
                hidden: vec![32],
                epochs: 15.0,
                batch_size: 64,
                lr: 0.01,
                optimizer: OptimizerKind::Adam,
                privacy: Privacy::NonPrivate,
                normalize: Normalization::PublicRange,
                ..TrainConfig::default()
            },
        }
    }

    // Chance on 10 balanced classes is 0.1. At ε = 0.01 the mechanism's own output is checked
    // first: the noisy labels agree with the truth for 1.01/10.01 ≈ 0.101 of the ~1,440
    // training records (sd ≈ 0.008), asserted < 0.14 (5 sd). A network fitted to those
    // near-random labels still picks up their slight excess of true labels, so its test
    // accuracy on 360 records wanders further from 0.1 (0.07–0.23 across seeds): "near chance"
    // for it is < 0.3. "Well above chance" is > 0.8 (non-private MLPs reach ≈ 0.95 here).
    #[test]
    fn classification_is_good_at_large_epsilon_and_chance_at_tiny_epsilon() {
        let (train, test) = digits();
        let cases = [
            (LabelMechanism::Laplace, Some(PostProcess::ClampRound), None),
            (LabelMechanism::Laplace, Some(PostProcess::Argmax), None),
            (LabelMechanism::Laplace, Some(PostProcess::Soft), None),
            (LabelMechanism::Rr, None, None),
            (LabelMechanism::RrPrior, None, None),
            (LabelMechanism::RrPrior, None, Some(TopKRule::Information)),
        ];
        for (seed, (mech, post, rule)) in cases.into_iter().enumerate() {
            let mut rng = DpRng::seeded(seed as u64);
            let with_rule = |epsilon| LabelDpConfig {
                top_k_rule: rule,
                ..config(Task::Classification, mech, post, epsilon)
            };
            let hi = run(&with_rule(50.0), &train, &test, &mut rng, &mut |_| {}).unwrap();
            let acc = hi.report.test_accuracy.unwrap();
            assert!(acc > 0.8, "{mech:?} {post:?} at eps 50: {acc}");
            assert!(hi.report.noisy_label_accuracy > 0.95, "{:?}", hi.report);
            let lo = run(&with_rule(0.01), &train, &test, &mut rng, &mut |_| {}).unwrap();
            let noisy = lo.report.noisy_label_accuracy;
            assert!(
                noisy < 0.14,
                "{mech:?} {post:?} noisy labels at eps 0.01: {noisy}"
            );
            let acc = lo.report.test_accuracy.unwrap();
            assert!(acc < 0.3, "{mech:?} {post:?} at eps 0.01: {acc}");
            assert_eq!(
                (
                    lo.report.guarantee.as_str(),
                    lo.report.epsilon,
                    lo.report.seeded
                ),
                ("label-dp", 0.01, true)
            );
        }
    }

    #[test]
    fn regression_mse_shrinks_with_epsilon() {
        // The true label value is 0…9; a predictor that ignores the features does no better
        // than the variance of the labels (≈ 8.25 for uniform digits), the non-private MLP
        // reaches an MSE near 1. Asserted: < 3 at ε = 50, > 5 at ε = 0.01.
        let (train, test) = digits();
        let mut rng = DpRng::seeded(21);
        let mut cfg = config(Task::Regression, LabelMechanism::Laplace, None, 50.0);
        cfg.training.epochs = 60.0;
        let hi = run(&cfg, &train, &test, &mut rng, &mut |_| {})
            .unwrap()
            .report;
        assert!(
            hi.test_mse.unwrap() < 3.0 && hi.test_mae.unwrap() < 1.5,
            "{hi:?}"
        );
        assert!((hi.noise_scale.unwrap() - 9.0 / 50.0).abs() < 1e-4);
        cfg.epsilon = 0.01;
        let lo = run(&cfg, &train, &test, &mut rng, &mut |_| {})
            .unwrap()
            .report;
        assert!(lo.test_mse.unwrap() > 5.0, "{lo:?}");
        assert!(lo.test_accuracy.is_none());
    }

    #[test]
    fn rr_prior_stages_improve_the_labels_and_report_them() {
        // The expected-accuracy rule maximises the share of correct released labels; the
        // information rule trades some of it for informative releases on uncertain records.
        for (rule, gain) in [
            (TopKRule::ExpectedAccuracy, 0.2),
            (TopKRule::Information, 0.12),
        ] {
            let (train, test) = digits();
            let mut cfg = config(Task::Classification, LabelMechanism::RrPrior, None, 1.0);
            cfg.stages = Some(3);
            cfg.top_k_rule = Some(rule);
            let mut stages_seen = Vec::new();
            let out = run(&cfg, &train, &test, &mut DpRng::seeded(5), &mut |p| {
                if let LabelDpProgress::Stage { stage, .. } = p {
                    stages_seen.push(stage);
                }
            })
            .unwrap();
            let r = out.report;
            assert_eq!(stages_seen, vec![1, 2, 3]);
            assert_eq!(r.stage_noisy_label_accuracy.len(), 3);
            // Stage 1 is plain RR: p = e/(e + 9) ≈ 0.23 (479 records: sd ≈ 0.02); later stages
            // use the prior and must do much better.
            let p = keep_probability(1.0, 10);
            assert!((r.stage_noisy_label_accuracy[0] - p).abs() < 0.1, "{r:?}");
            assert!(r.stage_noisy_label_accuracy[2] > p + gain, "{rule:?} {r:?}");
            assert!(r.mean_top_k.unwrap() < 10.0);
            // Binary RR at ε: it dominates every plan (see `RrWithPrior::event`).
            assert_eq!(
                out.event,
                PrivacyEvent::RandomizedResponse {
                    epsilon: 1.0,
                    categories: 2
                }
            );
        }
    }

    #[test]
    fn bad_combinations_fail_before_any_label_is_touched() {
        let (train, test) = digits();
        let mut cfg = config(Task::Regression, LabelMechanism::Rr, None, 1.0);
        let err = run(&cfg, &train, &test, &mut DpRng::seeded(1), &mut |_| {}).unwrap_err();
        assert!(
            err.to_string()
                .contains("regression needs mechanism laplace"),
            "{err}"
        );
        cfg = config(Task::Classification, LabelMechanism::RrPrior, None, 1.0);
        cfg.stages = Some(10);
        cfg.training.batch_size = 500;
        let err = run(&cfg, &train, &test, &mut DpRng::seeded(1), &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("got 500"), "{err}");
    }

    #[test]
    fn regression_errors_are_computed_right() {
        let (mse, mae) = regression_errors(&[1.0, 3.0, 9.0], &[2, 3, 7]);
        assert!((mse - 5.0 / 3.0).abs() < 1e-12 && (mae - 1.0).abs() < 1e-12);
    }
}
