//! What a user asks of k-means: the algorithm, the privacy budget, the declared bounds and the
//! knobs of the private variants, with the checks that turn them into a runnable plan.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::bounds::Bounds;
use crate::LearnError;

/// Which k-means to run. Serialised as its [`Algorithm::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Non-private Lloyd with k-means++ seeding and restarts (the baseline; no privacy).
    Lloyd,
    /// DPLloyd of Su et al.: Laplace noise on per-cluster counts and sums, pure ε-DP.
    DpLloyd,
    /// DPLloyd with Gaussian noise, composed across iterations in zCDP; (ε, δ)-DP.
    DpLloydGaussian,
    /// Local DP: Laplace noise on every feature of every record, then ordinary Lloyd.
    InputPerturbation,
}

impl Algorithm {
    /// The name used on the command line and in outputs.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Lloyd => "lloyd",
            Algorithm::DpLloyd => "dplloyd",
            Algorithm::DpLloydGaussian => "dplloyd-gaussian",
            Algorithm::InputPerturbation => "input-perturbation",
        }
    }

    /// Every algorithm, in the order above.
    pub fn all() -> [Algorithm; 4] {
        [
            Algorithm::Lloyd,
            Algorithm::DpLloyd,
            Algorithm::DpLloydGaussian,
            Algorithm::InputPerturbation,
        ]
    }

    /// Whether the algorithm spends a privacy budget.
    pub fn is_private(self) -> bool {
        self != Algorithm::Lloyd
    }

    /// Whether the guarantee is (ε, δ) rather than pure ε.
    pub fn needs_delta(self) -> bool {
        self == Algorithm::DpLloydGaussian
    }
}

impl Serialize for Algorithm {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = LearnError;

    /// Parses `lloyd`, `dplloyd`, `dplloyd-gaussian` or `input-perturbation`.
    ///
    /// # Errors
    /// [`LearnError::InvalidParameter`] naming the input and listing the known names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algorithm::all()
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                LearnError::invalid(
                    "algorithm",
                    "must be one of lloyd, dplloyd, dplloyd-gaussian, input-perturbation",
                    format!("{s:?}"),
                )
            })
    }
}

/// How the private variants choose their initial centroids. None of them looks at the private
/// data without paying for it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Init {
    /// Su et al.'s sphere packing: k centres drawn uniformly inside the bounds (rescaled to
    /// [-1, 1]^d), each at distance ≥ 2a from the others and ≥ a from the faces, halving a
    /// until k fit. Data-independent and free.
    SpherePacking,
    /// Su et al.'s hybrid: spend `share` of the total budget on a noisy grid histogram and
    /// start from a weighted k-means of its cells. Falls back to sphere packing, and returns
    /// most of the share to the iterations, when the cells would hold mostly noise (high d,
    /// small n·ε); see the `histogram` module.
    Histogram {
        /// Fraction of the total budget (ε, or zCDP ρ for the Gaussian) for the
        /// initialisation, in (0, 1).
        share: f64,
    },
}

impl Init {
    /// The fraction of the budget the initialisation spends (0 for the free ones).
    pub fn share(self) -> f64 {
        match self {
            Init::Histogram { share } => share,
            Init::SpherePacking => 0.0,
        }
    }
}

/// The default initialisation: Su et al.'s hybrid with 30% of the budget for the histogram
/// (on iris over 200 seeds, 20%, 30% and 40% were within 0.01 of each other at ε = 1 and 3;
/// 30% was best at ε = 1).
pub const DEFAULT_INIT: Init = Init::Histogram { share: 0.3 };

/// The default [`KMeansParams::count_floor`]: a centroid moves only when its noisy count is at
/// least twice the count noise's scale (Laplace) or σ (Gaussian).
pub const DEFAULT_COUNT_FLOOR: f64 = 2.0;

/// How each iteration's budget is divided between the cluster counts and the cluster sums.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "value")]
pub enum SplitRule {
    /// The split that minimises the centroid's mean squared error (Su et al. 2016/2017):
    /// Laplace ε_count : ε_sum = ∛(4ρ²Σm_j²) : ∛(d·Δ₁²), Gaussian
    /// ρ_count : ρ_sum = 2ρ : √d, with ρ = 0.225 (see [`super::budget`]).
    MseOptimal,
    /// A fixed share of each iteration's budget (ε for Laplace, zCDP ρ for Gaussian) for the
    /// counts, the rest for the sums. Must lie in (0, 1).
    CountShare(f64),
}

