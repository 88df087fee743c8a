//! A sweep's results: one row per run, metric and fold; their summary per ε; the CSV files.

use std::io::Write;
use std::path::Path;

use dpml_learn::crossval::mean_std;

use super::{Experiment, Job, Metrics};
use crate::error::{Error, Result};

/// One row of results.csv: the run, the metric, the fold and the value.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The run.
    pub job: Job,
    /// The metric.
    pub metric: &'static str,
    /// The cross-validation fold, if any.
    pub fold: Option<usize>,
    /// The value.
    pub value: f64,
}

/// The rows of every run: `runs[i]` is the metrics of `grid[i]`.
pub fn rows(grid: &[Job], runs: Vec<Metrics>) -> Vec<Row> {
    let mut rows = Vec::new();
    for (&job, r) in grid.iter().zip(runs) {
        for (metric, fold, value) in r {
            rows.push(Row {
                job,
                metric,
                fold,
                value,
            });
        }
    }
    rows
}

/// Mean and standard deviation of one metric at one ε (None: the baseline).
pub struct Summary {
    /// The grid point (`None`: the baseline).
    pub epsilon: Option<f64>,
    /// The metric.
    pub metric: &'static str,
    /// Mean over the runs (and folds).
    pub mean: f64,
    /// Standard deviation over the runs (and folds).
    pub std: f64,
    /// Values behind the mean.
    pub n: usize,
}

/// Mean and standard deviation per (ε, metric) over every row: repeats, and folds when the
/// runs cross-validate.
pub fn summarise(rows: &[Row]) -> Vec<Summary> {
    let mut keys: Vec<(Option<f64>, &'static str)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.job.epsilon, r.metric)) {
            keys.push((r.job.epsilon, r.metric));
        }
    }
    keys.into_iter()
        .map(|(epsilon, metric)| {
            let v: Vec<f64> = rows
                .iter()
                .filter(|r| r.job.epsilon == epsilon && r.metric == metric)
                .map(|r| r.value)
                .collect();
            let (mean, std) = mean_std(&v);
            Summary {
                epsilon,
                metric,
                mean,
                std,
                n: v.len(),
            }
        })
        .collect()
}

fn epsilon_label(e: Option<f64>) -> String {
    e.map_or("non-private".into(), |e| e.to_string())
}

/// One line per row; `fold` is empty for runs without cross-validation.
///
/// # Errors
/// A usage error naming the file when it cannot be written.
pub fn write_results(path: &Path, experiment: Experiment, rows: &[Row]) -> Result<()> {
    write_lines(
        path,
        "experiment,epsilon,repeat,fold,metric,value",
        rows.iter().map(|r| {
            format!(
                "{},{},{},{},{},{}",
                experiment.name(),
                epsilon_label(r.job.epsilon),
                r.job.repeat,
                r.fold.map_or(String::new(), |f| f.to_string()),
                r.metric,
                r.value
            )
        }),
    )
}

/// One line per (ε, metric): mean, standard deviation and count.
///
/// # Errors
/// A usage error naming the file when it cannot be written.
pub fn write_summary(path: &Path, summary: &[Summary]) -> Result<()> {
    write_lines(
        path,
        "epsilon,metric,mean,std,n",
        summary.iter().map(|s| {
            format!(
                "{},{},{},{},{}",
                epsilon_label(s.epsilon),
                s.metric,
                s.mean,
                s.std,
                s.n
            )
        }),
    )
}

fn write_lines(path: &Path, header: &str, lines: impl Iterator<Item = String>) -> Result<()> {
    let err = |e: std::io::Error| Error::usage(format!("writing {}: {e}", path.display()));
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    writeln!(f, "{header}").map_err(err)?;
    for line in lines {
        writeln!(f, "{line}").map_err(err)?;
    }
    f.flush().map_err(err)
}
