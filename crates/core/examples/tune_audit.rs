//! The white-box canary audit of whole private searches on the embedded digits: for each seed,
//! a search (logistic regressions, Poisson number of trials) with Dirac canaries in every
//! trial, audited on the trial it keeps; prints the one-run lower bound on ε beside the
//! search's ε, and exits 1 if a bound ever exceeds it.
//!
//! ```sh
//! cargo run --release -p dpml-core --example tune_audit -- [SEEDS] [EPSILON] [TRIALS_MEAN]
//! ```
//! (defaults: 5 seeds, ε = 8, mean 3 trials; a large ε gives the audit something to find).

use dpml_core::data::{LoadOptions, Source, SplitBasis, SplitKey, load, validation_split};
use dpml_core::learn::dpsgd;
use dpml_core::mechanisms::{DpRng, Repetitions, TrialRelease};
use dpml_core::observe::Silent;
use dpml_core::tune::audit::audit_search;
use dpml_core::tune::{Noise, Search, SearchSpace, Validation};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seeds: u64 = args.first().map_or(Ok(5), |s| s.parse())?;
    let epsilon: f64 = args.get(1).map_or(Ok(8.0), |s| s.parse())?;
    let mean: f64 = args.get(2).map_or(Ok(3.0), |s| s.parse())?;
    let digits = load(&Source::Digits, &LoadOptions::default())?.train;
    let mut base = dpsgd::preset("digits-eps1")?.config;
    base.epochs = 10.0;
    let search = Search {
        space: SearchSpace::parse("learning-rate=0.5..4 log, batch-size=64|128|256")?,
        repetitions: Repetitions::Poisson { mean },
        release: TrialRelease::Best,
        noise: Noise::TotalEpsilon(epsilon),
        delta: base.delta,
        base,
    };
    println!("seed  trials  epsilon  per_trial  one_run_lower_bound  ceiling");
    let mut worst: f64 = 0.0;
    for seed in 1..=seeds {
        let mut rng = DpRng::seeded(seed);
        let key = SplitKey::from_rng(rng.as_rng());
        let (fit, validation) = validation_split(&digits, 0.1, &key, SplitBasis::Record)?;
        let a = audit_search(
            &search,
            &fit,
            Validation::Private {
                set: &validation,
                score_epsilon: epsilon / 10.0,
            },
            600,
            0.95,
            &mut rng,
            &mut Silent,
        )?;
        let ceiling = a.audit.as_ref().map_or(0.0, |x| x.one_run_ceiling);
        println!(
            "{seed:>4}  {:>6}  {:>7.3}  {:>9.3}  {:>19.3}  {ceiling:>7.3}",
            a.trials,
            a.epsilon,
            a.epsilon_per_trial,
            a.lower_bound()
        );
        worst = worst.max(a.lower_bound() - a.epsilon);
    }
    if worst > 0.0 {
        eprintln!("a lower bound exceeds the search's epsilon by {worst}");
        std::process::exit(1);
    }
    Ok(())
}