/// Which origin the per-cluster sums are taken about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Coordinates {
    /// Sums of `x − mid`, where `mid` is the centre of the bounds: sensitivity per dimension
    /// `(hi_j − lo_j)/2` (the [-1, 1]^d normalisation of Su et al.). Default.
    Centred,
    /// Sums of the raw coordinates: sensitivity per dimension `max(|lo_j|, |hi_j|)`.
    Raw,
}

/// Everything [`super::fit`] needs besides the data and the random generator.
///
/// Build with [`KMeansParams::new`] and the `with_*` methods; checked by [`super::fit`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KMeansParams {
    /// Number of clusters, 1 ≤ k ≤ n.
    pub k: usize,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Total privacy budget ε (required for the private algorithms, refused for `lloyd`). For
    /// input perturbation it is the ε of each record (local DP).
    pub epsilon: Option<f64>,
    /// δ of the (ε, δ) guarantee (required for `dplloyd-gaussian`, refused otherwise).
    pub delta: Option<f64>,
    /// Number of Lloyd iterations; `None` picks the default of the algorithm
    /// ([`super::default_iterations`]). For `lloyd` and input perturbation it is the maximum
    /// (they stop when converged).
    pub iterations: Option<usize>,
    /// Declared public bounds, one interval per feature.
    pub bounds: Bounds,
    /// Division of each iteration's budget between counts and sums.
    pub split: SplitRule,
    /// Origin of the private sums.
    pub coordinates: Coordinates,
    /// Initial centroids of the private Lloyd variants.
    pub init: Init,
    /// DPLloyd moves a centroid only when its noisy count is at least
    /// `max(1, count_floor × the count noise's scale or σ)`; otherwise the centroid stays (a
    /// post-processing choice, free of privacy cost). 0 gives plain DPLloyd's rule.
    pub count_floor: f64,
    /// k-means++ restarts for the algorithms that run plain Lloyd (`lloyd`, input
    /// perturbation, and k-means on the histogram's cells); the lowest-inertia run is kept.
    pub restarts: usize,
}

impl KMeansParams {
    /// Parameters with the defaults: no budget yet, default iterations
    /// ([`super::default_iterations`]), the MSE-optimal split, centred coordinates, the
    /// histogram initialisation with 30% of the budget ([`DEFAULT_INIT`]), a count floor of
    /// [`DEFAULT_COUNT_FLOOR`], 10 restarts.
    ///
    /// Plain DPLloyd as Su et al. describe it is [`KMeansParams::plain_dplloyd`].
    pub fn new(k: usize, algorithm: Algorithm, bounds: Bounds) -> Self {
        Self {
            k,
            algorithm,
            epsilon: None,
            delta: None,
            iterations: None,
            bounds,
            split: SplitRule::MseOptimal,
            coordinates: Coordinates::Centred,
            init: DEFAULT_INIT,
            count_floor: DEFAULT_COUNT_FLOOR,
            restarts: 10,
        }
    }

    /// Plain DPLloyd (Su et al. 2016) with Laplace noise: sphere-packing initialisation, sums
    /// of raw coordinates (sensitivity `Σ_j max(|lo_j|, |hi_j|)`), the MSE-optimal split, a
    /// centroid kept only when its noisy count is below 1, and `iterations` updates.
    pub fn plain_dplloyd(k: usize, bounds: Bounds, epsilon: f64, iterations: usize) -> Self {
        Self {
            init: Init::SpherePacking,
            coordinates: Coordinates::Raw,
            count_floor: 0.0,
            ..Self::new(k, Algorithm::DpLloyd, bounds)
                .with_epsilon(epsilon)
                .with_iterations(iterations)
        }
    }

    /// With total budget ε.
    pub fn with_epsilon(mut self, epsilon: f64) -> Self {
        self.epsilon = Some(epsilon);
        self
    }

