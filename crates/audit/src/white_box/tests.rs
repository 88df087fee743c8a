use dpml_accounting::gdp::epsilon_for_delta;
use dpml_learn::dpsgd::{Privacy, StepContext, StepHook, TrainConfig};
use dpml_mechanisms::DpRng;
use dpml_nn::Sequential;

use super::*;

/// One standard normal draw (Box–Muller).
fn normal(rng: &mut DpRng) -> f64 {
    let u = 1.0 - rng.uniform_f64();
    let v = rng.uniform_f64();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// The Gaussian mechanism with known μ on m canaries: score = μ·1[in] + N(0, 1).
fn gaussian_canaries(m: usize, mu: f64, rng: &mut DpRng) -> (Vec<f64>, Vec<bool>) {
    let included: Vec<bool> = (0..m).map(|_| rng.below(2) == 1).collect();
    let scores = included
        .iter()
        .map(|&b| if b { mu } else { 0.0 } + normal(rng))
        .collect();
    (scores, included)
}

#[test]
fn synthetic_gaussian_mechanism_is_recovered_and_never_overstated() {
    let delta = 1e-5;
    let mut covered = 0;
    let mut total = 0;
    for &mu in &[0.5, 1.5] {
        let true_eps = epsilon_for_delta(mu, delta).unwrap();
        for seed in 0..5 {
            let mut rng = DpRng::seeded(100 + seed);
            let (scores, included) = gaussian_canaries(1000, mu, &mut rng);
            let a = audit_scores(&scores, &included, delta, 0.95).unwrap();
            let [lo, hi] = a.gdp_estimate.mu_interval;
            covered += usize::from(lo <= mu && mu <= hi);
            total += 1;
            // The estimate is close: its interval is about ±0.13 wide at m = 1000.
            assert!((a.gdp_estimate.mu_estimate - mu).abs() < 0.25, "{a:?}");
            // Every bound stays below the truth.
            assert!(a.one_run.epsilon <= true_eps, "{mu}: {:?}", a.one_run);
            assert!(a.one_run.epsilon <= a.one_run_ceiling);
            assert!(a.one_run_gdp.mu_lower_bound <= mu, "{:?}", a.one_run_gdp);
            assert!(
                a.gdp_threshold_bound.mu_lower_bound <= mu,
                "{:?}",
                a.gdp_threshold_bound
            );
        }
    }
    // 95% intervals: 10 draws, expected 9.5 covered; 7 or fewer has probability < 1.2%.
    assert!(covered >= 8, "{covered} of {total} intervals covered mu");
}

/// Subsampled Gaussian mechanism on m canaries: T steps, each observation
/// x_t = 1[in and sampled with probability q] + N(0, σ²), scored by `score` (as
/// [`DiracCanaries`] scores the noisy updates of DP-SGD, without training).
fn poisson_canaries(
    m: usize,
    (q, sigma, steps): (f64, f64, u64),
    score: CanaryScore,
    rng: &mut DpRng,
) -> (Vec<f64>, Vec<bool>) {
    let included: Vec<bool> = (0..m).map(|_| rng.below(2) == 1).collect();
    let scores = included
        .iter()
        .map(|&inc| {
            (0..steps)
                .map(|_| {
                    let hit = inc && rng.uniform_f64() < q;
                    let x = f64::from(u8::from(hit)) + sigma * normal(rng);
                    match score {
                        CanaryScore::LikelihoodRatio => lr_score::step_log_ratio(x, q, sigma),
                        CanaryScore::Sum => x,
                    }
                })
                .sum()
        })
        .collect();
    (scores, included)
}

#[test]
fn subsampled_gaussian_mechanism_is_recovered_by_the_likelihood_ratio_score() {
    use dpml_accounting::gdp::mu_poisson;
    use dpml_accounting::{Accountant, PldAccountant, PrivacyEvent};
    // q = 0.02, σ = 1, T = 1455: CLT μ = q√(T(e − 1)) ≈ 1.0, where the CLT is accurate
    // (small q, many steps); the sum score would show only q√T/σ ≈ 0.76.
    let (q, sigma, steps) = (0.02, 1.0, 1455);
    let delta = 1e-5;
    let mu = mu_poisson(q, sigma, steps).unwrap();
    let true_eps = PldAccountant::default()
        .epsilon(&PrivacyEvent::dp_sgd(sigma, q, steps), delta)
        .unwrap();
    let mut covered = 0;
    for seed in 0..4 {
        let mut rng = DpRng::seeded(300 + seed);
        let (scores, included) = poisson_canaries(
            1000,
            (q, sigma, steps),
            CanaryScore::LikelihoodRatio,
            &mut rng,
        );
        let a = audit_scores(&scores, &included, delta, 0.95).unwrap();
        let [lo, hi] = a.gdp_estimate.mu_interval;
        covered += usize::from(lo <= mu && mu <= hi);
        assert!(
            (a.gdp_estimate.mu_estimate - mu).abs() < 0.25,
            "{mu}: {a:?}"
        );
        assert!(a.one_run.epsilon <= true_eps, "{true_eps}: {:?}", a.one_run);
        assert!(a.one_run.epsilon <= a.one_run_ceiling);
    }
    // 95% intervals: 2 or fewer of 4 covered has probability about 1.4%.
    assert!(covered >= 3, "{covered} of 4 intervals covered mu = {mu}");
    // The plain sum sees less: its estimate sits near q√T/σ, well below μ.
    let mut rng = DpRng::seeded(300);
    let (scores, included) = poisson_canaries(1000, (q, sigma, steps), CanaryScore::Sum, &mut rng);
    let a = audit_scores(&scores, &included, delta, 0.95).unwrap();
    let mu_sum = q * (steps as f64).sqrt() / sigma;
    assert!(
        (a.gdp_estimate.mu_estimate - mu_sum).abs() < 0.15,
        "{mu_sum}: {a:?}"
    );
}

#[test]
fn strong_signal_gives_positive_bounds() {
    let mut rng = DpRng::seeded(7);
    let (scores, included) = gaussian_canaries(1000, 3.0, &mut rng);
    let a = audit_scores(&scores, &included, 1e-5, 0.95).unwrap();
    assert!(a.one_run.epsilon > 0.5, "{:?}", a.one_run);
    assert!(
        a.gdp_threshold_bound.mu_lower_bound > 2.0,
        "{:?}",
        a.gdp_threshold_bound
    );
    assert!(a.one_run_gdp.mu_lower_bound > 0.5, "{:?}", a.one_run_gdp);
}

/// A synthetic classification set: n records, 4 features, 3 classes.
fn tiny_data(n: usize) -> Dataset {
    Dataset {
        name: "tiny".into(),
        x: (0..n * 4).map(|i| ((i * 7) % 11) as f32 / 11.0).collect(),
        n,
        record_shape: vec![4],
        y: (0..n).map(|i| (i % 3) as u32).collect(),
        n_classes: 3,
        feature_names: (0..4).map(|i| format!("f{i}")).collect(),
        class_names: (0..3).map(|i| format!("c{i}")).collect(),
        feature_range: None,
    }
}

/// Full batches (q = 1), T = 4 steps, σ = 2: exactly the Gaussian mechanism with
/// μ = √T/σ = 1, ε ≈ 4.4 at δ = 1e-5.
fn full_batch_config(n: usize, canaries: usize) -> GradientCanaryConfig {
    GradientCanaryConfig {
        recipe: TrainConfig {
            model: "mlp".into(),
            hidden: vec![256],
            epochs: 4.0,
            batch_size: n,
            lr: 0.05,
            privacy: Privacy::NoiseMultiplier(2.0),
            ..TrainConfig::default()
        },
        canaries,
        confidence: 0.95,
        score: CanaryScore::default(),
    }
}

/// The broken trainer of the test: halves the noise the trainer added (whatever it was).
struct HalvedNoise<'a> {
    inner: &'a mut DiracCanaries,
    clean: Vec<Vec<f32>>,
}

