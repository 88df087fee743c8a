//! Parameter checks shared by the RDP, GDP, f-DP and calibration modules.
//!
//! Each check returns the value on success and an [`AccountingError::InvalidParameter`] whose
//! message names the parameter and its bad value (NaN included) otherwise.

use crate::AccountingError;

fn invalid(what: &str, rule: &str, value: impl std::fmt::Display) -> AccountingError {
    AccountingError::InvalidParameter(format!("{what} must be {rule}, got {value}"))
}

/// `value` must be finite and > 0.
pub(crate) fn positive(what: &str, value: f64) -> Result<f64, AccountingError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(invalid(what, "finite and > 0", value))
    }
}

/// `value` must be finite and ≥ 0.
pub(crate) fn non_negative(what: &str, value: f64) -> Result<f64, AccountingError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(invalid(what, "finite and >= 0", value))
    }
}

/// `value` must be ≥ 0 (+∞ allowed, NaN not).
pub(crate) fn non_negative_or_infinite(what: &str, value: f64) -> Result<f64, AccountingError> {
    if value >= 0.0 {
        Ok(value)
    } else {
        Err(invalid(what, ">= 0", value))
    }
}

/// A δ of an (ε, δ) question: in the open interval (0, 1).
pub(crate) fn delta(value: f64) -> Result<f64, AccountingError> {
    if value > 0.0 && value < 1.0 {
        Ok(value)
    } else {
        Err(invalid("delta", "in (0, 1)", value))
    }
}

/// A probability in the closed interval [0, 1].
pub(crate) fn probability(what: &str, value: f64) -> Result<f64, AccountingError> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(invalid(what, "in [0, 1]", value))
    }
}

/// A Poisson sampling rate q in (0, 1].
pub(crate) fn sampling_rate(value: f64) -> Result<f64, AccountingError> {
    if value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(invalid("sampling_rate", "in (0, 1]", value))
    }
}

/// A repetition count (steps, self-composition count): ≥ 1.
pub(crate) fn count(what: &str, value: u64) -> Result<u64, AccountingError> {
    if value >= 1 {
        Ok(value)
    } else {
        Err(invalid(what, ">= 1", value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_parameter_and_value() {
        let e = positive("noise_multiplier", f64::NAN)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "noise_multiplier must be finite and > 0, got NaN");
        let e = delta(1.0).unwrap_err().to_string();
        assert_eq!(e, "delta must be in (0, 1), got 1");
        let e = sampling_rate(0.0).unwrap_err().to_string();
        assert!(e.contains("sampling_rate") && e.contains("got 0"), "{e}");
        assert!(
            count("steps", 0)
                .unwrap_err()
                .to_string()
                .contains("steps must be >= 1")
        );
        assert!(non_negative("epsilon", -1.0).is_err());
        assert!(non_negative_or_infinite("mu", f64::INFINITY).is_ok());
        assert!(non_negative_or_infinite("mu", f64::NAN).is_err());
        assert!(probability("alpha", 1.0).is_ok() && probability("alpha", 1.1).is_err());
        assert!(positive("sigma", f64::INFINITY).is_err());
    }
}
