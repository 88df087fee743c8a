//! Saving and loading trained models with their input transform.
//!
//! The file is the engine's safetensors file ([`dpml_nn::io`]: PyTorch-named F32 tensors and
//! the architecture as JSON metadata), with one more metadata entry, [`INPUT_KEY`], holding the
//! [`InputTransform`] as JSON, so `dpml eval` normalises records exactly as training did. Files
//! without the entry load with the identity transform.
//!
//! A model saved with [`save_with_facts`] also holds its privacy facts ([`ModelFacts`]) as JSON
//! under [`FACTS_KEY`]. Files without that entry (written before dpml recorded it, or by
//! another tool) still load; their guarantee is unknown.
//!
//! Tensor names are those of a PyTorch `nn.Sequential` state dict: `"{i}.weight"` and
//! `"{i}.bias"`, where `i` is the layer's index in the architecture, counting the layers
//! without parameters (Flatten, ReLU, Tanh, MaxPool2d) too, in PyTorch's layout (Linear
//! `[out, in]`, Conv2d `[out, in, k, k]`).

use std::collections::HashMap;
use std::path::Path;

use dpml_nn::{NnError, Sequential};
use safetensors::SafeTensors;

use super::error::Result;
use super::normalize::{InputTransform, check_ranges};
use crate::model_facts::ModelFacts;

/// Metadata key of the input transform.
pub const INPUT_KEY: &str = "dpml_input_transform";

/// Metadata key of the privacy facts ([`ModelFacts`] as JSON).
pub const FACTS_KEY: &str = "dpml_privacy";

/// A model read back from a file, with what the file says about it.
#[derive(Debug)]
pub struct SavedModel {
    /// The model.
    pub model: Sequential,
    /// The input transform it expects.
    pub input: InputTransform,
    /// Its privacy facts; `None` when the file does not record them (unknown guarantee).
    pub facts: Option<ModelFacts>,
}

fn io_err(what: impl std::fmt::Display) -> NnError {
    NnError::Io(what.to_string())
}

/// The model and its input transform as safetensors bytes.
///
/// # Errors
/// [`super::DpSgdError::Nn`] ([`NnError::Io`]) if serialisation fails.
pub fn to_bytes(model: &Sequential, input: &InputTransform) -> Result<Vec<u8>> {
    to_bytes_with_facts(model, input, None)
}

/// As [`to_bytes`], with the privacy `facts` under [`FACTS_KEY`] when given.
///
/// # Errors
/// As [`to_bytes`].
pub fn to_bytes_with_facts(
    model: &Sequential,
    input: &InputTransform,
    facts: Option<&ModelFacts>,
) -> Result<Vec<u8>> {
    let bytes = dpml_nn::io::to_bytes(model)?;
    let (_, meta) = SafeTensors::read_metadata(&bytes).map_err(io_err)?;
    let mut info: HashMap<String, String> = meta.metadata().clone().unwrap_or_default();
    info.insert(
        INPUT_KEY.into(),
        serde_json::to_string(input).map_err(io_err)?,
    );
    if let Some(f) = facts {
        info.insert(FACTS_KEY.into(), serde_json::to_string(f).map_err(io_err)?);
    }
    let tensors = SafeTensors::deserialize(&bytes).map_err(io_err)?;
    Ok(safetensors::serialize(tensors.tensors(), Some(info)).map_err(io_err)?)
}

/// Rebuilds a model and its input transform from bytes written by [`to_bytes`] (or by
/// [`dpml_nn::io::to_bytes`], giving the identity transform).
///
/// # Errors
/// [`super::DpSgdError::Nn`] for unreadable bytes, a bad architecture or tensor, or a bad
/// input-transform entry (named in the message).
pub fn from_bytes(bytes: &[u8]) -> Result<(Sequential, InputTransform)> {
    from_bytes_with_facts(bytes).map(|s| (s.model, s.input))
}

