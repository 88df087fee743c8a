//! DP k-means on iris: mean ± sd clustering accuracy and mean NICV over 20 seeds for each
//! algorithm and ε, beside diffprivlib 0.6.6's KMeans (the reference numbers of issue 5) and
//! the chance level of a clustering that never looks at the data.
//!
//! `cargo run -p dpml-learn --example kmeans_iris` (environment: `SEEDS=200` for more seeds,
//! `SEED0=1000` for another seed range).

use dpml_data::{LoadOptions, Source, load};
use dpml_learn::LearnError;
use dpml_learn::kmeans::{
    Algorithm, Bounds, Coordinates, Init, KMeansParams, clustering_accuracy, fit, nicv,
};
use dpml_mechanisms::DpRng;

const EPSILONS: [f64; 5] = [0.1, 0.3, 1.0, 3.0, 10.0];
/// diffprivlib 0.6.6 KMeans on iris, mean accuracy over 20 seeds (issue 5).
const DIFFPRIVLIB: [f64; 5] = [0.657, 0.697, 0.693, 0.726, 0.839];
const DELTA: f64 = 1e-5;
const K: usize = 3;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (
        m,
        (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0).max(1.0)).sqrt(),
    )
}

/// A row of the table: its label and how to build its parameters for a given ε.
struct Row {
    label: &'static str,
    params: Box<dyn Fn(f64) -> KMeansParams>,
}

fn row(
    label: &'static str,
    bounds: &Bounds,
    algorithm: Algorithm,
    tweak: fn(KMeansParams) -> KMeansParams,
) -> Row {
    let b = bounds.clone();
    Row {
        label,
        params: Box::new(move |e| {
            let p = KMeansParams::new(K, algorithm, b.clone()).with_epsilon(e);
            tweak(if algorithm.needs_delta() {
                p.with_delta(DELTA)
            } else {
                p
            })
        }),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (seeds, seed0) = (env_or("SEEDS", 20), env_or("SEED0", 0));
    let iris = load(&Source::Iris, &LoadOptions::default())?.train;
    let (n, d) = (iris.n, iris.n_features());
    let x: Vec<f64> = iris.x.iter().map(|&v| f64::from(v)).collect();
    let published = Source::Iris
        .published_ranges()
        .map_or(&[][..], |p| p.ranges);
    let bounds = Bounds::from_pairs(published)?;
    let score = |centroids: &[f64], assignments: &[usize]| -> Result<(f64, f64), LearnError> {
        Ok((
            clustering_accuracy(assignments, &iris.y, K, iris.n_classes)?,
            nicv(&x, d, centroids, &bounds)?,
        ))
    };

    println!(
        "iris (n = {n}, d = {d}), k = {K}, {seeds} seeds from {seed0}, bounds = published feature ranges"
    );
    let lloyd = KMeansParams::new(K, Algorithm::Lloyd, bounds.clone());
    let base: Vec<(f64, f64)> = (0..seeds)
        .map(|s| {
            fit(&lloyd, &x, n, d, &mut DpRng::seeded(seed0 + s))
                .and_then(|f| score(&f.centroids, &f.assignments))
        })
        .collect::<Result<_, _>>()?;
    let (acc, sd) = mean_sd(&base.iter().map(|r| r.0).collect::<Vec<_>>());
    let nicv0 = mean_sd(&base.iter().map(|r| r.1).collect::<Vec<_>>()).0;
    println!("non-private lloyd: accuracy {acc:.3} ± {sd:.3}, nicv {nicv0:.4}");
    // Chance: 3 centroids uniform in the bounds, never looking at the data.
    let mut rng = DpRng::seeded(seed0);
    let chance: Vec<f64> = (0..2000)
        .map(|_| {
            let c: Vec<f64> = (0..K * d)
                .map(|i| {
                    bounds.lo()[i % d]
                        + rng.uniform_f64() * (bounds.hi()[i % d] - bounds.lo()[i % d])
                })
                .collect();
            let a: Vec<usize> = x
                .chunks(d)
                .map(|p| {
                    (0..K)
                        .min_by(|&i, &j| {
                            let dist = |c0: usize| {
                                p.iter()
                                    .zip(&c[c0 * d..(c0 + 1) * d])
                                    .map(|(u, v)| (u - v) * (u - v))
                                    .sum::<f64>()
                            };
                            dist(i).total_cmp(&dist(j))
                        })
                        .unwrap_or(0)
                })
                .collect();
            clustering_accuracy(&a, &iris.y, K, iris.n_classes)
        })
        .collect::<Result<_, _>>()?;
    let (c, csd) = mean_sd(&chance);
    println!("chance (uniform random centroids, no data): accuracy {c:.3} ± {csd:.3}\n");

    let rows = [
        row(
            "dplloyd plain (Su et al.): sphere, T=5, raw",
            &bounds,
            Algorithm::DpLloyd,
            |p| KMeansParams::plain_dplloyd(p.k, p.bounds, p.epsilon.unwrap_or(1.0), 5),
        ),
        row("  + centred sums", &bounds, Algorithm::DpLloyd, |p| {
            KMeansParams {
                coordinates: Coordinates::Centred,
                ..KMeansParams::plain_dplloyd(p.k, p.bounds, p.epsilon.unwrap_or(1.0), 5)
            }
        }),
        row("  + count floor 2", &bounds, Algorithm::DpLloyd, |p| {
            p.with_init(Init::SpherePacking).with_iterations(5)
        }),
        row(
            "  + T=2 (default T without histogram)",
            &bounds,
            Algorithm::DpLloyd,
            |p| p.with_init(Init::SpherePacking),
        ),
        row(
            "  + histogram init 30%, T=1 (= default)",
            &bounds,
            Algorithm::DpLloyd,
            |p| p,
        ),
        row(
            "dplloyd-gaussian sphere, T=5",
            &bounds,
            Algorithm::DpLloydGaussian,
            |p| p.with_init(Init::SpherePacking).with_iterations(5),
        ),
        row(
            "dplloyd-gaussian default: histogram, T=1",
            &bounds,
            Algorithm::DpLloydGaussian,
            |p| p,
        ),
        row(
            "input-perturbation (local, eps per record)",
            &bounds,
            Algorithm::InputPerturbation,
            |p| p,
        ),
    ];
    print!("{:<46}", "accuracy mean ± sd (nicv)   epsilon =");
    for e in EPSILONS {
        print!("{e:>20}");
    }
    print!("\n{:<46}", "diffprivlib 0.6.6 KMeans");
    for a in DIFFPRIVLIB {
        print!("{a:>20.3}");
    }
    println!();
    for r in &rows {
        print!("{:<46}", r.label);
        for e in EPSILONS {
            let runs: Vec<(f64, f64)> = (0..seeds)
                .map(|s| {
                    let f = fit(&(r.params)(e), &x, n, d, &mut DpRng::seeded(seed0 + s))?;
                    score(&f.centroids, &f.assignments)
                })
                .collect::<Result<_, LearnError>>()?;
            let (m, sd) = mean_sd(&runs.iter().map(|r| r.0).collect::<Vec<_>>());
            let nv = mean_sd(&runs.iter().map(|r| r.1).collect::<Vec<_>>()).0;
            print!("{:>20}", format!("{m:.3}±{sd:.3} ({nv:.2})"));
        }
        println!();
    }
    println!(
        "\n(gaussian rows: delta = {DELTA}; nicv on data scaled to [-1, 1]^d, lower is better)"
    );
    Ok(())
}
