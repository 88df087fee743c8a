//! Privacy costs as data (design invariant 1).
//!
//! Every private computation in dpml returns a [`PrivacyEvent`] describing exactly what it did
//! in privacy terms; accountants (in `dpml-accounting`) turn events into ε, δ. Noise parameters
//! are stated relative to the sensitivity (noise multipliers), as in Google's `dp_accounting`.
//! The neighbouring relation is add/remove-one record unless a learner says otherwise.

use serde::{Deserialize, Serialize};

/// What a private computation did, in the vocabulary accountants understand.
///
/// Serialised with a `"type"` tag in snake case, e.g.
/// `{"type": "gaussian", "noise_multiplier": 1.1}` or
/// `{"type": "self_composed", "count": 100, "event": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum PrivacyEvent {
    /// Laplace noise of scale `noise_multiplier · Δ₁` on a query of L1 sensitivity Δ₁
    /// (pure ε = 1 / noise_multiplier).
    Laplace {
        /// Scale divided by the L1 sensitivity.
        noise_multiplier: f64,
    },
    /// Gaussian noise of standard deviation `noise_multiplier · Δ₂` on a query of L2
    /// sensitivity Δ₂.
    Gaussian {
        /// Standard deviation divided by the L2 sensitivity.
        noise_multiplier: f64,
    },
    /// Discrete Laplace noise with scale `scale` (P(k) ∝ exp(−|k|/scale)) on an integer query
    /// of sensitivity `sensitivity`.
    DiscreteLaplace {
        /// The scale t of the discrete Laplace distribution.
        scale: f64,
        /// The integer L1 sensitivity.
        sensitivity: u64,
    },
    /// Discrete Gaussian noise with parameter `sigma` (P(k) ∝ exp(−k²/2σ²)) on an integer
    /// query of sensitivity `sensitivity`.
    DiscreteGaussian {
        /// The σ of the discrete Gaussian.
        sigma: f64,
        /// The integer L2 sensitivity.
        sensitivity: u64,
    },
    /// k-ary randomized response: the true category with probability
    /// e^ε / (e^ε + k − 1), else each other category with probability 1 / (e^ε + k − 1).
    RandomizedResponse {
        /// The ε of one response (ln 3 for the fair-coin survey).
        epsilon: f64,
        /// The number of categories k ≥ 2.
        categories: u32,
    },
    /// A black-box (ε, δ)-DP step.
    EpsilonDelta {
        /// ε ≥ 0.
        epsilon: f64,
        /// δ in [0, 1).
        delta: f64,
    },
    /// `event` applied to a Poisson subsample: each record included independently with
    /// probability `sampling_rate`.
    PoissonSampled {
        /// q in (0, 1].
        sampling_rate: f64,
        /// The mechanism run on the subsample.
        event: Box<PrivacyEvent>,
    },
    /// `event` repeated `count` times, adaptively.
    SelfComposed {
        /// The repeated event.
        event: Box<PrivacyEvent>,
        /// How many times, ≥ 1.
        count: u64,
    },
    /// A sequence of events, composed adaptively.
    Composed {
        /// The events, in order.
        events: Vec<PrivacyEvent>,
    },
    /// A release whose guarantee is the worst of `events`' guarantees: one of them picked at
    /// random independently of the data (a search trial's drawn hyperparameters decide which,
    /// and the pick may be released), or each run on its own part of the data where a record's
    /// part depends on that record alone (a trial's training split and its validation split),
    /// so that neighbouring data sets differ in one part only.
    WorstOf {
        /// The events (at least one).
        events: Vec<PrivacyEvent>,
    },
    /// `event` run K times, K drawn from `repetitions` (secret), with only the best output
    /// released: a private hyperparameter search (Papernot & Steinke 2022). Accounted by the
    /// RDP accountant alone.
    RepeatAndSelect {
        /// The law of the number of runs K.
        repetitions: crate::Repetitions,
        /// One run, including the noisy score it is selected by.
        event: Box<PrivacyEvent>,
    },
    /// `event` run K times, K drawn from `repetitions` independently of the data, with every
    /// run's output released (and so K): a private hyperparameter search that publishes all
    /// its trials. Accounted by the RDP accountant alone (composition over the random K).
    RepeatAndReleaseAll {
        /// The law of the number of runs K.
        repetitions: crate::Repetitions,
        /// One run, including its noisy score.
        event: Box<PrivacyEvent>,
    },
}

impl PrivacyEvent {
    /// The event's type tag as written in JSON (`"laplace"`, `"poisson_sampled"`, …), for
    /// messages.
    pub fn kind(&self) -> &'static str {
        match self {
            PrivacyEvent::Laplace { .. } => "laplace",
            PrivacyEvent::Gaussian { .. } => "gaussian",
            PrivacyEvent::DiscreteLaplace { .. } => "discrete_laplace",
            PrivacyEvent::DiscreteGaussian { .. } => "discrete_gaussian",
            PrivacyEvent::RandomizedResponse { .. } => "randomized_response",
            PrivacyEvent::EpsilonDelta { .. } => "epsilon_delta",
            PrivacyEvent::PoissonSampled { .. } => "poisson_sampled",
            PrivacyEvent::SelfComposed { .. } => "self_composed",
            PrivacyEvent::Composed { .. } => "composed",
            PrivacyEvent::WorstOf { .. } => "worst_of",
            PrivacyEvent::RepeatAndSelect { .. } => "repeat_and_select",
            PrivacyEvent::RepeatAndReleaseAll { .. } => "repeat_and_release_all",
        }
    }

    /// `self` repeated `count` times.
    pub fn repeated(self, count: u64) -> Self {
        PrivacyEvent::SelfComposed {
            event: Box::new(self),
            count,
        }
    }

    /// `self` on a Poisson subsample with rate `q`.
    pub fn poisson_sampled(self, q: f64) -> Self {
        PrivacyEvent::PoissonSampled {
            sampling_rate: q,
            event: Box::new(self),
        }
    }

    /// The DP-SGD event: `steps` Poisson-subsampled Gaussian steps.
    pub fn dp_sgd(noise_multiplier: f64, sampling_rate: f64, steps: u64) -> Self {
        PrivacyEvent::Gaussian { noise_multiplier }
            .poisson_sampled(sampling_rate)
            .repeated(steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_with_type_tags() {
        let e = PrivacyEvent::Composed {
            events: vec![
                PrivacyEvent::Laplace {
                    noise_multiplier: 2.0,
                }
                .repeated(3),
                PrivacyEvent::dp_sgd(1.1, 0.004, 100),
            ],
        };
        let s = serde_json::to_string(&e).unwrap();
        assert!(s.contains("\"type\":\"self_composed\""), "{s}");
        let back: PrivacyEvent = serde_json::from_str(&s).unwrap();
        assert!(
            s.starts_with(&format!("{{\"type\":\"{}\"", e.kind())),
            "{s}"
        );
        assert_eq!(back, e);
        assert!(serde_json::from_str::<PrivacyEvent>(r#"{"type":"cauchy","scale":1}"#).is_err());
    }
}
