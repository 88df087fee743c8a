//! Tests of the GDP conversions and the CLT accountant.

use super::*;

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

/// Issue 3's table: (q, σ, T, GDP-CLT ε at δ = 1e-5, μ).
const REFERENCE: [(f64, f64, u64, f64, f64); 4] = [
    (256.0 / 60000.0, 1.1, 14063, 2.324, 0.5736),
    (256.0 / 60000.0, 1.3, 3516, 0.835, 0.2273),
    (256.0 / 60000.0, 0.7, 10547, 5.066, 1.1339),
    (0.004, 1.3, 3750, 0.805, 0.2201),
];

#[test]
fn clt_reference_values() {
    for &(q, sigma, steps, eps, mu) in &REFERENCE {
        let event = PrivacyEvent::dp_sgd(sigma, q, steps);
        let got_mu = GdpAccountant.mu(&event).unwrap();
        assert!(
            (got_mu - mu).abs() < 1e-4,
            "μ for σ={sigma}: {got_mu} vs {mu}"
        );
        assert!((mu_poisson(q, sigma, steps).unwrap() - got_mu).abs() < 1e-12);
        let got = GdpAccountant.epsilon(&event, 1e-5).unwrap();
        assert!((got - eps).abs() < 2e-3, "ε for σ={sigma}: {got} vs {eps}");
    }
}

#[test]
fn full_batch_steps_are_exact_gaussian_composition() {
    // q = 1: T Gaussian mechanisms compose to exactly √T/σ-GDP; the CLT formula would give
    // √(T(e^{1/σ²} − 1)) (2.06 instead of 1.83 at σ = 1.1, T = 4).
    for (sigma, steps) in [(1.1, 4u64), (0.5, 100), (20.0, 1)] {
        let exact = (steps as f64).sqrt() / sigma;
        let event = PrivacyEvent::dp_sgd(sigma, 1.0, steps);
        assert!(rel(GdpAccountant.mu(&event).unwrap(), exact) < 1e-14);
        assert!(rel(mu_poisson(1.0, sigma, steps).unwrap(), exact) < 1e-14);
        let plain = PrivacyEvent::Gaussian {
            noise_multiplier: sigma,
        }
        .repeated(steps);
        assert_eq!(
            GdpAccountant.epsilon(&event, 1e-5).unwrap(),
            GdpAccountant.epsilon(&plain, 1e-5).unwrap()
        );
    }
    // Below q = 1 the CLT formula is unchanged.
    let clt = 0.999 * (4.0 * (1.0 / 1.21f64).exp_m1()).sqrt();
    assert!(rel(mu_poisson(0.999, 1.1, 4).unwrap(), clt) < 1e-14);
}

#[test]
fn gdp_paper_values() {
    // Bu et al. 2020, MNIST: 20 and 70 epochs of batch 256 out of 60000.
    for &(sigma, steps, mu, eps) in &[(1.06, 4688, 0.350, 1.341), (0.638, 16407, 1.785, 8.697)] {
        let got_mu = mu_poisson(256.0 / 60000.0, sigma, steps).unwrap();
        assert!((got_mu - mu).abs() < 1e-3, "{got_mu} vs {mu}");
        let got = epsilon_for_delta(got_mu, 1e-5).unwrap();
        assert!((got - eps).abs() < 2e-3, "{got} vs {eps}");
    }
}

#[test]
fn delta_for_epsilon_matches_high_precision_values() {
    // Computed with mpmath at 50 digits from the same formula.
    for &(mu, eps, expected) in &[
        (1.0, 1.0, 0.126_936_737_506_643_94),
        (0.5, 6.0, 1.422_228_043_493_378_3e-33),
        (10.0, 100.0, 1.879_717_002_051_915_7e-7),
        (3.0, 40.0, 2.628_095_990_030_669_6e-33),
        (0.001, 0.0, 3.989_422_637_788_383e-4),
    ] {
        let got = delta_for_epsilon(mu, eps).unwrap();
        assert!(
            rel(got, expected) < 1e-9,
            "μ={mu} ε={eps}: {got} vs {expected}"
        );
    }
    assert_eq!(delta_for_epsilon(0.0, 1.0).unwrap(), 0.0);
    assert_eq!(delta_for_epsilon(f64::INFINITY, 1.0).unwrap(), 1.0);
    // Far tail: underflows to 0 cleanly instead of NaN or a negative value.
    assert_eq!(delta_for_epsilon(0.5, 500.0).unwrap(), 0.0);
}

#[test]
fn epsilon_for_delta_is_a_safe_inverse_over_a_wide_range() {
    for &mu in &[1e-3, 0.05, 0.35, 1.0, 5.0, 20.0, 60.0] {
        for &delta in &[1e-12, 1e-5, 0.01, 0.3] {
            let eps = epsilon_for_delta(mu, delta).unwrap();
            assert!(eps.is_finite());
            let d = delta_for_epsilon(mu, eps).unwrap();
            assert!(d <= delta, "μ={mu} δ={delta}: δ(ε) = {d}");
            if eps > 0.0 {
                let below = delta_for_epsilon(mu, eps * (1.0 - 1e-9)).unwrap();
                assert!(below > delta, "μ={mu} δ={delta}: ε not minimal");
            }
        }
    }
    assert_eq!(
        epsilon_for_delta(f64::INFINITY, 1e-5).unwrap(),
        f64::INFINITY
    );
    assert_eq!(epsilon_for_delta(0.0, 1e-5).unwrap(), 0.0);
    // A subnormal δ: 1/δ overflows, but ε is finite and on the safe side.
    for &mu in &[0.131, 1.0] {
        let eps = epsilon_for_delta(mu, 1e-320).unwrap();
        assert!(eps.is_finite() && eps > epsilon_for_delta(mu, 1e-300).unwrap());
        assert!(delta_for_epsilon(mu, eps).unwrap() <= 1e-320);
    }
}

