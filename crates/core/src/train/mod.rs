//! Training a model on a data source: the recipe (a preset or the source's default, with the
//! caller's overrides), the keyed train/test split, public normalisation, DP-SGD (optionally
//! on locally perturbed inputs, checkpointed, data-parallel), K-fold cross-validation, and the
//! JSON release of each, its diagnostics kept apart ([`crate::privacy_model`]); and the same
//! training on records already in memory ([`fit()`], the Python estimators).

mod charging;
pub mod checkpoint;
pub mod crossval;
pub mod eval;
pub mod fit;
pub mod recipe;
pub mod run;
pub mod split;

pub use charging::planned_event;
pub use checkpoint::CheckpointOptions;
pub use crossval::cross_validate;
pub use eval::{EvalOptions, eval, presets};
pub use fit::{FitOptions, Fitted, MEMORY_DATASET, fit};
pub use recipe::{
    OptimizerChoice, RecipeOptions, ScheduleChoice, default_help, default_recipe,
    fit_batch_to_data, private_needs, recipe, table_recipe, task_recipe,
};
pub use run::{
    InputPerturbationOptions, TrainEnd, TrainOptions, train, train_observed, train_task_observed,
    write_log,
};
pub use split::{Loaded, SplitOptions, load_all, load_split, public_normalization};