/// As [`from_bytes`], with the privacy facts the file records (`None` without a
/// [`FACTS_KEY`] entry).
///
/// # Errors
/// As [`from_bytes`]; also a [`FACTS_KEY`] entry that is not valid facts JSON (named).
pub fn from_bytes_with_facts(bytes: &[u8]) -> Result<SavedModel> {
    let model = dpml_nn::io::from_bytes(bytes)?;
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(io_err)?;
    let entry = |key: &str| meta.metadata().as_ref().and_then(|m| m.get(key));
    let facts = match entry(FACTS_KEY) {
        None => None,
        Some(json) => {
            let facts = serde_json::from_str::<ModelFacts>(json)
                .map_err(|e| io_err(format!("bad {FACTS_KEY:?} entry: {e}")))?;
            let outputs: usize = model.output_shape().iter().product();
            if let Some(why) = contradiction(&facts, outputs) {
                return Err(io_err(format!("bad {FACTS_KEY:?} entry: {why}")).into());
            }
            Some(facts)
        }
    };
    let input = match entry(INPUT_KEY) {
        None => InputTransform::IDENTITY,
        Some(json) => {
            let t: InputTransform = serde_json::from_str(json)
                .map_err(|e| io_err(format!("bad {INPUT_KEY:?} entry {json:?}: {e}")))?;
            if !(t.shift.is_finite() && t.scale.is_finite() && t.scale > 0.0) {
                return Err(io_err(format!(
                    "bad {INPUT_KEY:?} entry {json:?}: scale must be > 0"
                ))
                .into());
            }
            if let Some(k) = t.features() {
                let inputs: usize = model.input_shape().iter().product();
                check_ranges(&t.ranges)
                    .map_err(|e| io_err(format!("bad {INPUT_KEY:?} entry {json:?}: {e}")))?;
                if k != inputs {
                    return Err(io_err(format!(
                        "bad {INPUT_KEY:?} entry: {k} feature ranges for a model of {inputs} inputs"
                    ))
                    .into());
                }
            }
            t
        }
    };
    Ok(SavedModel {
        model,
        input,
        facts,
    })
}

/// Writes the model and its input transform to `path`.
///
/// # Errors
/// [`super::DpSgdError::Nn`] naming the path when writing fails.
pub fn save(path: &Path, model: &Sequential, input: &InputTransform) -> Result<()> {
    save_with_facts(path, model, input, None)
}

/// Writes the model, its input transform and its privacy `facts` to `path`: what a model a
/// user keeps should carry.
///
/// # Errors
/// As [`save`].
pub fn save_with_facts(
    path: &Path,
    model: &Sequential,
    input: &InputTransform,
    facts: Option<&ModelFacts>,
) -> Result<()> {
    std::fs::write(path, to_bytes_with_facts(model, input, facts)?)
        .map_err(|e| io_err(format!("{}: {e}", path.display())))?;
    Ok(())
}

/// Why a file's facts contradict its weights (edited by hand): a regression model has one
/// output, a classifier one per class, each class named once. A reordered or shortened class
/// list would silently change what each of its answers means.
fn contradiction(facts: &ModelFacts, outputs: usize) -> Option<String> {
    use crate::label_dp::Task;
    match (facts.task, &facts.classes) {
        (Task::Regression, _) if outputs != 1 => Some(format!(
            "task regression, but the model has {outputs} outputs"
        )),
        (Task::Classification, Some(classes)) if classes.len() != outputs => Some(format!(
            "{} classes, but the model has {outputs} outputs",
            classes.len()
        )),
        (_, Some(classes)) => classes
            .iter()
            .enumerate()
            .find(|(i, c)| classes[..*i].contains(c))
            .map(|(_, c)| format!("class {c:?} is listed twice")),
        _ => None,
    }
}

/// Reads a model written by [`save`].
///
/// # Errors
/// [`super::DpSgdError::Nn`] naming the path when reading fails; otherwise as [`from_bytes`].
pub fn load(path: &Path) -> Result<(Sequential, InputTransform)> {
    load_saved(path).map(|s| (s.model, s.input))
}

