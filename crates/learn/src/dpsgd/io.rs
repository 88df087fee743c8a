//! Saving and loading trained models with their input transform.
//!
//! The file is the engine's safetensors file ([`dpml_nn::io`]: PyTorch-named F32 tensors and
//! the architecture as JSON metadata), with one more metadata entry, [`INPUT_KEY`], holding the
//! [`InputTransform`] as JSON, so `dpml eval` normalises records exactly as training did. Files
//! without the entry load with the identity transform.

use std::collections::HashMap;
use std::path::Path;

use dpml_nn::{NnError, Sequential};
use safetensors::SafeTensors;

use super::error::Result;
use super::normalize::{InputTransform, check_ranges};

/// Metadata key of the input transform.
pub const INPUT_KEY: &str = "dpml_input_transform";

fn io_err(what: impl std::fmt::Display) -> NnError {
    NnError::Io(what.to_string())
}

/// The model and its input transform as safetensors bytes.
///
/// # Errors
/// [`super::DpSgdError::Nn`] ([`NnError::Io`]) if serialisation fails.
pub fn to_bytes(model: &Sequential, input: &InputTransform) -> Result<Vec<u8>> {
    let bytes = dpml_nn::io::to_bytes(model)?;
    let (_, meta) = SafeTensors::read_metadata(&bytes).map_err(io_err)?;
    let mut info: HashMap<String, String> = meta.metadata().clone().unwrap_or_default();
    info.insert(
        INPUT_KEY.into(),
        serde_json::to_string(input).map_err(io_err)?,
    );
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
    let model = dpml_nn::io::from_bytes(bytes)?;
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(io_err)?;
    let input = match meta.metadata().as_ref().and_then(|m| m.get(INPUT_KEY)) {
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
    Ok((model, input))
}

/// Writes the model and its input transform to `path`.
///
/// # Errors
/// [`super::DpSgdError::Nn`] naming the path when writing fails.
pub fn save(path: &Path, model: &Sequential, input: &InputTransform) -> Result<()> {
    std::fs::write(path, to_bytes(model, input)?)
        .map_err(|e| io_err(format!("{}: {e}", path.display())))?;
    Ok(())
}

/// Reads a model written by [`save`].
///
/// # Errors
/// [`super::DpSgdError::Nn`] naming the path when reading fails; otherwise as [`from_bytes`].
pub fn load(path: &Path) -> Result<(Sequential, InputTransform)> {
    from_bytes(&dpml_nn::io::read_file(path)?)
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
}
