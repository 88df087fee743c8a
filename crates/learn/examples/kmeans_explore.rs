//! Temporary exploration (not part of the crate's deliverables).
use dpml_data::{LoadOptions, Source, load};
use dpml_learn::kmeans::*;
use dpml_mechanisms::DpRng;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for name in ["wine", "breast-cancer"] {
        let ds = load(&name.parse::<Source>()?, &LoadOptions::default())?.train;
        let (n, d) = (ds.n, ds.n_features());
        let x: Vec<f64> = ds.x.iter().map(|&v| f64::from(v)).collect();
        let lo: Vec<f64> = (0..d).map(|j| (0..n).map(|i| x[i * d + j]).fold(f64::INFINITY, f64::min)).collect();
        let hi: Vec<f64> = (0..d).map(|j| (0..n).map(|i| x[i * d + j]).fold(f64::NEG_INFINITY, f64::max)).collect();
        let bounds = Bounds::new(lo, hi)?;
        let k = ds.n_classes;
        let run = |p: &KMeansParams| -> Result<f64, Box<dyn std::error::Error>> {
            let mut acc = 0.0;
            for s in 0..50 {
                let f = fit(p, &x, n, d, &mut DpRng::seeded(7000 + s))?;
                acc += clustering_accuracy(&f.assignments, &ds.y, k, k)?;
            }
            Ok(acc / 50.0)
        };
        println!("{name}: n={n} d={d} k={k} lloyd {:.3}", run(&KMeansParams::new(k, Algorithm::Lloyd, bounds.clone()))?);
        for alg in [Algorithm::DpLloyd, Algorithm::DpLloydGaussian] {
            for init in [Init::SpherePacking, Init::Histogram { share: 0.3 }] {
                for t in [1, 2, 3, 5] {
                    print!("{alg} {init:?} T={t}:");
                    for e in [0.3, 1.0, 3.0, 10.0, 30.0] {
                        let mut p = KMeansParams::new(k, alg, bounds.clone()).with_epsilon(e).with_iterations(t).with_init(init);
                        if alg == Algorithm::DpLloydGaussian { p = p.with_delta(1e-5); }
                        print!(" {:.3}", run(&p)?);
                    }
                    println!();
                }
            }
        }
    }
    Ok(())
}
