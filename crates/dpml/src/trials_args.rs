//! The flags of a private search's number of trials, shared by `dpml tune` (`--trials LAW`)
//! and `dpml account` (`--tuning LAW`): the law, its mean `--trials-mean K` and, for the
//! truncated negative binomial, its shape `--eta η` (0: logarithmic, 1: geometric).

use clap::{Args, ValueEnum};
use dpml_mechanisms::Repetitions;

use crate::args;
use crate::error::{CliError, CliResult};

/// Papernot & Steinke's laws of the number of trials.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LawArg {
    /// K ~ Poisson(K̄): K = 0 is possible (then no trial runs).
    Poisson,
    /// K ~ the negative binomial with shape --eta, truncated to K ≥ 1 (η = 0: logarithmic,
    /// η = 1: geometric).
    TruncatedNegativeBinomial,
}

/// `--trials-mean K [--eta η]`.
#[derive(Args, Debug, Clone, Default)]
pub struct TrialsArgs {
    /// Mean number of trials E(K), in [1, 1000]: the number of trials is drawn from the law,
    /// in secret, with this mean.
    #[arg(long, value_name = "K", value_parser = args::finite)]
    pub trials_mean: Option<f64>,
    /// Shape η > −1 of the truncated negative binomial law (0: logarithmic, 1: geometric;
    /// smaller η costs less ε and gives a more spread-out number of trials).
    #[arg(long, value_name = "ETA", value_parser = args::finite)]
    pub eta: Option<f64>,
}

impl TrialsArgs {
    /// The law `law` with these flags' mean and η; `flag` is how the command names the law's
    /// flag (`--trials`, `--tuning`), for messages.
    ///
    /// # Errors
    /// A usage error for a missing mean, an η without the truncated negative binomial (or the
    /// other way round), or parameters out of range.
    pub fn repetitions(&self, law: LawArg, flag: &str) -> CliResult<Repetitions> {
        let mean = self.trials_mean.ok_or_else(|| {
            let name = law.to_possible_value().map(|v| v.get_name().to_string());
            CliError::usage(format!(
                "{flag} {} needs --trials-mean K",
                name.unwrap_or_default()
            ))
        })?;
        let repetitions = match (law, self.eta) {
            (LawArg::Poisson, None) => Repetitions::Poisson { mean },
            (LawArg::Poisson, Some(eta)) => {
                return Err(CliError::usage(format!(
                    "--eta {eta} applies to {flag} truncated-negative-binomial, not poisson"
                )));
            }
            (LawArg::TruncatedNegativeBinomial, Some(eta)) => {
                Repetitions::TruncatedNegativeBinomial { eta, mean }
            }
            (LawArg::TruncatedNegativeBinomial, None) => {
                return Err(CliError::usage(format!(
                    "{flag} truncated-negative-binomial needs --eta (0: logarithmic, 1: geometric)"
                )));
            }
        };
        repetitions.validate().map_err(CliError::usage)
    }

    /// Whether any of these flags was given.
    pub fn any(&self) -> bool {
        self.trials_mean.is_some() || self.eta.is_some()
    }
}
