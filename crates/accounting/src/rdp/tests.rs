//! Tests of the RDP accountant against published reference values and its own invariants.

use super::*;

fn acc(conversion: Conversion) -> RdpAccountant {
    RdpAccountant::new(conversion)
}

fn invalid(result: Result<impl std::fmt::Debug, AccountingError>) -> String {
    match result {
        Err(AccountingError::InvalidParameter(m)) => m,
        other => panic!("expected InvalidParameter, got {other:?}"),
    }
}

/// Issue 3's table (Google dp_accounting, δ = 1e-5, default orders):
/// (q, σ, T, classic ε, classic α, current ε, current α).
const REFERENCE: [(f64, f64, u64, f64, f64, f64, f64); 4] = [
    (256.0 / 60000.0, 1.1, 14063, 3.008, 8.8, 2.597, 8.1),
    (256.0 / 60000.0, 1.3, 3516, 1.192, 17.0, 0.955, 17.0),
    (256.0 / 60000.0, 0.7, 10547, 7.102, 3.9, 6.320, 3.8),
    (0.004, 1.3, 3750, 1.160, 17.0, 0.922, 17.0),
];

#[test]
fn default_orders_are_the_issue_grid() {
    let orders = default_orders();
    assert_eq!(orders.len(), 99 + 53 + 4);
    assert_eq!(orders[0], 1.1);
    assert_eq!(orders[98], 10.9);
    assert_eq!(orders[99], 11.0);
    assert_eq!(orders[151], 63.0);
    assert_eq!(&orders[152..], &[128.0, 256.0, 512.0, 1024.0]);
    assert!(orders.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn dp_sgd_reference_values_both_conversions() {
    for &(q, sigma, steps, classic, classic_order, current, current_order) in &REFERENCE {
        let event = PrivacyEvent::dp_sgd(sigma, q, steps);
        let (eps, order) = acc(Conversion::Classic)
            .epsilon_and_order(&event, 1e-5)
            .unwrap();
        assert!(
            (eps - classic).abs() < 2e-3,
            "classic q={q} σ={sigma}: {eps} vs {classic}"
        );
        assert_eq!(order, classic_order, "classic order q={q} σ={sigma}");
        let (eps, order) = acc(Conversion::Current)
            .epsilon_and_order(&event, 1e-5)
            .unwrap();
        assert!(
            (eps - current).abs() < 2e-3,
            "current q={q} σ={sigma}: {eps} vs {current}"
        );
        assert_eq!(order, current_order, "current order q={q} σ={sigma}");
    }
}

#[test]
fn single_gaussian_sigma_two() {
    let event = PrivacyEvent::Gaussian {
        noise_multiplier: 2.0,
    };
    let eps = acc(Conversion::Current).epsilon(&event, 1e-5).unwrap();
    assert!((eps - 2.1657).abs() < 2e-3, "{eps}");
}

#[test]
fn rdp_scales_with_steps_and_adds_under_composition() {
    let a = acc(Conversion::Current);
    let step = PrivacyEvent::Gaussian {
        noise_multiplier: 1.1,
    }
    .poisson_sampled(0.01);
    let one = a.rdp(&step).unwrap();
    assert_eq!(one.len(), a.orders.len());
    let many = a.rdp(&step.clone().repeated(100_000)).unwrap();
    for (x, y) in one.iter().zip(&many) {
        assert!((x * 1e5 - y).abs() <= 1e-12 * y.abs());
    }
    let lap = PrivacyEvent::Laplace {
        noise_multiplier: 3.0,
    };
    let both = PrivacyEvent::Composed {
        events: vec![step.clone(), lap.clone(), step.clone()],
    };
    let sum = a.rdp(&both).unwrap();
    let lap_rdp = a.rdp(&lap).unwrap();
    for i in 0..sum.len() {
        assert!((sum[i] - (2.0 * one[i] + lap_rdp[i])).abs() < 1e-12);
    }
    // The empty composition costs nothing.
    let none = PrivacyEvent::Composed { events: vec![] };
    assert_eq!(a.epsilon(&none, 1e-5).unwrap(), 0.0);
}

#[test]
fn gaussian_compositions_inside_poisson_sampling_act_as_one_gaussian() {
    let a = acc(Conversion::Current);
    // Two Gaussians with σ = 2 on the same subsample = one Gaussian with σ = √2.
    let pair = PrivacyEvent::Composed {
        events: vec![
            PrivacyEvent::Gaussian {
                noise_multiplier: 2.0
            };
            2
        ],
    }
    .poisson_sampled(0.05);
    let single = PrivacyEvent::Gaussian {
        noise_multiplier: 2f64.sqrt(),
    }
    .poisson_sampled(0.05);
    let (x, y) = (a.rdp(&pair).unwrap(), a.rdp(&single).unwrap());
    for (u, v) in x.iter().zip(&y) {
        assert!((u - v).abs() <= 1e-12 * v.max(1e-300));
    }
    // Poisson sampling nested in Poisson sampling multiplies the rates.
    let nested = PrivacyEvent::Gaussian {
        noise_multiplier: 1.0,
    }
    .poisson_sampled(0.5)
    .poisson_sampled(0.2);
    let flat = PrivacyEvent::Gaussian {
        noise_multiplier: 1.0,
    }
    .poisson_sampled(0.1);
    assert_eq!(a.rdp(&nested).unwrap(), a.rdp(&flat).unwrap());
}

#[test]
fn epsilon_decreases_with_noise_and_delta_inverts_epsilon() {
    let a = acc(Conversion::Current);
    let mut prev = f64::INFINITY;
    for k in 5..30 {
        let sigma = f64::from(k) / 10.0;
        let eps = a
            .epsilon(&PrivacyEvent::dp_sgd(sigma, 0.01, 1000), 1e-5)
            .unwrap();
        assert!(eps < prev, "ε not decreasing at σ = {sigma}");
        prev = eps;
    }
    let event = PrivacyEvent::dp_sgd(1.0, 0.01, 1000);
    for conversion in [Conversion::Current, Conversion::Classic] {
        let a = acc(conversion);
        let eps = a.epsilon(&event, 1e-5).unwrap();
        let delta = a.delta(&event, eps).unwrap();
        assert!(
            delta <= 1e-5 * (1.0 + 1e-9) && delta > 1e-7,
            "{conversion:?}: {delta}"
        );
    }
}

#[test]
fn laplace_and_pure_events_never_do_worse_than_their_pure_epsilon() {
    let a = acc(Conversion::Current);
    // A single Laplace(b = 2) release is exactly 0.5-DP; the accountant reports 0.5.
    let lap = PrivacyEvent::Laplace {
        noise_multiplier: 2.0,
    };
    assert!((a.epsilon(&lap, 1e-5).unwrap() - 0.5).abs() < 1e-12);
    // Many releases: RDP beats the advanced composition theorem (Dwork, Rothblum, Vadhan
    // 2010; Kairouz et al. 2015 form) ε′ = √(2k ln(1/δ))ε + kε(e^ε − 1), itself below kε.
    let k = 400.0;
    let many = lap.repeated(400);
    let eps = a.epsilon(&many, 1e-5).unwrap();
    let advanced = (2.0 * k * 1e5_f64.ln()).sqrt() * 0.5 + k * 0.5 * 0.5_f64.exp_m1();
    assert!(eps < advanced && advanced < k * 0.5, "{eps} vs {advanced}");
    // Fair-coin randomized response is ln 3-DP.
    let rr = PrivacyEvent::RandomizedResponse {
        epsilon: 3f64.ln(),
        categories: 2,
    };
    assert!((a.epsilon(&rr, 1e-6).unwrap() - 3f64.ln()).abs() < 1e-12);
    let pure = PrivacyEvent::EpsilonDelta {
        epsilon: 1.0,
        delta: 0.0,
    };
    assert!((a.epsilon(&pure, 1e-6).unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(a.delta(&pure, 1.0).unwrap(), 0.0);
    let dl = PrivacyEvent::DiscreteLaplace {
        scale: 4.0,
        sensitivity: 2,
    };
    assert!((a.epsilon(&dl, 1e-6).unwrap() - 0.5).abs() < 1e-12);
}

#[test]
fn approximate_events_use_basic_composition() {
    let a = acc(Conversion::Current);
    let sgd = PrivacyEvent::dp_sgd(1.1, 0.01, 500);
    let approx = PrivacyEvent::EpsilonDelta {
        epsilon: 0.3,
        delta: 2e-6,
    };
    let mixed = PrivacyEvent::Composed {
        events: vec![sgd.clone(), approx.clone().repeated(2)],
    };
    let eps = a.epsilon(&mixed, 1e-5).unwrap();
    let expected = a.epsilon(&sgd, 1e-5 - 4e-6).unwrap() + 0.6;
    assert!((eps - expected).abs() < 1e-12, "{eps} vs {expected}");
    let msg = invalid(a.epsilon(&mixed, 4e-6));
    assert!(msg.contains("4e-6") || msg.contains("0.000004"), "{msg}");
    assert!(matches!(
        a.rdp(&mixed),
        Err(AccountingError::Unsupported(_))
    ));
    // δ(ε) = δ_rdp(ε − 0.6) + 4e-6, and 1 when ε < 0.6.
    assert_eq!(a.delta(&mixed, 0.5).unwrap(), 1.0);
    let d = a.delta(&mixed, eps).unwrap();
    assert!(d <= 1e-5 * (1.0 + 1e-9) && d > 4e-6, "{d}");
    // Only approximate events: ε = Σε, with δ ≥ Σδ allowed.
    assert!((a.epsilon(&approx, 2e-6).unwrap() - 0.3).abs() < 1e-15);
}

#[test]
fn poisson_sampling_amplifies_pure_and_approximate_events() {
    let a = acc(Conversion::Current);
    let q: f64 = 0.01;
    let lap = PrivacyEvent::Laplace {
        noise_multiplier: 1.0,
    }
    .poisson_sampled(q);
    let expected = (1.0 + q * (1f64.exp() - 1.0)).ln();
    assert!((a.epsilon(&lap, 1e-5).unwrap() - expected).abs() < 1e-12);
    let approx = PrivacyEvent::EpsilonDelta {
        epsilon: 2.0,
        delta: 1e-4,
    }
    .poisson_sampled(q);
    let eps = a.epsilon(&approx, 1e-6 + 1e-12).unwrap();
    assert!(
        (eps - (1.0 + q * (2f64.exp() - 1.0)).ln()).abs() < 1e-12,
        "{eps}"
    );
    // Large ε does not overflow: ln(1 + q(e^800 − 1)) ≈ 800 + ln q.
    let big = PrivacyEvent::EpsilonDelta {
        epsilon: 800.0,
        delta: 0.0,
    }
    .poisson_sampled(q);
    assert!((a.epsilon(&big, 1e-5).unwrap() - (800.0 + q.ln())).abs() < 1e-9);
    let unsupported = PrivacyEvent::DiscreteGaussian {
        sigma: 2.0,
        sensitivity: 1,
    }
    .poisson_sampled(q);
    match a.epsilon(&unsupported, 1e-5) {
        Err(AccountingError::Unsupported(m)) => assert!(m.contains("discrete_gaussian"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn discrete_gaussian_matches_gaussian_bound() {
    let a = acc(Conversion::Current);
    let dg = PrivacyEvent::DiscreteGaussian {
        sigma: 6.0,
        sensitivity: 3,
    };
    let g = PrivacyEvent::Gaussian {
        noise_multiplier: 2.0,
    };
    for (x, y) in a.rdp(&dg).unwrap().iter().zip(&a.rdp(&g).unwrap()) {
        assert!((x - y).abs() <= 1e-15 * y);
    }
}

#[test]
fn bad_input_is_rejected_with_the_value_named() {
    let a = acc(Conversion::Current);
    let m = invalid(a.epsilon(&PrivacyEvent::dp_sgd(0.0, 0.01, 10), 1e-5));
    assert!(m.contains("noise_multiplier") && m.contains("got 0"), "{m}");
    let m = invalid(a.epsilon(&PrivacyEvent::dp_sgd(-1.0, 0.01, 10), 1e-5));
    assert!(m.contains("got -1"), "{m}");
    let m = invalid(a.epsilon(&PrivacyEvent::dp_sgd(f64::NAN, 0.01, 10), 1e-5));
    assert!(m.contains("NaN"), "{m}");
    for q in [0.0, 1.5, -0.1, f64::NAN] {
        let m = invalid(a.epsilon(&PrivacyEvent::dp_sgd(1.0, q, 10), 1e-5));
        assert!(
            m.contains("sampling_rate") && m.contains(&format!("got {q}")),
            "{m}"
        );
    }
    let m = invalid(a.epsilon(&PrivacyEvent::dp_sgd(1.0, 0.01, 0), 1e-5));
    assert!(m.contains("count") && m.contains("got 0"), "{m}");
    let event = PrivacyEvent::dp_sgd(1.0, 0.01, 10);
    for d in [0.0, 1.0, -1e-5, f64::NAN] {
        let m = invalid(a.epsilon(&event, d));
        assert!(
            m.contains("delta") && m.contains(&format!("got {d}")),
            "{m}"
        );
    }
    for e in [-1.0, f64::NAN, f64::INFINITY] {
        assert!(invalid(a.delta(&event, e)).contains("epsilon"));
    }
    let rr = PrivacyEvent::RandomizedResponse {
        epsilon: 1.0,
        categories: 1,
    };
    assert!(invalid(a.epsilon(&rr, 1e-5)).contains("categories"));
    let ed = PrivacyEvent::EpsilonDelta {
        epsilon: 1.0,
        delta: 1.0,
    };
    assert!(invalid(a.epsilon(&ed, 1e-5)).contains("delta of an epsilon_delta"));
    let bad_orders = RdpAccountant {
        orders: vec![2.0, 1.0],
        conversion: Conversion::Current,
    };
    assert!(invalid(bad_orders.rdp(&event)).contains("got 1"));
    let no_orders = RdpAccountant {
        orders: vec![],
        conversion: Conversion::Current,
    };
    assert!(invalid(no_orders.rdp(&event)).contains("empty"));
}

#[test]
fn accountant_trait_reports_name_and_bound() {
    let a: &dyn Accountant = &RdpAccountant::default();
    assert_eq!(a.name(), "rdp");
    assert_eq!(a.bound(), BoundKind::UpperBound);
}

#[test]
fn vanishing_noise_gives_infinite_epsilon_not_nan() {
    let a = acc(Conversion::Current);
    for event in [
        PrivacyEvent::dp_sgd(1e-200, 0.01, 10),
        PrivacyEvent::Gaussian {
            noise_multiplier: 1e-200,
        },
        PrivacyEvent::Laplace {
            noise_multiplier: 1e-310,
        },
        PrivacyEvent::DiscreteLaplace {
            scale: 1e-310,
            sensitivity: 1,
        },
        PrivacyEvent::Laplace {
            noise_multiplier: 1e-310,
        }
        .poisson_sampled(0.5)
        .repeated(3),
    ] {
        assert!(
            a.rdp(&event).unwrap().iter().all(|r| *r == f64::INFINITY),
            "{event:?}"
        );
        assert_eq!(a.epsilon(&event, 1e-5).unwrap(), f64::INFINITY, "{event:?}");
        assert_eq!(a.delta(&event, 5.0).unwrap(), 1.0, "{event:?}");
    }
}

/// With σ near 1e-152 the moment sums overflow (∞ − ∞ = NaN at every order): ε(α) is +∞
/// there, not the 0 that `NaN.max(0.0)` gave.
#[test]
fn overflowing_moments_bound_nothing_rather_than_read_zero() {
    for sigma in [1e-152, 1e-151, 7.5e-155] {
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: sigma,
        }
        .poisson_sampled(0.01)
        .repeated(10);
        for conversion in [Conversion::Classic, Conversion::Current] {
            let eps = acc(conversion).epsilon(&e, 1e-5).unwrap();
            assert!(eps > 1e300, "σ = {sigma}: ε = {eps}");
        }
    }
}

/// At q = 2e-8 one step's ln A_α is about 7e-16, which rounding computed as 0: 10¹⁶ steps
/// composed to ε = 0, where the central limit theorem's μ = q·√(T(e^{1/σ²} − 1)) = 2.6 puts
/// the true ε near 14. The rounding margin keeps every order's RDP an upper bound.
#[test]
fn a_tiny_sampling_rate_over_very_many_steps_is_not_free() {
    let event = PrivacyEvent::dp_sgd(1.0, 2e-8, 10_000_000_000_000_000);
    for conversion in [Conversion::Classic, Conversion::Current] {
        let eps = acc(conversion).epsilon(&event, 1e-5).unwrap();
        assert!(eps >= 14.0, "{conversion:?}: {eps}");
    }
    // A usual run keeps its value: the margin is 1e-15 of a step's ln A at most.
    let usual = PrivacyEvent::dp_sgd(1.1, 256.0 / 60000.0, 14063);
    let eps = acc(Conversion::Current).epsilon(&usual, 1e-5).unwrap();
    assert!((eps - 2.597).abs() < 2e-3, "{eps}");
}
