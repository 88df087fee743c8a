//! Training a model on a data source: the recipe (a preset or the source's default, with the
//! caller's overrides), the keyed train/test split, public normalisation, DP-SGD (optionally
//! on locally perturbed inputs, checkpointed, data-parallel), K-fold cross-validation, and the
//! JSON release of each, its diagnostics kept apart ([`crate::privacy_model`]).

mod charging;
pub mod checkpoint;
pub mod crossval;
pub mod eval;
pub mod recipe;
pub mod run;
pub mod split;

pub use charging::planned_event;
pub use checkpoint::CheckpointOptions;
pub use crossval::cross_validate;
pub use eval::{EvalOptions, eval, presets};
pub use recipe::{
    OptimizerChoice, RecipeOptions, ScheduleChoice, default_recipe, private_needs, recipe,
    task_recipe,
};
pub use run::{
    InputPerturbationOptions, TrainEnd, TrainOptions, train, train_observed, train_task_observed,
    write_log,
};
pub use split::{Loaded, SplitOptions, load_all, load_split, public_normalization};