impl StepHook for HalvedNoise<'_> {
    fn before_noise(&mut self, ctx: &StepContext, model: &mut Sequential, rng: &mut DpRng) {
        self.inner.before_noise(ctx, model, rng);
        self.clean = model.params().iter().map(|p| p.grad.clone()).collect();
    }

    fn after_noise(&mut self, ctx: &StepContext, model: &mut Sequential) {
        for (p, clean) in model.params_mut().into_iter().zip(&self.clean) {
            for (g, c) in p.grad.iter_mut().zip(clean) {
                *g = c + (*g - c) * 0.5;
            }
        }
        self.inner.after_noise(ctx, model);
    }
}

fn audit_trainer(broken: bool, seed: u64) -> GradientCanaryReport {
    let data = tiny_data(1200);
    let cfg = full_batch_config(data.n, 1000);
    let mut rng = DpRng::seeded(seed);
    let mut canaries = plan(&cfg, &data, &mut rng).unwrap();
    let outcome = if broken {
        let mut hook = HalvedNoise {
            inner: &mut canaries,
            clean: Vec::new(),
        };
        train_with(&cfg, &data, None, &mut rng, &mut |_| {}, &mut hook).unwrap()
    } else {
        train_with(&cfg, &data, None, &mut rng, &mut |_| {}, &mut canaries).unwrap()
    };
    assert_eq!(canaries.steps(), 4);
    finish(&cfg, &data, &canaries, &outcome).unwrap()
}

