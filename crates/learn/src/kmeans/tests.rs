//! Tests of the whole k-means pipeline: recovery, utility against chance on iris, the privacy
//! budget as composed from the reported events, and bad input.

use dpml_accounting::rdp::{Conversion, RdpAccountant};
use dpml_accounting::{Accountant, PrivacyEvent};
use dpml_data::{LoadOptions, Source, load};
use dpml_mechanisms::DpRng;

use super::*;
use crate::LearnError;

/// Iris' published feature ranges (the data crate's table).
fn iris_ranges() -> &'static [(f64, f64)] {
    Source::Iris
        .published_ranges()
        .expect("iris publishes its ranges")
        .ranges
}

/// Iris as f64 rows, its labels and its published feature ranges.
fn iris() -> (Vec<f64>, Vec<u32>, Bounds) {
    let splits = load(&Source::Iris, &LoadOptions::default()).expect("iris is embedded");
    let ranges = splits
        .schema
        .require_bounds("iris", 4)
        .expect("iris carries its ranges");
    let iris = splits.train;
    let x = iris.x.iter().map(|&v| f64::from(v)).collect();
    (
        x,
        iris.y,
        Bounds::from_pairs(&ranges).expect("valid ranges"),
    )
}

/// `k` groups of `per` points in `d` dimensions: centres 10 apart on the axes, each point
/// within ±0.5 of its centre in every coordinate. Returns points, labels, centres.
fn blobs(k: usize, per: usize, d: usize, rng: &mut DpRng) -> (Vec<f64>, Vec<u32>, Vec<f64>) {
    let centres: Vec<f64> = (0..k)
        .flat_map(|c| {
            (0..d).map(move |j| {
                if j == c % d {
                    10.0 * (1 + c / d) as f64
                } else {
                    0.0
                }
            })
        })
        .collect();
    let mut x = Vec::new();
    let mut y = Vec::new();
    for c in 0..k {
        for _ in 0..per {
            x.extend((0..d).map(|j| centres[c * d + j] + rng.uniform_f64() - 0.5));
            y.push(c as u32);
        }
    }
    (x, y, centres)
}

