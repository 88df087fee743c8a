//! The on-disk model cache: a trained model is stored under a SHA-256 key of everything that
//! determines it (the recipe, the exact training records and labels, and the model's seed), so
//! a second audit of the same setup loads its models instead of retraining them.
//!
//! Files are `DIR/<key>.safetensors` written with [`dpml_learn::dpsgd::save`] (model and
//! input transform), first to a temporary name and then renamed, so a crash never leaves a
//! half-written model under a valid key.
//!
//! The models are trained on private data (some without noise), so the cache is private to
//! its user: a folder it creates has mode 0700 (its missing parents too) and every model file
//! mode 0600, whatever the umask. [`default_dir`] is a per-user folder, never a shared one.

use std::path::{Path, PathBuf};

use dpml_data::Dataset;
use dpml_learn::dpsgd::{InputTransform, TrainConfig};
use dpml_nn::Sequential;
use sha2::{Digest, Sha256};

use super::error::{DriverError, Result};

/// Version tag mixed into every key; bump it when the stored format or the training code's
/// meaning changes.
const KEY_VERSION: &[u8] = b"dpml-audit-model-v1";

/// A folder of cached models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCache {
    dir: PathBuf,
}

/// The cache key of a model: hex SHA-256 of the recipe, the training data and the seed.
///
/// # Errors
/// [`DriverError::Cache`] if the recipe cannot be serialised.
pub fn model_key(recipe: &TrainConfig, train: &Dataset, seed: u64) -> Result<String> {
    let recipe_json = serde_json::to_vec(recipe).map_err(|e| DriverError::Cache {
        path: "(key)".into(),
        message: format!("cannot serialise the recipe: {e}"),
    })?;
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(KEY_VERSION);
    field(&recipe_json);
    field(train.name.as_bytes());
    let shape: Vec<u8> = train
        .record_shape
        .iter()
        .chain([&train.n, &train.n_classes])
        .flat_map(|v| (*v as u64).to_le_bytes())
        .collect();
    field(&shape);
    let x: Vec<u8> = train.x.iter().flat_map(|v| v.to_le_bytes()).collect();
    field(&x);
    let y: Vec<u8> = train.y.iter().flat_map(|v| v.to_le_bytes()).collect();
    field(&y);
    field(&seed.to_le_bytes());
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The default cache folder: `$XDG_CACHE_HOME/dpml/audit-models`, else
/// `$HOME/.cache/dpml/audit-models`; `None` (no cache) when neither is set to an absolute
/// path. Per user, never the shared temporary folder.
pub fn default_dir() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .map(|base| base.join("dpml").join("audit-models"))
}

/// Creates `dir` and its missing parents with mode 0700 (nothing changes for folders that
/// exist).
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Gives `path` mode 0600 (read and write for its owner only).
fn make_private(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

impl ModelCache {
    /// A cache in `dir` (created on first store).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.safetensors"))
    }

    /// The model stored under `key`, if any. An unreadable entry counts as absent (it will be
    /// retrained and overwritten).
    pub fn load(&self, key: &str) -> Option<(Sequential, InputTransform)> {
        let path = self.path(key);
        if !path.is_file() {
            return None;
        }
        dpml_learn::dpsgd::load(&path).ok()
    }

    /// Stores a model under `key`.
    ///
    /// # Errors
    /// [`DriverError::Cache`] naming the path when the folder or file cannot be written.
    pub fn store(&self, key: &str, model: &Sequential, input: &InputTransform) -> Result<()> {
        let err = |path: &Path, message: String| DriverError::Cache {
            path: path.display().to_string(),
            message,
        };
        create_private_dir(&self.dir).map_err(|e| err(&self.dir, e.to_string()))?;
        let tmp = self.dir.join(format!("{key}.{}.tmp", std::process::id()));
        dpml_learn::dpsgd::save(&tmp, model, input).map_err(|e| err(&tmp, e.to_string()))?;
        make_private(&tmp).map_err(|e| err(&tmp, e.to_string()))?;
        let path = self.path(key);
        std::fs::rename(&tmp, &path).map_err(|e| err(&path, e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpml_mechanisms::DpRng;
    use dpml_nn::ModelSpec;

    fn toy() -> Dataset {
        Dataset {
            name: "toy".into(),
            x: vec![0.0, 1.0, 2.0, 3.0],
            n: 2,
            record_shape: vec![2],
            y: vec![0, 1],
            n_classes: 2,
            feature_names: vec!["a".into(), "b".into()],
            class_names: vec!["0".into(), "1".into()],
            feature_range: None,
        }
    }

    #[test]
    fn keys_change_with_recipe_data_and_seed() {
        let recipe = TrainConfig::default();
        let d = toy();
        let k = model_key(&recipe, &d, 1).unwrap();
        assert_eq!(k.len(), 64);
        assert_eq!(k, model_key(&recipe, &d, 1).unwrap());
        assert_ne!(k, model_key(&recipe, &d, 2).unwrap());
        let mut d2 = d.clone();
        d2.y[0] = 1;
        assert_ne!(k, model_key(&recipe, &d2, 1).unwrap());
        let r2 = TrainConfig { lr: 0.2, ..recipe };
        assert_ne!(k, model_key(&r2, &d, 1).unwrap());
    }

    #[test]
    fn stores_and_loads_models() {
        let dir =
            std::env::temp_dir().join(format!("dpml-audit-cache-test-{}", std::process::id()));
        let cache = ModelCache::new(&dir);
        let spec = ModelSpec::named("logreg", &[2], 2, &[]).unwrap();
        let m = Sequential::new(spec, &mut DpRng::seeded(1)).unwrap();
        assert!(cache.load("abc").is_none());
        cache.store("abc", &m, &InputTransform::IDENTITY).unwrap();
        let (back, t) = cache.load("abc").unwrap();
        assert_eq!(back.params()[0].value, m.params()[0].value);
        assert_eq!(t, InputTransform::IDENTITY);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir), 0o700);
            assert_eq!(mode(&dir.join("abc.safetensors")), 0o600);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
