//! k-means clustering, plain and differentially private.
//!
//! - [`Algorithm::Lloyd`]: the non-private baseline (k-means++ seeds, restarts).
//! - [`Algorithm::DpLloyd`]: DPLloyd of Su et al. — each iteration releases noisy cluster
//!   counts and sums (exact discrete Laplace), ε split evenly over the iterations and, within
//!   one, between counts and sums by the MSE-optimal rule ([`budget`]); pure ε-DP.
//! - [`Algorithm::DpLloydGaussian`]: the same with discrete Gaussian noise composed in zCDP;
//!   (ε, δ)-DP.
//! - [`Algorithm::InputPerturbation`]: local DP — Laplace noise on every feature of every
//!   record, then plain Lloyd.
//!
//! Sensitivities come from the declared [`Bounds`] only; the data are clamped into them, and
//! every noisy statistic is an integer on a per-record grid with exact discrete noise
//! ([`grid`], [`release`]). Initial centroids never look at the data without paying for it
//! ([`Init`]). Every fit returns its cost as a [`dpml_mechanisms::PrivacyEvent`] and a
//! [`BudgetSplit`] whose parts compose to exactly the requested budget.
//!
//! Improvements over plain DPLloyd ([`KMeansParams::plain_dplloyd`]), each selectable and all
//! on by default in [`KMeansParams::new`]: sums about the centre of the bounds
//! ([`Coordinates::Centred`]), a count floor below which a centroid stays put
//! ([`KMeansParams::count_floor`]), fewer iterations ([`default_iterations`]), Su et al.'s
//! hybrid start from a noisy grid histogram ([`Init::Histogram`], [`histogram`]), and Gaussian
//! noise under zCDP ([`Algorithm::DpLloydGaussian`]). On iris (20 seeds) the default reaches
//! 0.84 accuracy at ε = 1 and 0.88 at ε = 3, against 0.69 and 0.73 for diffprivlib 0.6.6 and
//! 0.68 for centroids that never saw the data (`examples/kmeans_iris.rs`).
//!
//! ```
//! use dpml_learn::kmeans::{fit, clustering_accuracy, Algorithm, Bounds, KMeansParams};
//! use dpml_mechanisms::DpRng;
//!
//! // Two well-separated groups in [0, 10]².
//! let x: Vec<f64> = (0..200).flat_map(|i| if i < 100 { [1.0, 1.0] } else { [9.0, 9.0] }).collect();
//! let labels: Vec<u32> = (0..200).map(|i| (i >= 100) as u32).collect();
//! let params = KMeansParams::new(2, Algorithm::DpLloyd, Bounds::uniform(0.0, 10.0, 2)?)
//!     .with_epsilon(5.0);
//! let fit = fit(&params, &x, 200, 2, &mut DpRng::seeded(1))?;
//! assert_eq!(fit.epsilon, Some(5.0));
//! assert!(clustering_accuracy(&fit.assignments, &labels, 2, 2)? > 0.9);
//! # Ok::<(), dpml_learn::LearnError>(())
//! ```

pub mod budget;
pub mod dplloyd;
pub mod histogram;
pub mod input_perturbation;
pub mod release;

mod bounds;
mod fit;
pub mod grid;
mod init;
mod lloyd;
mod metrics;
mod noise;
mod params;

pub use bounds::Bounds;
pub use budget::{BudgetSplit, SU_RHO};
pub use fit::{KMeansFit, LLOYD_MAX_ITERATIONS, MAX_ITERATIONS, default_iterations, fit};
pub use init::InitReport;
pub use metrics::{clustering_accuracy, inertia, nicv};
pub use params::{
    Algorithm, Coordinates, DEFAULT_COUNT_FLOOR, DEFAULT_INIT, Init, KMeansParams, SplitRule,
};

#[cfg(test)]
mod tests;
