//! Local against central DP under attack (Bernau et al.): at each ε of a grid, audit a model
//! trained with DP-SGD (central DP) and a model trained on locally perturbed inputs (local DP,
//! ε per record), plus one non-private baseline, with the loss attack and LiRA; every point
//! sets the attacks' empirical ε lower bounds beside the ε the mechanism guarantees.
//!
//! - [`mechanism`]: the three ways of training and the local-DP inputs.
//! - [`point`]: one audited point and its CSV rows.
//!
//! Each point is one [`run_audit_with`] of the driver: the reference models of LiRA are
//! trained with the same mechanism at the same ε (local DP: each on its own fresh noise), and
//! the attacks query the records as drawn.
//!
//! # Privacy
//! An evaluation: the accuracies and attack metrics are measured on the data without noise;
//! nothing here is a private release.
//!
//! # Citations
//! D. Bernau, P.-W. Grassal, J. Robl, F. Kerschbaum, "Assessing differentially private deep
//! learning with membership inference", 2019; S. Yeom et al., CSF 2018 (loss attack);
//! N. Carlini et al., IEEE S&P 2022 (LiRA).

pub mod mechanism;
pub mod point;

use dpml_data::Dataset;
use dpml_mechanisms::DpRng;

pub use mechanism::{LocalInputs, Mechanism};
pub use point::{ATTACKS, AttackSummary, CSV_HEADER, MiaPoint};

use crate::driver::error::Result;
use crate::driver::{
    AsDrawn, AttackKind, AuditConfig, DriverError, ModelReady, Spread, TrainingInputs,
    run_audit_with,
};
use crate::error::AuditError;

/// What a sweep runs.
#[derive(Debug, Clone, PartialEq)]
pub struct MiaSweepConfig {
    /// The audit of each point: its recipe (whose privacy is set per mechanism), N, K, the
    /// confidence, threads and seed. The attacks are always the loss attack and LiRA.
    pub audit: AuditConfig,
    /// The ε grid: each is DP-SGD's target ε and local DP's ε per record.
    pub epsilons: Vec<f64>,
    /// Public range of every feature, for the local-DP noise.
    pub feature_ranges: Vec<(f64, f64)>,
}

impl MiaSweepConfig {
    /// The audit settings of every point, checked against `data`.
    ///
    /// # Errors
    /// [`DriverError::Invalid`] for an empty grid, an ε that is not finite and > 0, or
    /// audit settings that [`AuditConfig::validate_for`] refuses.
    pub fn validate_for(&self, data: &Dataset) -> Result<AuditConfig> {
        if self.epsilons.is_empty() {
            return Err(DriverError::Invalid(
                "epsilons is empty; give at least one ε".into(),
            ));
        }
        if let Some(e) = self.epsilons.iter().find(|e| !(e.is_finite() && **e > 0.0)) {
            return Err(DriverError::Invalid(format!(
                "epsilons must be finite and > 0, got {e}"
            )));
        }
        let audit = AuditConfig {
            attacks: vec![AttackKind::Loss, AttackKind::Lira],
            ..self.audit.clone()
        };
        audit.validate_for(data)?;
        Ok(audit)
    }

    /// Points of the sweep: the baseline, then DP-SGD and local DP at each ε.
    pub fn points(&self) -> Vec<(Mechanism, Option<f64>)> {
        std::iter::once((Mechanism::NonPrivate, None))
            .chain(
                self.epsilons
                    .iter()
                    .flat_map(|&e| [(Mechanism::DpSgd, Some(e)), (Mechanism::LocalDp, Some(e))]),
            )
            .collect()
    }

    /// Models the sweep trains: (1 + K) per point.
    pub fn models_needed(&self) -> usize {
        self.points().len() * (1 + self.audit.reference_models)
    }
}

/// Runs every point of `cfg` on `data` (the population of the audits), one after the other,
/// each audit's models side by side on the configured threads (divided among processes by
/// `spread`); `ready` is called after each model. Returns the points on the reporting process
/// (`None` on the others).
///
/// # Errors
/// As [`MiaSweepConfig::validate_for`] (all checked before anything trains) and
/// [`run_audit_with`].
pub fn run_mia_sweep(
    cfg: &MiaSweepConfig,
    data: &Dataset,
    rng: &mut DpRng,
    ready: &(dyn Fn(&ModelReady) + Sync),
    spread: &dyn Spread,
) -> Result<Option<Vec<MiaPoint>>> {
    let audit = cfg.validate_for(data)?;
    let mut points = Vec::new();
    for (i, (mechanism, epsilon)) in cfg.points().into_iter().enumerate() {
        let point_cfg = AuditConfig {
            recipe: mechanism.recipe(&audit.recipe, epsilon),
            // Each point's models get their own seeds: the driver derives them from the seed
            // and the model's role, which repeat from point to point.
            seed: audit
                .seed
                .map(|s| s ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            ..audit.clone()
        };
        let mut point_rng = rng.fork();
        let local = match (mechanism, epsilon) {
            (Mechanism::LocalDp, Some(e)) => Some(LocalInputs::new(cfg.feature_ranges.clone(), e)),
            _ => None,
        };
        let inputs: &dyn TrainingInputs = match &local {
            Some(l) => l,
            None => &AsDrawn,
        };
        let audited = run_audit_with(&point_cfg, data, &mut point_rng, ready, spread, inputs);
        let Some(report) = audited.map_err(|e| diverged(e, mechanism, epsilon))? else {
            return Ok(None);
        };
        let accountant = match mechanism {
            Mechanism::NonPrivate => None,
            Mechanism::DpSgd => report.epsilon_theoretical,
            Mechanism::LocalDp => local.as_ref().and_then(LocalInputs::epsilon_per_record),
        };
        points.push(MiaPoint::new(mechanism, epsilon, accountant, &report));
    }
    Ok(Some(points))
}

/// `e` as [`DriverError::Diverged`] naming the point when it is a non-finite model output
/// (a diverged training run: a fixed seed gives it again, so the whole sweep stops with the
/// point named rather than a bare "logits must be finite" that reads like a bad input).
fn diverged(e: DriverError, mechanism: Mechanism, epsilon: Option<f64>) -> DriverError {
    match e {
        DriverError::Audit(AuditError::NonFinite { .. }) => DriverError::Diverged {
            point: format!(
                "{} at {}",
                mechanism.name(),
                epsilon.map_or("no privacy".into(), |e| format!("epsilon = {e}"))
            ),
            message: format!(
                "training diverged ({e}); try a smaller --learning-rate or --optimizer adam"
            ),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests;
