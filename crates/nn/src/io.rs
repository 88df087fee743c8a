//! Save and load models as safetensors: one F32 tensor per parameter, named
//! `"{layer index}.{weight|bias}"` in PyTorch layout (as a PyTorch `nn.Sequential` state dict),
//! and the architecture as JSON under the metadata key [`ARCH_KEY`], so other tools can read
//! the weights and dpml can rebuild the model.

use std::collections::HashMap;
use std::path::Path;

use dpml_mechanisms::DpRng;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::arch::ModelSpec;
use crate::error::{NnError, Result};
use crate::model::Sequential;

/// Metadata key holding the [`ModelSpec`] JSON.
pub const ARCH_KEY: &str = "dpml_architecture";

fn io_err(e: impl std::fmt::Display) -> NnError {
    NnError::Io(e.to_string())
}

/// The model as safetensors bytes.
///
/// # Errors
/// [`NnError::Io`] if serialisation fails.
pub fn to_bytes(model: &Sequential) -> Result<Vec<u8>> {
    let named = model.named_params();
    let bytes: Vec<Vec<u8>> = named
        .iter()
        .map(|(_, p)| p.value.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let mut views = Vec::with_capacity(named.len());
    for ((name, p), b) in named.iter().zip(&bytes) {
        views.push((
            name.clone(),
            TensorView::new(Dtype::F32, p.shape.clone(), b).map_err(io_err)?,
        ));
    }
    let arch = serde_json::to_string(model.spec()).map_err(io_err)?;
    let meta = HashMap::from([
        (ARCH_KEY.to_string(), arch),
        ("format".to_string(), "pt".to_string()),
    ]);
    safetensors::serialize(views, Some(meta)).map_err(io_err)
}

/// Rebuilds a model from safetensors bytes written by [`to_bytes`].
///
/// # Errors
/// [`NnError::Io`] for unreadable files, a missing or invalid architecture, or a missing or
/// mis-shaped tensor (named in the message); build errors as [`Sequential::new`].
pub fn from_bytes(bytes: &[u8]) -> Result<Sequential> {
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(io_err)?;
    let arch = meta
        .metadata()
        .as_ref()
        .and_then(|m| m.get(ARCH_KEY))
        .ok_or_else(|| NnError::Io(format!("no {ARCH_KEY:?} entry in the safetensors metadata")))?;
    let spec: ModelSpec = serde_json::from_str(arch)
        .map_err(|e| NnError::Io(format!("bad architecture JSON: {e}")))?;
    let tensors = SafeTensors::deserialize(bytes).map_err(io_err)?;
    // The architecture is only a claim: check every tensor it declares against the file
    // before building it, so a small file cannot make us allocate what it declares.
    spec.check_size()?;
    let mut declared = Vec::new();
    for (i, layer) in spec.layers.iter().enumerate() {
        for (param, shape) in layer.parameter_shapes() {
            let name = format!("{i}.{param}");
            check_tensor(&tensors, &name, &shape)?;
            declared.push(name);
        }
    }
    check_layout(&meta, &declared)?;
    // Parameters are overwritten below, so the initialisation seed does not matter.
    let mut model = Sequential::new(spec, &mut DpRng::seeded(0))?;
    let names: Vec<String> = model.named_params().into_iter().map(|(n, _)| n).collect();
    let mut err = None;
    model.for_each_param_mut(|k, p| {
        if err.is_some() {
            return;
        }
        let name = &names[k];
        match tensors.tensor(name) {
            Ok(t) if t.dtype() == Dtype::F32 && t.shape() == p.shape.as_slice() => {
                for (v, c) in p.value.iter_mut().zip(t.data().chunks_exact(4)) {
                    *v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
                // A NaN or infinite weight makes every output meaningless (a loss of NaN
                // printed as null): no trained model holds one, so the file is damaged.
                if let Some(bad) = p.value.iter().find(|v| !v.is_finite()) {
                    err = Some(NnError::Io(format!(
                        "tensor {name:?} holds a non-finite weight ({bad})"
                    )));
                }
            }
            // Checked before building; a mismatch here means the shapes and the layers disagree.
            _ => {
                err = Some(
                    check_tensor(&tensors, name, &p.shape)
                        .err()
                        .unwrap_or_else(|| {
                            NnError::Io(format!("tensor {name:?} does not fit its layer"))
                        }),
                )
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(model),
    }
}

/// Checks that the file holds nothing but the `declared` tensors, each in bytes of its own: a
/// tensor that is no parameter, that holds no bytes, or whose bytes another tensor's overlap
/// is refused, naming it (the safetensors reader lets an empty tensor sit inside another).
fn check_layout(meta: &safetensors::tensor::Metadata, declared: &[String]) -> Result<()> {
    let mut spans: Vec<(usize, usize, String)> = meta
        .tensors()
        .into_iter()
        .map(|(name, info)| (info.data_offsets.0, info.data_offsets.1, name))
        .collect();
    spans.sort();
    for (start, end, name) in &spans {
        if !declared.contains(name) {
            return Err(NnError::Io(format!(
                "tensor {name:?} is not a parameter of the architecture"
            )));
        }
        if end <= start {
            return Err(NnError::Io(format!(
                "tensor {name:?} holds no data (data offsets {start}..{end})"
            )));
        }
    }
    for pair in spans.windows(2) {
        let ((_, end, a), (start, _, b)) = (&pair[0], &pair[1]);
        if start < end {
            return Err(NnError::Io(format!(
                "tensors {a:?} and {b:?} overlap (data offsets ..{end} and {start}..)"
            )));
        }
    }
    Ok(())
}

/// Checks that the file holds tensor `name` as F32 of `shape`.
fn check_tensor(tensors: &SafeTensors<'_>, name: &str, shape: &[usize]) -> Result<()> {
    match tensors.tensor(name) {
        Ok(t) if t.dtype() == Dtype::F32 && t.shape() == shape => Ok(()),
        Ok(t) => Err(NnError::Io(format!(
            "tensor {name:?} is {:?} {:?}, the architecture needs F32 {shape:?}",
            t.dtype(),
            t.shape()
        ))),
        Err(e) => Err(NnError::Io(format!("tensor {name:?}: {e}"))),
    }
}

/// Writes the model to `path` as safetensors.
///
/// # Errors
/// [`NnError::Io`] naming the path when writing fails.
pub fn save(model: &Sequential, path: &Path) -> Result<()> {
    std::fs::write(path, to_bytes(model)?)
        .map_err(|e| NnError::Io(format!("{}: {e}", path.display())))
}

/// The largest model file read: every parameter a model may have
/// ([`crate::arch::MAX_PARAMETERS`], 4 bytes each) and room for the header.
pub const MAX_MODEL_FILE_BYTES: u64 = (crate::arch::MAX_PARAMETERS as u64) * 4 + (16 << 20);

/// The bytes of a model file, refusing anything but a regular file (a FIFO would block the
/// open, perhaps for ever, and a device read without end) and a file larger than any model
/// this crate builds ([`MAX_MODEL_FILE_BYTES`]) before reading it.
///
/// # Errors
/// [`NnError::Io`] naming the path when it cannot be read, is not a regular file or is too
/// large.
pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let named = |e: &dyn std::fmt::Display| NnError::Io(format!("{}: {e}", path.display()));
    let not_regular = || named(&"not a regular file (a folder, FIFO or device is no model file)");
    // Checked before the open, which blocks on a FIFO, and on the file opened.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(not_regular());
    }
    let file = std::fs::File::open(path).map_err(|e| named(&e))?;
    let meta = file.metadata().map_err(|e| named(&e))?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    let size = meta.len();
    if size > MAX_MODEL_FILE_BYTES {
        return Err(named(&format!(
            "{size} bytes, over the limit of {MAX_MODEL_FILE_BYTES} for a model file"
        )));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // `take` also bounds a file that grows while it is read.
    file.take(MAX_MODEL_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| named(&e))?;
    if bytes.len() as u64 > MAX_MODEL_FILE_BYTES {
        return Err(named(&"grew past the model file limit while read"));
    }
    Ok(bytes)
}

/// Reads a model written by [`save`].
///
/// # Errors
/// As [`read_file`]; otherwise as [`from_bytes`].
pub fn load(path: &Path) -> Result<Sequential> {
    from_bytes(&read_file(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::random;

    #[cfg(unix)]
    #[test]
    fn only_regular_files_are_read_as_models() {
        let dir = std::env::temp_dir().join(format!("dpml-nn-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("model.safetensors");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        // A FIFO blocked the open for ever; `/dev/zero` read 1.1 GB before it was refused.
        let errors: Vec<String> = [fifo.as_path(), Path::new("/dev/zero"), dir.as_path()]
            .into_iter()
            .map(|path| read_file(path).unwrap_err().to_string())
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        for err in errors {
            assert!(err.contains("not a regular file"), "{err}");
        }
    }

    #[test]
    fn save_load_gives_identical_outputs() {
        let mut rng = DpRng::seeded(5);
        let spec = ModelSpec::named("cnn", &[1, 28, 28], 10, &[]).unwrap();
        let mut m = Sequential::new(spec, &mut rng).unwrap();
        let x = random(&[3, 1, 28, 28], &mut rng);
        let want = m.forward(&x).unwrap().clone();
        let dir = std::env::temp_dir().join(format!("dpml-nn-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.safetensors");
        save(&m, &path).unwrap();
        let mut back = load(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back.spec(), m.spec());
        assert_eq!(back.forward(&x).unwrap(), &want);
        // Readable by any safetensors reader, with PyTorch names and layout.
        let bytes = to_bytes(&m).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(st.tensor("0.weight").unwrap().shape(), &[16, 1, 8, 8]);
        assert_eq!(st.tensor("9.bias").unwrap().shape(), &[10]);
    }

    /// Safetensors bytes of `tensors` (name, F32 shape, data offsets) over `data`, under the
    /// architecture of [`Sequential`] `m`.
    fn raw_file(
        m: &Sequential,
        tensors: &[(&str, &[usize], (usize, usize))],
        data: &[u8],
    ) -> Vec<u8> {
        let arch = serde_json::to_string(m.spec()).unwrap();
        let mut header = serde_json::json!({"__metadata__": {ARCH_KEY: arch}});
        for (name, shape, (s, e)) in tensors {
            header[*name] =
                serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [s, e]});
        }
        let header = header.to_string();
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend(header.as_bytes());
        bytes.extend(data);
        bytes
    }

    #[test]
    fn overlapping_empty_and_stray_tensors_are_refused() {
        let spec = crate::ModelSpec::named("logreg", &[4], 3, &[]).unwrap();
        let m = Sequential::new(spec, &mut DpRng::seeded(0)).unwrap();
        let data: Vec<u8> = (0..15)
            .flat_map(|i| (i as f32 * 0.1).to_le_bytes())
            .collect();
        let (w, b): (&[usize], &[usize]) = (&[3, 4], &[3]);
        let good = raw_file(
            &m,
            &[("0.weight", w, (0, 48)), ("0.bias", b, (48, 60))],
            &data,
        );
        assert!(from_bytes(&good).is_ok());
        // An empty tensor at offset 0 passes the safetensors reader, inside the weight.
        let empty: &[usize] = &[0];
        let inside = raw_file(
            &m,
            &[
                ("0.weight", w, (0, 48)),
                ("0.bias", b, (48, 60)),
                ("0.extra", empty, (0, 0)),
            ],
            &data,
        );
        let msg = from_bytes(&inside).unwrap_err().to_string();
        assert!(msg.contains("\"0.extra\""), "{msg}");
    }

    #[test]
    fn missing_architecture_or_tensor_is_an_error() {
        let data = [0u8; 4];
        let view = TensorView::new(Dtype::F32, vec![1], &data).unwrap();
        let bytes = safetensors::serialize([("x", view.clone())], None).unwrap();
        assert!(
            from_bytes(&bytes)
                .unwrap_err()
                .to_string()
                .contains(ARCH_KEY)
        );
        let spec = ModelSpec::named("logreg", &[1], 1, &[]).unwrap();
        let meta = HashMap::from([(ARCH_KEY.to_string(), serde_json::to_string(&spec).unwrap())]);
        let bytes =
            safetensors::serialize([("0.weight", view.clone())], Some(meta.clone())).unwrap();
        let msg = from_bytes(&bytes).unwrap_err().to_string();
        assert!(msg.contains("0.weight") && msg.contains("[1, 1]"), "{msg}");
        let w = TensorView::new(Dtype::F32, vec![1, 1], &data).unwrap();
        let bytes = safetensors::serialize([("0.weight", w)], Some(meta)).unwrap();
        assert!(
            from_bytes(&bytes)
                .unwrap_err()
                .to_string()
                .contains("0.bias")
        );
    }
}