/// Pure ε of an event made of (discrete) Laplace releases, by basic composition.
fn pure_epsilon(event: &PrivacyEvent) -> f64 {
    match event {
        PrivacyEvent::Laplace { noise_multiplier } => 1.0 / noise_multiplier,
        PrivacyEvent::DiscreteLaplace { scale, sensitivity } => *sensitivity as f64 / scale,
        PrivacyEvent::SelfComposed { event, count } => *count as f64 * pure_epsilon(event),
        PrivacyEvent::Composed { events } => events.iter().map(pure_epsilon).sum(),
        other => panic!("not a pure-ε event: {other:?}"),
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn lloyd_and_dplloyd_recover_well_separated_clusters() {
    let mut rng = DpRng::seeded(1);
    let (k, per, d) = (4, 60, 3);
    let (x, y, centres) = blobs(k, per, d, &mut rng);
    let bounds = Bounds::uniform(-1.0, 21.0, d).unwrap();
    let lloyd = fit(
        &KMeansParams::new(k, Algorithm::Lloyd, bounds.clone()),
        &x,
        k * per,
        d,
        &mut rng,
    )
    .unwrap();
    assert_eq!(
        clustering_accuracy(&lloyd.assignments, &y, k, k).unwrap(),
        1.0
    );
    // Each true centre has a fitted centroid within 0.2: the mean of 60 uniform(±0.5) offsets
    // has sd 0.29/√60 ≈ 0.04 per coordinate, so 0.2 is 5 sd in each of 3 coordinates.
    for c in centres.chunks(d) {
        let best = (0..k)
            .map(|i| {
                lloyd
                    .centroid(i)
                    .iter()
                    .zip(c)
                    .map(|(a, b)| (a - b).powi(2))
                    .sum::<f64>()
            })
            .fold(f64::INFINITY, f64::min);
        assert!(best.sqrt() < 0.2, "{c:?} vs {:?}", lloyd.centroids);
    }
    assert!(lloyd.epsilon.is_none() && lloyd.event.is_none() && lloyd.budget_split.is_none());
    // DPLloyd with a generous budget finds the same groups (noise sd per centroid coordinate is
    // about T·Δ₁/ε_S/(n/k) < 0.1 here, far below the gap of 10).
    for alg in [Algorithm::DpLloyd, Algorithm::DpLloydGaussian] {
        let mut p = KMeansParams::new(k, alg, bounds.clone()).with_epsilon(50.0);
        if alg.needs_delta() {
            p = p.with_delta(1e-6);
        }
        let accs: Vec<f64> = (0..5)
            .map(|s| {
                let f = fit(&p, &x, k * per, d, &mut DpRng::seeded(100 + s)).unwrap();
                clustering_accuracy(&f.assignments, &y, k, k).unwrap()
            })
            .collect();
        // Lloyd itself can merge two groups from a poor start; most seeds must be perfect.
        assert!(
            accs.iter().filter(|&&a| a == 1.0).count() >= 4,
            "{alg}: {accs:?}"
        );
    }
}

#[test]
fn iris_accuracy_is_far_above_chance_at_large_epsilon_and_at_chance_at_tiny_epsilon() {
    let (x, y, bounds) = iris();
    let (n, d) = (150, 4);
    // Chance: the accuracy of the Voronoi partition of 3 centroids drawn uniformly in the
    // bounds, i.e. of a clustering that never saw the data. On iris it is about 0.69 ± 0.115
    // (a random cut often separates setosa), so 400 draws give its mean within ±0.006 (1 SE).
    let mut rng = DpRng::seeded(9);
    let chance = mean(
        &(0..400)
            .map(|_| {
                let c: Vec<f64> = (0..3)
                    .flat_map(|_| {
                        (0..d)
                            .map(|j| {
                                bounds.lo()[j]
                                    + rng.uniform_f64() * (bounds.hi()[j] - bounds.lo()[j])
                            })
                            .collect::<Vec<_>>()
                    })
                    .collect();
                let fit = KMeansFit {
                    algorithm: Algorithm::Lloyd,
                    k: 3,
                    d,
                    centroids: c,
                    assignments: vec![],
                    inertia: 0.0,
                    iterations: 0,
                    epsilon: None,
                    delta: None,
                    budget_split: None,
                    init: None,
                    event: None,
                    seeded: true,
                };
                clustering_accuracy(&fit.predict(&x, n).unwrap(), &y, 3, 3).unwrap()
            })
            .collect::<Vec<_>>(),
    );
    let accuracy = |alg: Algorithm, eps: f64, seeds: u64| -> f64 {
        mean(
            &(0..seeds)
                .map(|s| {
                    let mut p = KMeansParams::new(3, alg, bounds.clone()).with_epsilon(eps);
                    if alg.needs_delta() {
                        p = p.with_delta(1e-5);
                    }
                    let f = fit(&p, &x, n, d, &mut DpRng::seeded(500 + s)).unwrap();
                    clustering_accuracy(&f.assignments, &y, 3, 3).unwrap()
                })
                .collect::<Vec<_>>(),
        )
    };
    for alg in [Algorithm::DpLloyd, Algorithm::DpLloydGaussian] {
        // ε = 10: about 0.89–0.90 with sd ≈ 0.015 per seed (200-seed runs), so the mean of 10
        // seeds is within ±0.015 (3 SE) of it; require 0.85 and 0.15 above chance.
        let high = accuracy(alg, 10.0, 10);
        assert!(
            high > 0.85 && high > chance + 0.15,
            "{alg}: {high} vs chance {chance}"
        );
        // ε = 0.001 (0.01 for the Gaussian, whose exact sampler needs σ < 2^15·Δ): the output
        // is (nearly) independent of the data, so its mean accuracy over 40 seeds (sd ≤ 0.12 →
        // SE ≤ 0.019) must match chance (SE 0.006) up to 4 SE of the difference (0.08) plus
        // 0.02 for the different, data-free centroid distribution.
        let tiny = accuracy(alg, if alg.needs_delta() { 0.01 } else { 0.001 }, 40);
        assert!(
            (tiny - chance).abs() < 0.10,
            "{alg}: {tiny} vs chance {chance}"
        );
    }
    // Local DP at ε = 0.01 per record: noise of scale 400× the range; also at chance.
    let local = accuracy(Algorithm::InputPerturbation, 0.01, 40);
    assert!(
        (local - chance).abs() < 0.10,
        "input perturbation: {local} vs chance {chance}"
    );
}

#[test]
fn laplace_budget_composes_to_exactly_epsilon() {
    let (x, _, bounds) = iris();
    let mut rng = DpRng::seeded(3);
    // Dimensions 1 (iris' first feature), 4 (iris) and 784 (MNIST-sized, synthetic records).
    let mnist: Vec<f64> = (0..20 * 784).map(|_| rng.uniform_f64()).collect();
    let cases: Vec<(&[f64], usize, Bounds)> = vec![
        (&x, 4, bounds.clone()),
        (&mnist, 784, Bounds::uniform(0.0, 1.0, 784).unwrap()),
    ];
    for (data, d, b) in cases {
        let n = data.len() / d;
        for init in [Init::SpherePacking, Init::Histogram { share: 0.3 }] {
            for coordinates in [Coordinates::Centred, Coordinates::Raw] {
                for (eps, t) in [(0.1, 1), (1.0, 3), (7.5, 7)] {
                    let p = KMeansParams::new(3, Algorithm::DpLloyd, b.clone())
                        .with_epsilon(eps)
                        .with_iterations(t)
                        .with_init(init)
                        .with_coordinates(coordinates);
                    let f = fit(&p, data, n, d, &mut rng).unwrap();
                    let event = f.event.as_ref().unwrap();
                    let composed = pure_epsilon(event);
                    // Parameters are rounded outward (more noise), the reported scales rounded
                    // down: the composed ε is within float rounding of ε.
                    assert!(
                        (composed - eps).abs() <= 1e-9 * eps,
                        "d {d} {init:?} {coordinates:?}: {composed} vs {eps}"
                    );
                    let Some(BudgetSplit::Laplace {
                        epsilon_init,
                        epsilon_count,
                        epsilon_sum,
                        iterations,
                        ..
                    }) = f.budget_split
                    else {
                        panic!("laplace split")
                    };
                    assert_eq!(iterations, t);
                    let stated = epsilon_init + t as f64 * (epsilon_count + epsilon_sum);
                    assert!((stated - eps).abs() <= 1e-12 * eps, "{stated} vs {eps}");
                    // The accountant agrees: pure events compose to at most ε at any δ.
                    let acc = RdpAccountant::new(Conversion::Current)
                        .epsilon(event, 1e-9)
                        .unwrap();
                    assert!(acc <= eps * (1.0 + 1e-9), "{acc}");
                }
            }
        }
    }
}

#[test]
fn swapping_the_count_and_sum_shares_would_overspend() {
    // The MSE-optimal split gives the counts c/(c + d) of each iteration and each dimension
    // 1/(c + d), with c = ∛(4dρ²) in the unit cube. Giving the counts a dimension's share and
    // every dimension the counts' share (diffprivlib's bug) spends (1 + d·c)/(c + d) per unit.
    let d = 784usize;
    let share = budget::count_share_for_test(d);
    let per_dim = (1.0 - share) / d as f64;
    let swapped = per_dim + d as f64 * share;
    assert!(swapped > 5.0, "swapped spends {swapped}× the budget");
    // Ours, on the same dimension: exactly ε (checked from the event).
    let mut rng = DpRng::seeded(4);
    let x: Vec<f64> = (0..10 * d).map(|_| rng.uniform_f64() * 2.0 - 1.0).collect();
    let p = KMeansParams::new(
        2,
        Algorithm::DpLloyd,
        Bounds::uniform(-1.0, 1.0, d).unwrap(),
    )
    .with_epsilon(1.0)
    .with_init(Init::SpherePacking);
    let f = fit(&p, &x, 10, d, &mut rng).unwrap();
    assert!((pure_epsilon(f.event.as_ref().unwrap()) - 1.0).abs() < 1e-9);
    let Some(BudgetSplit::Laplace {
        epsilon_count,
        epsilon_sum,
        ..
    }) = f.budget_split
    else {
        panic!()
    };
    assert!((epsilon_count / (epsilon_count + epsilon_sum) - share).abs() < 1e-12);
}

#[test]
fn gaussian_budget_composes_to_epsilon_under_the_rdp_accountant() {
    let (x, _, bounds) = iris();
    let acc = RdpAccountant::new(Conversion::Current);
    let mut rng = DpRng::seeded(5);
    for init in [Init::SpherePacking, Init::Histogram { share: 0.3 }] {
        for (eps, delta, t) in [(0.3, 1e-5, 1), (1.0, 1e-5, 3), (10.0, 1e-6, 6)] {
            let p = KMeansParams::new(3, Algorithm::DpLloydGaussian, bounds.clone())
                .with_epsilon(eps)
                .with_delta(delta)
                .with_iterations(t)
                .with_init(init);
            let f = fit(&p, &x, 150, 4, &mut rng).unwrap();
            let got = acc.epsilon(f.event.as_ref().unwrap(), delta).unwrap();
            // σ's are rounded up before sampling and reported rounded down (relative 1e-15);
            // the calibration itself is a bisection to machine precision.
            assert!(
                (got - eps).abs() < 1e-6 * eps,
                "{init:?} ε {eps}: accountant says {got}"
            );
            let Some(BudgetSplit::Gaussian {
                rho,
                rho_init,
                rho_count,
                rho_sum,
                iterations,
                ..
            }) = f.budget_split
            else {
                panic!("gaussian split")
            };
            assert!(
                (rho_init + iterations as f64 * (rho_count + rho_sum) - rho).abs() < 1e-12 * rho
            );
            assert_eq!(f.delta, Some(delta));
        }
    }
}

#[test]
fn input_perturbation_states_per_record_and_per_feature_epsilon() {
    let (x, _, bounds) = iris();
    let p = KMeansParams::new(3, Algorithm::InputPerturbation, bounds).with_epsilon(2.0);
    let f = fit(&p, &x, 150, 4, &mut DpRng::seeded(6)).unwrap();
    let Some(BudgetSplit::InputPerturbation {
        epsilon_per_record,
        epsilon_per_feature,
        features,
        ref scales,
    }) = f.budget_split
    else {
        panic!("input perturbation split")
    };
    assert_eq!(
        (epsilon_per_record, epsilon_per_feature, features),
        (2.0, 0.5, 4)
    );
    // Scale of feature j = its width / ε per feature (up to the grid's rounding, 2^-16).
    for (s, &(lo, hi)) in scales.iter().zip(iris_ranges()) {
        assert!((s / ((hi - lo) / 0.5) - 1.0).abs() < 1e-4, "{s}");
    }
    assert!((pure_epsilon(f.event.as_ref().unwrap()) - 2.0).abs() < 1e-9);
}

#[test]
fn seeded_runs_are_reproducible_and_flagged_and_f32_works() {
    let (x, _, bounds) = iris();
    let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let p = KMeansParams::new(3, Algorithm::DpLloyd, bounds).with_epsilon(1.0);
    let a = fit(&p, &x32, 150, 4, &mut DpRng::seeded(7)).unwrap();
    let b = fit(&p, &x32, 150, 4, &mut DpRng::seeded(7)).unwrap();
    assert_eq!(a, b);
    assert!(a.seeded);
    assert!(
        !fit(&p, &x, 150, 4, &mut DpRng::from_os().unwrap())
            .unwrap()
            .seeded
    );
    assert_eq!(a.predict(&x32, 150).unwrap(), a.assignments);
    let json = serde_json::to_value(&a).unwrap();
    for key in [
        "centroids",
        "assignments",
        "inertia",
        "epsilon",
        "delta",
        "iterations",
        "budget_split",
        "event",
        "init",
        "seeded",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    assert_eq!(json["algorithm"], "dplloyd");
    assert_eq!(json["budget_split"]["noise"], "laplace");
}

#[test]
fn bad_input_is_refused_with_the_value_named() {
    let (x, _, bounds) = iris();
    let err = |p: &KMeansParams, x: &[f64], n: usize, d: usize| -> String {
        fit(p, x, n, d, &mut DpRng::seeded(1))
            .unwrap_err()
            .to_string()
    };
    let ok = KMeansParams::new(3, Algorithm::DpLloyd, bounds.clone()).with_epsilon(1.0);
    assert_eq!(
        err(&KMeansParams { k: 0, ..ok.clone() }, &x, 150, 4),
        "k must be >= 1, got 0"
    );
    assert_eq!(
        err(
            &KMeansParams {
                k: 151,
                ..ok.clone()
            },
            &x,
            150,
            4
        ),
        "k must be at most the number of records, got 151 > n = 150"
    );
    let three = Bounds::from_pairs(&iris_ranges()[..3]).unwrap();
    assert_eq!(
        err(
            &KMeansParams {
                bounds: three,
                ..ok.clone()
            },
            &x,
            150,
            4
        ),
        "bounds cover 3 dimensions, but the data has 4"
    );
    assert_eq!(
        err(&ok.clone().with_epsilon(0.0), &x, 150, 4),
        "epsilon must be finite and > 0, got 0"
    );
    assert_eq!(
        err(&ok.clone().with_epsilon(-2.0), &x, 150, 4),
        "epsilon must be finite and > 0, got -2"
    );
    assert_eq!(
        err(&ok.clone().with_epsilon(f64::NAN), &x, 150, 4),
        "epsilon must be finite and > 0, got NaN"
    );
    assert_eq!(
        err(&ok, &x[..599], 150, 4),
        "data has 599 values, expected n x d = 150 x 4 = 600"
    );
    let mut bad = x.clone();
    bad[4 * 7 + 2] = f64::NAN;
    assert_eq!(
        err(&ok, &bad, 150, 4),
        "record 7, feature 2 is NaN: features must be numbers"
    );
    assert!(matches!(
        fit(&ok, &x, 150, 0, &mut DpRng::seeded(1)),
        Err(LearnError::InvalidParameter { .. })
    ));
    // Infinite values are clamped like any other value outside the bounds.
    let mut inf = x.clone();
    inf[0] = f64::INFINITY;
    assert!(fit(&ok, &inf, 150, 4, &mut DpRng::seeded(1)).is_ok());
}
