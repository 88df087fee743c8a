//! (in progress)

/// Errors from the budget ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// Placeholder.
    #[error("{0}")]
    Other(String),
}