/// Reads a model with its privacy facts (see [`from_bytes_with_facts`]).
///
/// # Errors
/// As [`load`]; also a bad [`FACTS_KEY`] entry.
pub fn load_saved(path: &Path) -> Result<SavedModel> {
    // The bytes' own errors do not know the file: name it, as every refusal must.
    from_bytes_with_facts(&dpml_nn::io::read_file(path)?).map_err(|e| {
        let why = match e {
            super::DpSgdError::Nn(NnError::Io(m)) => m,
            other => other.to_string(),
        };
        io_err(format!("{}: {why}", path.display())).into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpml_mechanisms::DpRng;
    use dpml_nn::ModelSpec;

    #[test]
    fn transform_round_trips_and_plain_files_load_as_identity() {
        let spec = ModelSpec::named("logreg", &[3], 2, &[]).unwrap();
        let m = Sequential::new(spec, &mut DpRng::seeded(1)).unwrap();
        let t = InputTransform {
            shift: 0.5,
            scale: 2.0,
            ..InputTransform::IDENTITY
        };
        let (back, bt) = from_bytes(&to_bytes(&m, &t).unwrap()).unwrap();
        assert_eq!(bt, t);
        let ranges = InputTransform {
            ranges: vec![(0.0, 1.0), (2.0, 4.0), (-1.0, 1.0)],
            ..InputTransform::IDENTITY
        };
        assert_eq!(
            from_bytes(&to_bytes(&m, &ranges).unwrap()).unwrap().1,
            ranges
        );
        let wrong = InputTransform {
            ranges: vec![(0.0, 1.0)],
            ..InputTransform::IDENTITY
        };
        let msg = from_bytes(&to_bytes(&m, &wrong).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("1 feature ranges for a model of 3 inputs"),
            "{msg}"
        );
        assert_eq!(back.params()[0].value, m.params()[0].value);
        let (_, plain) = from_bytes(&dpml_nn::io::to_bytes(&m).unwrap()).unwrap();
        assert_eq!(plain, InputTransform::IDENTITY);
        assert!(
            load(Path::new("/nonexistent/m.safetensors"))
                .unwrap_err()
                .to_string()
                .contains("/nonexistent")
        );
    }

    #[test]
    fn privacy_facts_round_trip_and_files_without_them_load_as_unknown() {
        let spec = ModelSpec::named("mlp", &[4], 3, &[5]).unwrap();
        let m = Sequential::new(spec, &mut DpRng::seeded(2)).unwrap();
        let report = crate::dpsgd::TrainReport {
            task: "classification".into(),
            test_mse: None,
            test_mae: None,
            test_accuracy: None,
            train_accuracy: 0.5,
            test_loss: None,
            epsilon: Some(1.25),
            delta: 1e-5,
            accountant: "rdp".into(),
            bounds: Some(dpml_accounting::BoundKind::UpperBound),
            accountant_note: None,
            noise_multiplier: Some(0.9),
            sampling_rate: 0.25,
            steps: 12,
            epochs: 3.0,
            max_grad_norm: 0.5,
            sensitivity: Some(0.5),
            exact_noise: false,
            samples_per_sec: 1.0,
            wall_seconds: 1.0,
            seeded: false,
            epoch_log: Vec::new(),
        };
        let facts = ModelFacts::from_training(&report, "iris", 120, "add/remove one record");
        let t = InputTransform::IDENTITY;
        let bytes = to_bytes_with_facts(&m, &t, Some(&facts)).unwrap();
        let saved = from_bytes_with_facts(&bytes).unwrap();
        assert_eq!(saved.facts.as_ref(), Some(&facts));
        assert_eq!(saved.model.params()[0].value, m.params()[0].value);
        // Next to the architecture, readable by any safetensors reader.
        let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
        let meta = meta.metadata().clone().unwrap();
        assert!(meta.contains_key(dpml_nn::io::ARCH_KEY));
        let stored: serde_json::Value = serde_json::from_str(&meta[FACTS_KEY]).unwrap();
        assert_eq!(stored["epsilon"], 1.25);
        assert_eq!(stored["sampling_rate"], 0.25);
        // A file without the entry loads; its guarantee is unknown.
        let plain = from_bytes_with_facts(&to_bytes(&m, &t).unwrap()).unwrap();
        assert_eq!(plain.facts, None);
        // A damaged entry is refused by name.
        let mut info = meta.clone();
        info.insert(FACTS_KEY.into(), "{\"epsilon\": 1}".into());
        let tensors = SafeTensors::deserialize(&bytes).unwrap();
        let bad = safetensors::serialize(tensors.tensors(), Some(info)).unwrap();
        let msg = from_bytes_with_facts(&bad).unwrap_err().to_string();
        assert!(msg.contains(FACTS_KEY), "{msg}");
        // Facts edited to contradict the weights (3 outputs) are refused.
        let edited = |f: &dyn Fn(&mut ModelFacts)| {
            let mut facts = facts.clone();
            f(&mut facts);
            from_bytes_with_facts(&to_bytes_with_facts(&m, &t, Some(&facts)).unwrap())
        };
        let three = |names: &[&str]| Some(names.iter().map(|s| s.to_string()).collect());
        assert!(edited(&|f| f.classes = three(&["a", "b", "c"])).is_ok());
        for (edit, why) in [
            (
                &(|f: &mut ModelFacts| f.classes = three(&["a", "b"])) as &dyn Fn(&mut ModelFacts),
                "2 classes, but the model has 3 outputs",
            ),
            (&|f| f.classes = three(&["a", "b", "a"]), "listed twice"),
            (
                &|f| f.task = crate::label_dp::Task::Regression,
                "task regression, but the model has 3 outputs",
            ),
        ] {
            let msg = edited(edit).unwrap_err().to_string();
            assert!(msg.contains(why), "{msg}");
        }
    }
}