    /// With δ (for `dplloyd-gaussian`).
    pub fn with_delta(mut self, delta: f64) -> Self {
        self.delta = Some(delta);
        self
    }

    /// With a fixed number of iterations.
    pub fn with_iterations(mut self, iterations: usize) -> Self {
        self.iterations = Some(iterations);
        self
    }

    /// With a split rule.
    pub fn with_split(mut self, split: SplitRule) -> Self {
        self.split = split;
        self
    }

    /// With an origin for the private sums.
    pub fn with_coordinates(mut self, coordinates: Coordinates) -> Self {
        self.coordinates = coordinates;
        self
    }

    /// With an initialisation.
    pub fn with_init(mut self, init: Init) -> Self {
        self.init = init;
        self
    }

    /// Checks the parameters against data of `n` records with `d` features.
    ///
    /// # Errors
    /// [`LearnError::InvalidParameter`] for k = 0 or k > n, a missing, non-finite or
    /// non-positive ε, a δ outside (0, 1), a budget given to `lloyd` or a δ given to a pure-ε
    /// algorithm, zero iterations or restarts, a count share outside (0, 1);
    /// [`LearnError::BoundsDimension`] when the bounds do not cover d dimensions.
    pub fn validate(&self, n: usize, d: usize) -> Result<(), LearnError> {
        if self.k == 0 {
            return Err(LearnError::invalid("k", "must be >= 1", self.k));
        }
        if self.k > n {
            return Err(LearnError::invalid(
                "k",
                "must be at most the number of records",
                format!("{} > n = {n}", self.k),
            ));
        }
        self.bounds.check_dims(d)?;
        let name = self.algorithm.name();
        match (self.algorithm.is_private(), self.epsilon) {
            (true, None) => {
                return Err(LearnError::invalid(
                    "epsilon",
                    "is required by a private algorithm",
                    format!("none for {name}"),
                ));
            }
            (true, Some(e)) if !(e.is_finite() && e > 0.0) => {
                return Err(LearnError::invalid("epsilon", "must be finite and > 0", e));
            }
            (false, Some(e)) => {
                return Err(LearnError::invalid(
                    "epsilon",
                    "is not used by the non-private lloyd",
                    e,
                ));
            }
            _ => {}
        }
        match (self.algorithm.needs_delta(), self.delta) {
            (true, None) => {
                return Err(LearnError::invalid(
                    "delta",
                    "is required by dplloyd-gaussian",
                    "none",
                ));
            }
            (true, Some(dl)) if !(dl > 0.0 && dl < 1.0) => {
                return Err(LearnError::invalid("delta", "must be in (0, 1)", dl));
            }
            (false, Some(dl)) => {
                return Err(LearnError::invalid(
                    "delta",
                    "is only used by dplloyd-gaussian",
                    format!("{dl} for {name}"),
                ));
            }
            _ => {}
        }
        match self.iterations {
            Some(0) => return Err(LearnError::invalid("iterations", "must be >= 1", 0)),
            Some(t) if t > super::MAX_ITERATIONS => {
                // The requirement names super::MAX_ITERATIONS (a test checks the two agree).
                return Err(LearnError::invalid(
                    "iterations",
                    "must be at most 10000",
                    t,
                ));
            }
            _ => {}
        }
        if !(self.count_floor.is_finite() && self.count_floor >= 0.0) {
            return Err(LearnError::invalid(
                "count floor",
                "must be finite and >= 0",
                self.count_floor,
            ));
        }
        if self.restarts == 0 {
            return Err(LearnError::invalid("restarts", "must be >= 1", 0));
        }
        if let Init::Histogram { share } = self.init
            && !(share > 0.0 && share < 1.0)
        {
            return Err(LearnError::invalid(
                "init share",
                "must be in (0, 1)",
                share,
            ));
        }
        if let SplitRule::CountShare(s) = self.split
            && !(s > 0.0 && s < 1.0)
        {
            return Err(LearnError::invalid("count share", "must be in (0, 1)", s));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(algorithm: Algorithm) -> KMeansParams {
        KMeansParams::new(3, algorithm, Bounds::uniform(0.0, 1.0, 2).unwrap())
    }

    fn err(p: &KMeansParams) -> String {
        p.validate(10, 2).unwrap_err().to_string()
    }

    #[test]
    fn names_round_trip() {
        for a in Algorithm::all() {
            assert_eq!(a.name().parse::<Algorithm>().unwrap(), a);
        }
        let msg = "dp-lloyd".parse::<Algorithm>().unwrap_err().to_string();
        assert!(
            msg.contains("\"dp-lloyd\"") && msg.contains("dplloyd-gaussian"),
            "{msg}"
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        let mut p = base(Algorithm::DpLloyd).with_epsilon(1.0);
        assert!(p.validate(10, 2).is_ok());
        p.k = 0;
        assert_eq!(err(&p), "k must be >= 1, got 0");
        p.k = 11;
        assert_eq!(
            err(&p),
            "k must be at most the number of records, got 11 > n = 10"
        );
        p.k = 3;
        assert_eq!(
            p.validate(10, 3).unwrap_err().to_string(),
            "bounds cover 2 dimensions, but the data has 3"
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let msg = err(&base(Algorithm::DpLloyd).with_epsilon(bad));
            assert!(
                msg.starts_with("epsilon must be finite and > 0, got "),
                "{msg}"
            );
            assert!(msg.ends_with(&bad.to_string()), "{msg}");
        }
        assert!(err(&base(Algorithm::DpLloyd)).contains("none for dplloyd"));
        assert!(err(&base(Algorithm::Lloyd).with_epsilon(1.0)).contains("non-private"));
        assert_eq!(
            err(&base(Algorithm::DpLloyd).with_epsilon(1.0).with_delta(1e-5)),
            "delta is only used by dplloyd-gaussian, got 0.00001 for dplloyd"
        );
        let g = base(Algorithm::DpLloydGaussian).with_epsilon(1.0);
        assert_eq!(err(&g), "delta is required by dplloyd-gaussian, got none");
        assert_eq!(
            err(&g.clone().with_delta(1.0)),
            "delta must be in (0, 1), got 1"
        );
        assert!(g.with_delta(1e-6).validate(10, 2).is_ok());
        assert_eq!(
            err(&base(Algorithm::DpLloyd)
                .with_epsilon(1.0)
                .with_iterations(0)),
            "iterations must be >= 1, got 0"
        );
        assert_eq!(
            err(&base(Algorithm::DpLloyd)
                .with_epsilon(1.0)
                .with_iterations(1 << 31)),
            "iterations must be at most 10000, got 2147483648"
        );
        let s = base(Algorithm::DpLloyd)
            .with_epsilon(1.0)
            .with_split(SplitRule::CountShare(1.5));
        assert_eq!(err(&s), "count share must be in (0, 1), got 1.5");
        let f = KMeansParams {
            count_floor: f64::NAN,
            ..base(Algorithm::DpLloyd).with_epsilon(1.0)
        };
        assert_eq!(err(&f), "count floor must be finite and >= 0, got NaN");
        let h = base(Algorithm::DpLloyd)
            .with_epsilon(1.0)
            .with_init(Init::Histogram { share: 1.0 });
        assert_eq!(err(&h), "init share must be in (0, 1), got 1");
    }

    #[test]
    fn plain_dplloyd_is_su_et_al_and_defaults_are_the_improved_variant() {
        let b = Bounds::uniform(0.0, 1.0, 2).unwrap();
        let plain = KMeansParams::plain_dplloyd(3, b.clone(), 2.0, 5);
        assert_eq!(
            (plain.init, plain.coordinates, plain.count_floor),
            (Init::SpherePacking, Coordinates::Raw, 0.0)
        );
        assert_eq!(
            (plain.algorithm, plain.epsilon, plain.iterations),
            (Algorithm::DpLloyd, Some(2.0), Some(5))
        );
        let d = KMeansParams::new(3, Algorithm::DpLloyd, b);
        assert_eq!(
            (d.init, d.coordinates, d.count_floor, d.split),
            (
                DEFAULT_INIT,
                Coordinates::Centred,
                DEFAULT_COUNT_FLOOR,
                SplitRule::MseOptimal
            )
        );
    }
}
