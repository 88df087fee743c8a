//! One module per command: parse its flags, call the libraries, build the JSON result.

pub mod account;
pub mod arch;
pub mod audit;
pub mod audit_scores;
pub mod audit_white_box;
pub mod audit_worst_case;
pub mod bench;
pub mod calibrate;
pub mod checkpoint_args;
pub mod data;
pub mod inspect;
pub mod kmeans;
pub mod label_dp;
pub mod ledger;
pub mod peak;
pub mod predict;
pub mod query;
pub mod release;
pub mod rr;
pub mod schedule;
pub mod sweep;
pub mod sweep_gather;
pub mod sweep_mia;
pub mod tradeoff;
pub mod train;
pub mod tune;
