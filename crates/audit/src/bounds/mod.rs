//! Statistical bounds for audits: exact binomial confidence intervals and the empirical ε lower
//! bound of a threshold attack.

pub mod clopper_pearson;
pub mod epsilon;

pub use clopper_pearson::{
    Interval, clopper_pearson, clopper_pearson_lower, clopper_pearson_upper,
};
pub use epsilon::{
    DEFAULT_CONFIDENCE, EpsilonBound, EpsilonBoundParams, choose_threshold, epsilon_from_rates,
    epsilon_lower_bound, evaluate_threshold, evaluate_thresholds, split_epsilon_lower_bound,
};
