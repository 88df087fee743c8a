//! K-fold cross-validation over every record of a source: one model per fold, each tested on
//! its held-out fold, and the ε of releasing all K models.

use dpml_data::Source;
use dpml_learn::crossval::{epsilon_all_folds, k_fold, mean_std};
use dpml_learn::dpsgd::{self, Task, TrainConfig};
use dpml_mechanisms::DpRng;
use serde_json::{Value, json};

use super::recipe::private_needs;
use super::run::{TrainOptions, normalized, train_task_observed};
use super::split::load_all;
use crate::budget::{self, Ledger};
use crate::error::{Error, Result};
use crate::observe::{Event, Observer};
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};
use crate::schema::require_declared;

/// Cross-validates `cfg` (the recipe of `o`) on every record of `source` over `k` folds cut
/// by `o`'s split key (else one drawn from `rng`): the release of the K models' guarantee, the
/// fold accuracies (or regression MSEs) as diagnostics.
///
/// # Errors
/// As [`super::train`]; a usage error for fewer records than folds.
pub fn cross_validate(
    o: &TrainOptions,
    source: &Source,
    cfg: &TrainConfig,
    k: usize,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    ledger: Option<&Ledger>,
) -> Result<Value> {
    let key = o.split.key(rng);
    let opts = o
        .declarations
        .load_options(o.data_dir.as_deref(), o.label_column.as_deref())?;
    let (all, schema) = load_all(source, &opts)?;
    require_declared(&schema, &all, private_needs(cfg, o.task, false))?;
    let cfg = normalized(o, source, &schema, &all, cfg)?;
    if let Some(l) = ledger {
        // K models, each on about (K−1)/K of the records: refused before the first trains.
        let fold_n = all.n - all.n / k.max(1);
        let event = super::charging::planned_event(&cfg, fold_n, "--folds")?.repeated(k as u64);
        budget::check(
            Some(l),
            &budget::accounted("train", source.name(), event, cfg.delta)?,
        )?;
    }
    // Not `with_capacity(k)`: k is checked against the records only when the folds are cut.
    let (mut events, mut mses) = (Vec::new(), Vec::new());
    let cv = k_fold::<Error>(&cfg, &all, k, &key, rng, &mut |i, cfg, train, test, rng| {
        observer.observe(Event::Stage(&format!("fold {}/{k}", i + 1)));
        let outcome = train_task_observed(o.task, cfg, train, Some(test), rng, observer)?;
        events.push(outcome.event.clone());
        mses.extend(outcome.report.test_mse);
        Ok(outcome)
    })?;
    let accountant = dpsgd::accountant(cfg.accountant);
    let epsilon_all_folds = epsilon_all_folds(&events, accountant.as_ref(), cfg.delta)?;
    let balance = match (ledger, events.iter().cloned().collect::<Option<Vec<_>>>()) {
        (Some(l), Some(events)) => {
            let event = dpml_mechanisms::PrivacyEvent::Composed { events };
            let charge = budget::accounted("train", source.name(), event, cfg.delta)?
                .labelled(format!("{k}-fold cross-validation"));
            budget::charge(Some(l), &charge)?
        }
        _ => None,
    };
    let (mean, std) = mean_std(&cv.accuracies);
    let model = PrivacyModel::new(
        neighbouring::ADD_REMOVE,
        &[
            public::FOLD_SIZES,
            public::SCHEMA,
            public::RECIPE,
            public::SPLIT_RULE,
        ],
    );
    let mut release = Release::new(&model);
    release
        .insert("folds", json!(k))
        .insert("epsilon", json!(epsilon_all_folds))
        .insert("epsilon_all_folds", json!(epsilon_all_folds))
        .insert("epsilon_per_model", json!(cv.epsilon()))
        .insert("epsilon_per_fold", json!(cv.epsilons))
        .insert("event_per_fold", json!(events))
        .insert("delta", json!(cfg.delta))
        .insert("accountant", json!(accountant.name()))
        .insert("dataset", json!(source.name()))
        .insert("model", json!(cfg.model))
        .insert("normalize", json!(cfg.normalize))
        .insert("split_key", json!(key.to_string()))
        .insert("fold_sizes", json!(cv.test_sizes))
        .insert(
            "note",
            json!(
                "epsilon = epsilon_all_folds: the guarantee of releasing all K models, each record \
                 being in the training set of K - 1 of them; epsilon_per_model is one model's"
            ),
        )
        .insert("seeded", json!(rng.is_seeded()))
        .insert("task", json!(o.task.name()));
    if o.task == Task::Regression {
        // A regression's score is its test MSE; its "accuracy" (predictions within 0.5 of the
        // label) is not worth a headline.
        let (mse_mean, mse_std) = mean_std(&mses);
        release
            .diagnostic("test_mse_mean", json!(mse_mean))
            .diagnostic("test_mse_std", json!(mse_std))
            .diagnostic("fold_mses", json!(mses));
    } else {
        release
            .diagnostic("test_accuracy_mean", json!(mean))
            .diagnostic("test_accuracy_std", json!(std))
            .diagnostic("fold_accuracies", json!(cv.accuracies));
    }
    if let Some(b) = balance {
        release.insert("ledger", crate::ledger_json::balance(&b));
    }
    Ok(release.into_value())
}
