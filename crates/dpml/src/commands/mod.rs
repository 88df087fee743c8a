//! One module per command: parse its flags, call the libraries, build the JSON result.

pub mod account;
pub mod calibrate;
pub mod data;
pub mod query;
pub mod release;
pub mod rr;
pub mod schedule;
pub mod tradeoff;