#[test]
fn correct_trainer_passes_and_half_noise_trainer_is_caught() {
    let good = audit_trainer(false, 11);
    let eps = good.accountant.epsilon;
    assert!(
        (good.accountant.mu_clt - 1.0).abs() < 1e-9,
        "{:?}",
        good.accountant
    );
    assert!(good.consistent, "{good:?}");
    // Full batches are exactly GDP, so the GDP bounds read as ε bounds here.
    assert!(
        good.audit.gdp_threshold_bound.epsilon_if_gaussian <= eps,
        "{good:?}"
    );
    assert!(
        good.audit.one_run_gdp.epsilon_if_gaussian <= eps,
        "{good:?}"
    );
    // The estimate sits near the true μ = 1.
    assert!(
        (good.audit.gdp_estimate.mu_estimate - 1.0).abs() < 0.2,
        "{good:?}"
    );

    let bad = audit_trainer(true, 11);
    assert_eq!(
        bad.accountant.epsilon, eps,
        "the accountant cannot see the bug"
    );
    // True μ = 2: the audited lower bound exceeds the accountant's claim.
    assert!(
        bad.audit.gdp_threshold_bound.epsilon_if_gaussian > eps,
        "{:?} vs {eps}",
        bad.audit.gdp_threshold_bound
    );
    assert!(
        (bad.audit.gdp_estimate.mu_estimate - 2.0).abs() < 0.3,
        "{bad:?}"
    );
}

#[test]
fn bad_settings_are_named() {
    let data = tiny_data(100);
    let mut rng = DpRng::seeded(1);
    let err = |cfg: GradientCanaryConfig| plan(&cfg, &data, &mut DpRng::seeded(1)).unwrap_err();
    let e = err(full_batch_config(100, 0)).to_string();
    assert!(
        e.contains("canaries must be at least 4") && e.contains("got 0"),
        "{e}"
    );
    let e = err(full_batch_config(100, 101)).to_string();
    assert!(
        e.contains("at most the training records (100), got 101"),
        "{e}"
    );
    let mut small = full_batch_config(100, 50);
    small.recipe.model = "logreg".into();
    small.recipe.hidden.clear();
    let e = err(small).to_string();
    assert!(e.contains("at most the model's parameters (15"), "{e}");
    let mut open = full_batch_config(100, 50);
    open.recipe.privacy = Privacy::NonPrivate;
    assert!(err(open).to_string().contains("--epsilon"));
    assert!(plan(&full_batch_config(100, 50), &data, &mut rng).is_ok());
}
