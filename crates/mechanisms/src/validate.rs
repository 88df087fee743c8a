//! Parameter checks shared by every mechanism. Each check returns
//! [`MechanismError::InvalidParameter`] with a message that names the parameter and its value.

use crate::MechanismError;

/// An [`MechanismError::InvalidParameter`] with the given message.
pub(crate) fn invalid(message: impl Into<String>) -> MechanismError {
    MechanismError::InvalidParameter(message.into())
}

/// ε must be finite and > 0.
pub(crate) fn epsilon(epsilon: f64) -> Result<f64, MechanismError> {
    if epsilon.is_finite() && epsilon > 0.0 {
        Ok(epsilon)
    } else {
        Err(invalid(format!(
            "epsilon must be finite and > 0, got {epsilon}"
        )))
    }
}

/// δ must lie in the open interval (0, 1).
pub(crate) fn delta(delta: f64) -> Result<f64, MechanismError> {
    if delta > 0.0 && delta < 1.0 {
        Ok(delta)
    } else {
        Err(invalid(format!("delta must be in (0, 1), got {delta}")))
    }
}

/// A real sensitivity must be finite and > 0.
pub(crate) fn sensitivity(sensitivity: f64) -> Result<f64, MechanismError> {
    if sensitivity.is_finite() && sensitivity > 0.0 {
        Ok(sensitivity)
    } else {
        Err(invalid(format!(
            "sensitivity must be finite and > 0, got {sensitivity}"
        )))
    }
}

/// An integer sensitivity must be ≥ 1 and at most 2^53 (exact as an `f64`).
pub(crate) fn integer_sensitivity(sensitivity: u64) -> Result<u64, MechanismError> {
    if (1..=1u64 << 53).contains(&sensitivity) {
        Ok(sensitivity)
    } else {
        Err(invalid(format!(
            "sensitivity must be in 1..=2^53, got {sensitivity}"
        )))
    }
}

/// Clamping bounds must be finite with `lo < hi` and a finite width `hi − lo`.
pub(crate) fn bounds(lo: f64, hi: f64) -> Result<(f64, f64), MechanismError> {
    if !lo.is_finite() || !hi.is_finite() {
        return Err(invalid(format!("bounds must be finite, got [{lo}, {hi}]")));
    }
    if lo >= hi {
        return Err(invalid(format!(
            "bounds must satisfy lo < hi, got [{lo}, {hi}]"
        )));
    }
    if !(hi - lo).is_finite() {
        return Err(invalid(format!(
            "bounds [{lo}, {hi}] are too wide: hi - lo overflows"
        )));
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<impl std::fmt::Debug, MechanismError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_bad_value() {
        assert_eq!(
            message(epsilon(f64::NAN)),
            "epsilon must be finite and > 0, got NaN"
        );
        assert!(message(epsilon(0.0)).contains("got 0"));
        assert!(message(epsilon(-1.0)).contains("got -1"));
        assert!(message(epsilon(f64::INFINITY)).contains("got inf"));
        assert!(message(delta(0.0)).contains("delta must be in (0, 1), got 0"));
        assert!(message(delta(1.0)).contains("got 1"));
        assert!(message(delta(f64::NAN)).contains("got NaN"));
        assert!(message(sensitivity(0.0)).contains("sensitivity must be finite and > 0, got 0"));
        assert!(message(sensitivity(f64::NAN)).contains("NaN"));
        assert!(message(integer_sensitivity(0)).contains("got 0"));
        assert!(message(bounds(2.0, 1.0)).contains("lo < hi, got [2, 1]"));
        assert!(message(bounds(f64::NEG_INFINITY, 1.0)).contains("finite"));
        assert!(message(bounds(-f64::MAX, f64::MAX)).contains("too wide"));
        assert!(epsilon(0.5).is_ok() && delta(1e-6).is_ok() && bounds(-1.0, 1.0).is_ok());
    }
}
