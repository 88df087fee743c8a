//! Input checks shared by the attack and metric modules, so every entry point rejects bad
//! values with the same, named errors.

use crate::error::{AuditError, Result};

/// Rejects an empty slice and any NaN or infinite entry.
pub(crate) fn finite_nonempty(what: &'static str, values: &[f64]) -> Result<()> {
    if values.is_empty() {
        return Err(AuditError::Empty { what });
    }
    finite(what, values)
}

/// Rejects any NaN or infinite entry (an empty slice passes).
pub(crate) fn finite(what: &'static str, values: &[f64]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(AuditError::NonFinite {
            what,
            index,
            value: values[index],
        }),
        None => Ok(()),
    }
}

/// A confidence level strictly between 0 and 1.
pub(crate) fn confidence(value: f64) -> Result<()> {
    open_unit("confidence", value)
}

/// A value strictly between 0 and 1 (NaN rejected).
pub(crate) fn open_unit(name: &'static str, value: f64) -> Result<()> {
    if value > 0.0 && value < 1.0 {
        Ok(())
    } else {
        Err(AuditError::OutOfRange {
            name,
            range: "(0, 1)",
            value,
        })
    }
}

/// δ of an (ε, δ) guarantee: 0 ≤ δ < 1 (NaN rejected).
pub(crate) fn delta(value: f64) -> Result<()> {
    if (0.0..1.0).contains(&value) {
        Ok(())
    } else {
        Err(AuditError::OutOfRange {
            name: "delta",
            range: "[0, 1)",
            value,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_value() {
        let e = finite_nonempty("member scores", &[0.0, f64::NAN]).unwrap_err();
        assert_eq!(e.to_string(), "member scores[1] must be finite, got NaN");
        let e = finite_nonempty("member scores", &[]).unwrap_err();
        assert!(e.to_string().contains("member scores is empty"), "{e}");
        assert!(confidence(1.0).unwrap_err().to_string().contains("got 1"));
        assert!(delta(f64::NAN).unwrap_err().to_string().contains("got NaN"));
        assert!(delta(0.0).is_ok() && confidence(0.95).is_ok());
    }
}