#[test]
fn mu_for_inverts_the_conversion() {
    for &(eps, delta) in &[
        (0.0, 1e-3),
        (0.5, 1e-5),
        (1.341, 1e-5),
        (8.0, 1e-10),
        (60.0, 1e-5),
    ] {
        let mu = mu_for(eps, delta).unwrap();
        let d = delta_for_epsilon(mu, eps).unwrap();
        assert!(
            d <= delta && rel(d, delta) < 1e-9,
            "ε={eps} δ={delta}: μ={mu}, δ={d}"
        );
    }
    // Round trip with the GDP paper: μ = 0.35 gives ε ≈ 1.341 at δ = 1e-5.
    let mu = mu_for(epsilon_for_delta(0.35, 1e-5).unwrap(), 1e-5).unwrap();
    assert!((mu - 0.35).abs() < 1e-9, "{mu}");
}

#[test]
fn mu_uniform_matches_high_precision_values() {
    // mpmath, 50 digits, of √2·q·√(T(e^{1/σ²}Φ(1.5/σ) + 3Φ(−0.5/σ) − 2)).
    let got = mu_uniform(256.0 / 60000.0, 1.1, 14063).unwrap();
    assert!(rel(got, 0.737_414_471_702_435_1) < 1e-12, "{got}");
    let got = mu_uniform(0.01, 30.0, 100).unwrap();
    assert!(rel(got, 0.003_378_301_675_022_994_3) < 1e-10, "{got}");
    // σ = 1000: the naive formula loses ~6 digits to cancellation; ours keeps ~1e-9.
    let got = mu_uniform(0.01, 1000.0, 100).unwrap();
    assert!(rel(got, 1.000_399_112_784_580_7e-4) < 1e-7, "{got}");
}

#[test]
fn accountant_composes_mu_squared_and_refuses_other_events() {
    let g = PrivacyEvent::Gaussian {
        noise_multiplier: 2.0,
    };
    assert!((GdpAccountant.mu(&g).unwrap() - 0.5).abs() < 1e-15);
    let three = PrivacyEvent::Composed {
        events: vec![g.clone(), g.clone().repeated(3)],
    };
    assert!((GdpAccountant.mu(&three).unwrap() - 1.0).abs() < 1e-15);
    let sgd = PrivacyEvent::dp_sgd(1.1, 0.01, 100);
    let both = PrivacyEvent::Composed {
        events: vec![sgd.clone(), g.clone()],
    };
    let expected = (GdpAccountant.mu(&sgd).unwrap().powi(2) + 0.25).sqrt();
    assert!((GdpAccountant.mu(&both).unwrap() - expected).abs() < 1e-15);
    let lap = PrivacyEvent::Laplace {
        noise_multiplier: 1.0,
    };
    match GdpAccountant.epsilon(&lap, 1e-5) {
        Err(AccountingError::Unsupported(m)) => assert!(m.contains("laplace"), "{m}"),
        other => panic!("{other:?}"),
    }
    let sampled_lap = lap.poisson_sampled(0.1);
    match GdpAccountant.mu(&sampled_lap) {
        Err(AccountingError::Unsupported(m)) => assert!(m.contains("poisson_sampled(laplace)")),
        other => panic!("{other:?}"),
    }
    assert_eq!(GdpAccountant.bound(), BoundKind::Approximation);
    assert_eq!(GdpAccountant.name(), "gdp");
    let d = GdpAccountant.delta(&g, 1.0).unwrap();
    assert!((d - delta_for_epsilon(0.5, 1.0).unwrap()).abs() < 1e-18);
}

#[test]
fn bad_input_is_rejected_with_the_value_named() {
    let msg = |r: Result<f64, AccountingError>| match r {
        Err(AccountingError::InvalidParameter(m)) => m,
        other => panic!("expected InvalidParameter, got {other:?}"),
    };
    assert!(msg(mu_poisson(0.0, 1.0, 10)).contains("sampling_rate must be in (0, 1], got 0"));
    assert!(msg(mu_poisson(0.1, -1.0, 10)).contains("got -1"));
    assert!(msg(mu_uniform(0.1, 1.0, 0)).contains("steps must be >= 1, got 0"));
    assert!(msg(delta_for_epsilon(f64::NAN, 1.0)).contains("mu"));
    assert!(msg(delta_for_epsilon(1.0, -1.0)).contains("epsilon"));
    assert!(msg(epsilon_for_delta(1.0, 0.0)).contains("delta must be in (0, 1), got 0"));
    assert!(msg(mu_for(1.0, 1.0)).contains("got 1"));
    assert!(msg(mu_for(f64::NAN, 0.1)).contains("NaN"));
    assert!(msg(GdpAccountant.epsilon(&PrivacyEvent::dp_sgd(1.0, 2.0, 5), 1e-5)).contains("got 2"));
}

#[test]
fn a_tiny_rate_with_a_tiny_sigma_is_no_nan() {
    // q² underflows to 0 and e^{1/σ²} overflows to ∞: μ² must come from their logs.
    assert_eq!(mu_poisson(1e-300, 1e-3, 1).unwrap(), f64::INFINITY);
    let sigma = (1.0f64 / 750.0).sqrt(); // e^750 overflows, q² = 1e-400 underflows
    let mu = mu_poisson(1e-200, sigma, 1).unwrap();
    let expected = ((2.0 * 1e-200f64.ln() + 750.0) / 2.0).exp();
    assert!(
        (mu / expected - 1.0).abs() < 1e-9,
        "{mu} against {expected}"
    );
}
