//! Privacy accounting for dpml: accountants that turn [`PrivacyEvent`]s into (ε, δ), f-DP
//! trade-off curves, noise calibration, and a durable budget ledger.
//!
//! Every accountant states the neighbouring relation it assumes (add/remove one record) and
//! whether its numbers are upper bounds, lower bounds or approximations ([`BoundKind`]).
#![deny(missing_docs)]

pub mod calibrate;
pub mod fdp;
pub mod gdp;
pub mod ledger;
pub mod named;
pub mod pld;
pub mod rdp;

pub use dpml_mechanisms::PrivacyEvent;
pub use gdp::GdpAccountant;
pub use pld::PldAccountant;
pub use rdp::{Conversion, RdpAccountant};

/// What kind of number an accountant reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundKind {
    /// A guaranteed upper bound on the true ε (safe to publish).
    UpperBound,
    /// A guaranteed lower bound on the true ε (shows how tight an upper bound is).
    LowerBound,
    /// An approximation that may fall on either side (e.g. GDP via the central limit theorem,
    /// which can underestimate ε).
    Approximation,
}

/// An accountant: composes privacy events and converts them to (ε, δ).
///
/// Neighbouring relation: add/remove one record.
pub trait Accountant {
    /// Short name used in outputs: "rdp", "pld", "gdp".
    fn name(&self) -> &'static str;
    /// Whether [`Accountant::epsilon`] is an upper bound, a lower bound or an approximation.
    fn bound(&self) -> BoundKind;
    /// ε such that `event` is (ε, δ)-DP, for δ in (0, 1).
    ///
    /// # Errors
    /// [`AccountingError`] for invalid parameters or events this accountant cannot handle.
    fn epsilon(&self, event: &PrivacyEvent, delta: f64) -> Result<f64, AccountingError>;
    /// δ such that `event` is (ε, δ)-DP, for ε ≥ 0.
    ///
    /// # Errors
    /// As [`Accountant::epsilon`].
    fn delta(&self, event: &PrivacyEvent, epsilon: f64) -> Result<f64, AccountingError>;
}

/// Errors from accounting. Messages name the bad value.
#[derive(Debug, thiserror::Error)]
pub enum AccountingError {
    /// A parameter or event field is outside its valid range.
    #[error("{0}")]
    InvalidParameter(String),
    /// The accountant cannot handle this kind of event (the message says which and why).
    #[error("{0}")]
    Unsupported(String),
    /// The budget ledger refused a spend or could not be used.
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
}
