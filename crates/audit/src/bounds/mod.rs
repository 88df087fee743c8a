//! Statistical bounds for audits: exact binomial confidence intervals, the empirical ε lower
//! bound of a threshold attack, and the bound from one event's rates on members and
//! non-members (attribute inference).

pub mod clopper_pearson;
pub mod epsilon;
pub mod event;

pub use clopper_pearson::{
    Interval, clopper_pearson, clopper_pearson_lower, clopper_pearson_upper,
};
pub use epsilon::{
    DEFAULT_CONFIDENCE, EpsilonBound, EpsilonBoundParams, choose_threshold, epsilon_from_rates,
    epsilon_lower_bound, evaluate_threshold, evaluate_thresholds, split_epsilon_lower_bound,
};
pub use event::{EventBound, EventCount, epsilon_from_event_rates, event_epsilon_lower_bound};
