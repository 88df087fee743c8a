//! `dpml data list|verify|fetch`: what data sets are available, whether their files are intact,
//! and downloading the IDX sets with checksum verification.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde_json::json;

use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::progress::Progress;

/// Data subcommands.
#[derive(Subcommand, Debug)]
pub enum DataCommand {
    /// Each data set: rows, features, classes, and where it was found (or that it is missing).
    List,
    /// Check the SHA-256 of the data files in --data-dir against the known checksums; a file
    /// missing, unreadable or different fails the check.
    Verify {
        /// Only this set's files (mnist or fashion-mnist), e.g. after copying them by hand.
        set: Option<String>,
    },
    /// Download mnist or fashion-mnist, verify SHA-256, and write the files atomically.
    Fetch {
        /// mnist or fashion-mnist.
        name: String,
        /// Destination folder (files go to DIR/NAME/).
        #[arg(long)]
        to: PathBuf,
        /// Base URL of the mirror (default: the usual public mirror of that data set).
        #[arg(long)]
        base_url: Option<String>,
    },
}

/// Run a data subcommand.
pub fn run(cmd: &DataCommand, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    match cmd {
        DataCommand::List => {
            let sets = dpml_data::catalog(data_dir);
            let rows: Vec<_> = sets
                .iter()
                .map(|d| {
                    json!({"name": d.name, "rows": d.rows, "test_rows": d.test_rows, "features": d.features,
                           "classes": d.classes, "location": d.location, "available": d.available,
                           "problem": d.problem})
                })
                .collect();
            out.emit(&json!({ "datasets": rows }));
            Ok(())
        }
        DataCommand::Verify { set } => {
            let dir = data_dir.ok_or_else(|| {
                CliError::usage("no data folder: pass --data-dir DIR or set DPML_DATA_DIR")
            })?;
            // Verifying a folder that is not there would find nothing wrong and exit 0.
            if !dir.is_dir() {
                return Err(CliError::usage(format!(
                    "--data-dir {}: not a folder",
                    dir.display()
                )));
            }
            let checks = dpml_data::verify(dir, set.as_deref())?;
            let files: Vec<_> = checks
                .iter()
                .map(|c| {
                    json!({"path": c.path, "status": format!("{:?}", c.status).to_lowercase(),
                           "expected_sha256": c.expected_sha256, "actual_sha256": c.actual_sha256,
                           "error": c.error})
                })
                .collect();
            use dpml_data::CheckStatus::{Mismatch, Missing, Ok as Good, Unreadable};
            let with = |wanted: &[dpml_data::CheckStatus]| -> Vec<&str> {
                checks
                    .iter()
                    .filter(|c| wanted.contains(&c.status))
                    .map(|c| c.path.as_str())
                    .collect()
            };
            let (bad, missing, ok) = (
                with(&[Mismatch, Unreadable]),
                with(&[Missing]),
                with(&[Good]).len(),
            );
            let failed = !bad.is_empty() || !missing.is_empty();
            // With --json a failed check prints only the error object (one object on stdout).
            if !failed || !out.json {
                out.emit(&json!({ "files": files, "ok": ok, "mismatched": bad.len(),
                                  "missing": missing.len() }));
            }
            let mut problems = Vec::new();
            if !bad.is_empty() {
                problems.push(format!("checksum mismatch: {}", bad.join(", ")));
            }
            if !missing.is_empty() {
                problems.push(format!("missing: {}", missing.join(", ")));
            }
            if problems.is_empty() {
                Ok(())
            } else {
                Err(CliError::usage(problems.join("; ")))
            }
        }
        DataCommand::Fetch { name, to, base_url } => {
            let bar = Progress::new(0, name, "byte", false);
            let mut progress = |p: dpml_data::FetchProgress| {
                bar.set_length(p.bytes_total);
                bar.set_position(p.bytes_done);
                bar.set_message(format!("{}/{} {}", p.index, p.count, p.file));
                let state = match p.stage {
                    dpml_data::FetchStage::Downloading => return,
                    dpml_data::FetchStage::Verified => "downloaded and verified",
                    dpml_data::FetchStage::AlreadyPresent => "already present",
                };
                bar.line(
                    &format!("file {}/{} {} {state}", p.index, p.count, p.file),
                    None,
                    "",
                );
            };
            let files = dpml_data::fetch(name, to, base_url.as_deref(), &mut progress)?;
            bar.finish_and_clear();
            out.emit(&json!({ "dataset": name, "files": files, "verified": true }));
            Ok(())
        }
    }
}
