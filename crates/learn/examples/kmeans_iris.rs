//! DP k-means on iris: mean ± sd clustering accuracy (and NICV) over 20 seeds for each
//! algorithm and ε, next to diffprivlib 0.6.6's KMeans (issue 5's reference numbers).
//!
//! Run with `cargo run -p dpml-learn --example kmeans_iris` (add `--release` for speed).

use dpml_data::{LoadOptions, Source, load};
use dpml_learn::LearnError;
use dpml_learn::kmeans::{
    Algorithm, Bounds, Coordinates, IRIS_FEATURE_RANGES, Init, KMeansParams, SplitRule, clustering_accuracy, fit, nicv,
};
use dpml_mechanisms::DpRng;

const EPSILONS: [f64; 5] = [0.1, 0.3, 1.0, 3.0, 10.0];
/// diffprivlib 0.6.6 KMeans on iris, mean accuracy over 20 seeds (issue 5).
const DIFFPRIVLIB: [f64; 5] = [0.657, 0.697, 0.693, 0.726, 0.839];
fn seeds() -> u64 { std::env::var("SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20) }
fn seed0() -> u64 { std::env::var("SEED0").ok().and_then(|v| v.parse().ok()).unwrap_or(1000) }
const DELTA: f64 = 1e-5;

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0)).sqrt())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iris = load(&Source::Iris, &LoadOptions::default())?.train;
    let (n, d) = (iris.n, iris.n_features());
    let x: Vec<f64> = iris.x.iter().map(|&v| f64::from(v)).collect();
    let bounds = Bounds::from_pairs(&IRIS_FEATURE_RANGES)?;
    let score = |params: &KMeansParams, seed: u64| -> Result<(f64, f64), LearnError> {
        let f = fit(params, &x, n, d, &mut DpRng::seeded(seed))?;
        Ok((clustering_accuracy(&f.assignments, &iris.y, 3, iris.n_classes)?, nicv(&x, d, &f.centroids, &bounds)?))
    };
    let lloyd = KMeansParams::new(3, Algorithm::Lloyd, bounds.clone());
    let base: Vec<(f64, f64)> = (0..seeds()).map(|s| score(&lloyd, s)).collect::<Result<_, _>>()?;
    let (acc, sd) = mean_sd(&base.iter().map(|r| r.0).collect::<Vec<_>>());
    println!("iris, k = 3, {} seeds, bounds = published feature ranges, delta = {DELTA} (Gaussian)", seeds());
    println!("non-private lloyd: accuracy {acc:.3} ± {sd:.3}, nicv {:.4}\n", mean_sd(&base.iter().map(|r| r.1).collect::<Vec<_>>()).0);
    let make = |algorithm: Algorithm, t: Option<usize>, init: Init, split: SplitRule| {
        let b = bounds.clone();
        move |e: f64| {
            let mut p = KMeansParams::new(3, algorithm, b.clone()).with_epsilon(e).with_init(init).with_split(split);
            p.iterations = t;
            if algorithm == Algorithm::DpLloydGaussian {
                p = p.with_delta(DELTA);
            }
            p
        }
    };
    let mse = SplitRule::MseOptimal;
    let mut variants: Vec<(String, Box<dyn Fn(f64) -> KMeansParams>)> = Vec::new();
    for alg in [Algorithm::DpLloyd, Algorithm::DpLloydGaussian] {
        for (init, ts) in [(Init::SpherePacking, vec![1, 2]), (Init::Histogram { share: 0.2 }, vec![1]), (Init::Histogram { share: 0.3 }, vec![1, 2]), (Init::Histogram { share: 0.4 }, vec![1])] {
            for t in ts {
                for split in [mse] {
                    variants.push((format!("{alg} T={t} {init:?} {split:?}"), Box::new(make(alg, Some(t), init, split))));
                }
            }
        }
    }
    let _ = Coordinates::Raw;
    print!("{:<52}", "accuracy (mean ± sd) / epsilon");
    for e in EPSILONS {
        print!("{e:>14}");
    }
    println!();
    print!("{:<52}", "diffprivlib 0.6.6");
    for a in DIFFPRIVLIB {
        print!("{a:>14.3}");
    }
    println!();
    for (name, make) in &variants {
        print!("{name:<38}");
        let mut nicvs = Vec::new();
        for e in EPSILONS {
            let runs: Vec<(f64, f64)> = (0..seeds()).map(|s| score(&make(e), seed0() + s)).collect::<Result<_, _>>()?;
            let (m, sd) = mean_sd(&runs.iter().map(|r| r.0).collect::<Vec<_>>());
            nicvs.push(mean_sd(&runs.iter().map(|r| r.1).collect::<Vec<_>>()).0);
            print!("{:>14}", format!("{m:.3}±{sd:.3}"));
        }
        println!();
        print!("{:<52}", "   nicv");
        for v in nicvs {
            print!("{v:>14.4}");
        }
        println!();
    }
    Ok(())
}
