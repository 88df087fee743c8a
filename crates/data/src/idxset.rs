//! MNIST and Fashion-MNIST: where their files live, how they load, what the catalogue says.
//!
//! A set lives in `DIR/mnist/` or `DIR/fashion-mnist/` as four IDX files, each either
//! gzip-compressed (`train-images-idx3-ubyte.gz`) or unpacked (`train-images-idx3-ubyte`); the
//! `.gz` name is preferred when both exist. Images must be 28×28 and labels in 0..9.

use std::path::{Path, PathBuf};

use crate::catalog::DatasetInfo;
use crate::idx::{self, IdxHeader};
use crate::{DataError, Dataset, Source, Splits, Table};

/// The name of the only column of an IDX set's [`Table`].
pub const LABEL_COLUMN: &str = "label";

const SIDE: usize = 28;
pub(crate) const FASHION_CLASSES: [&str; 10] = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
];

/// An IDX data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdxSet {
    Mnist,
    FashionMnist,
}

/// The four files of one set, as found on disk.
struct Files {
    train_images: PathBuf,
    train_labels: PathBuf,
    test_images: PathBuf,
    test_labels: PathBuf,
}

/// The stems of the four files, in the order of [`Files`].
const STEMS: [&str; 4] = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
];

impl IdxSet {
    /// The set behind `source`, if it is one.
    pub fn from_source(source: &Source) -> Option<Self> {
        match source {
            Source::Mnist => Some(IdxSet::Mnist),
            Source::FashionMnist => Some(IdxSet::FashionMnist),
            _ => None,
        }
    }

    /// The set called `name` (`mnist`, `fashion-mnist`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "mnist" => Some(IdxSet::Mnist),
            "fashion-mnist" => Some(IdxSet::FashionMnist),
            _ => None,
        }
    }

    /// The set's name, which is also its sub-directory of the data directory.
    pub fn name(self) -> &'static str {
        match self {
            IdxSet::Mnist => "mnist",
            IdxSet::FashionMnist => "fashion-mnist",
        }
    }

    /// The public mirror `fetch` downloads from by default.
    pub fn default_base_url(self) -> &'static str {
        match self {
            IdxSet::Mnist => "https://ossci-datasets.s3.amazonaws.com/mnist/",
            IdxSet::FashionMnist => "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        }
    }

    fn class_names(self) -> Vec<String> {
        match self {
            IdxSet::Mnist => (0..10).map(|d| d.to_string()).collect(),
            IdxSet::FashionMnist => FASHION_CLASSES.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// The two names a file may have: `STEM.gz` and `STEM`.
    fn candidates(self, data_dir: &Path, stem: &str) -> [PathBuf; 2] {
        let dir = data_dir.join(self.name());
        [dir.join(format!("{stem}.gz")), dir.join(stem)]
    }

    /// Finds one file, preferring the `.gz` name.
    fn find(self, data_dir: &Path, stem: &str) -> Result<PathBuf, DataError> {
        let candidates = self.candidates(data_dir, stem);
        match candidates.iter().find(|p| p.is_file()) {
            Some(p) => Ok(p.clone()),
            None => Err(DataError::NotFound {
                dataset: self.name().to_string(),
                looked_for: candidates.to_vec(),
                data_dir: data_dir.to_path_buf(),
            }),
        }
    }

    fn files(self, data_dir: Option<&Path>) -> Result<Files, DataError> {
        let dir = data_dir.ok_or_else(|| DataError::NoDataDir {
            dataset: self.name().into(),
        })?;
        let [a, b, c, d] = STEMS;
        Ok(Files {
            train_images: self.find(dir, a)?,
            train_labels: self.find(dir, b)?,
            test_images: self.find(dir, c)?,
            test_labels: self.find(dir, d)?,
        })
    }

    /// Loads the train and test splits.
    ///
    /// # Errors
    /// [`DataError::NoDataDir`] / [`DataError::NotFound`] when files are missing; any IDX
    /// reading error; [`DataError::CountMismatch`]; [`DataError::InvalidIdx`] for images that
    /// are not 28×28 or labels outside 0..9.
    pub fn load(self, data_dir: Option<&Path>) -> Result<Splits, DataError> {
        let f = self.files(data_dir)?;
        let train = self.load_split(&f.train_images, &f.train_labels, self.name().to_string())?;
        let test = self.load_split(
            &f.test_images,
            &f.test_labels,
            format!("{}-test", self.name()),
        )?;
        Ok(Splits {
            train,
            test: Some(test),
            schema: crate::Schema::default(),
            clamped: Vec::new(),
        })
    }

    /// The table view: only the training labels, as column [`LABEL_COLUMN`].
    ///
    /// # Errors
    /// As [`IdxSet::load`], for the label file only.
    pub fn load_table(self, data_dir: Option<&Path>) -> Result<Table, DataError> {
        let dir = data_dir.ok_or_else(|| DataError::NoDataDir {
            dataset: self.name().into(),
        })?;
        let path = self.find(dir, STEMS[1])?;
        let labels = self.read_checked_labels(&path)?;
        Ok(Table {
            name: self.name().to_string(),
            columns: vec![LABEL_COLUMN.to_string()],
            values: vec![labels.iter().map(|&l| f64::from(l)).collect()],
            coded_from_records: None,
        })
    }

    fn read_checked_labels(self, path: &Path) -> Result<Vec<u8>, DataError> {
        let labels = idx::read_labels(path)?;
        let n_classes = self.class_names().len();
        if let Some(i) = labels.iter().position(|&l| usize::from(l) >= n_classes) {
            return Err(DataError::InvalidIdx {
                path: path.to_path_buf(),
                reason: format!(
                    "label {} of record {i} is outside 0..{}",
                    labels[i],
                    n_classes - 1
                ),
            });
        }
        Ok(labels)
    }

    fn load_split(self, images: &Path, labels: &Path, name: String) -> Result<Dataset, DataError> {
        let y = self.read_checked_labels(labels)?;
        // Check the image header before decoding megabytes of pixels.
        let header = idx::read_header(images)?;
        self.check_pair(images, &header, labels, y.len())?;
        let img = idx::read_images(images)?;
        let class_names = self.class_names();
        Ok(Dataset {
            name,
            x: img.pixels,
            n: img.n,
            record_shape: vec![1, img.rows, img.cols],
            y: y.into_iter().map(u32::from).collect(),
            n_classes: class_names.len(),
            feature_names: (0..img.rows * img.cols)
                .map(|i| format!("pixel_{i}"))
                .collect(),
            class_names,
            feature_range: Some((0.0, 1.0)),
        })
    }

    /// Checks an image header for 28×28 images and its count against the label count.
    fn check_pair(
        self,
        images: &Path,
        header: &IdxHeader,
        labels: &Path,
        n_labels: usize,
    ) -> Result<(), DataError> {
        if header.kind != idx::IdxKind::Images {
            return Err(DataError::InvalidIdx {
                path: images.to_path_buf(),
                reason: "expected an image file (magic 0x00000803), found a label file".into(),
            });
        }
        if header.dims[1..] != [SIDE, SIDE] {
            return Err(DataError::InvalidIdx {
                path: images.to_path_buf(),
                reason: format!(
                    "{} images must be {SIDE}×{SIDE}, found {}×{}",
                    self.name(),
                    header.dims[1],
                    header.dims[2]
                ),
            });
        }
        if header.count() != n_labels {
            return Err(DataError::CountMismatch {
                images_path: images.to_path_buf(),
                images: header.count(),
                labels_path: labels.to_path_buf(),
                labels: n_labels,
            });
        }
        Ok(())
    }

    /// The catalogue entry, from the file headers only.
    pub fn info(self, data_dir: Option<&Path>) -> DatasetInfo {
        let mut info = DatasetInfo {
            name: self.name().to_string(),
            rows: None,
            test_rows: None,
            features: None,
            classes: None,
            location: String::new(),
            available: false,
            problem: None,
        };
        let Some(dir) = data_dir else {
            info.location =
                "missing: no data directory (pass --data-dir DIR or set DPML_DATA_DIR)".into();
            return info;
        };
        let missing: Vec<&str> = STEMS
            .into_iter()
            .filter(|s| self.find(dir, s).is_err())
            .collect();
        if !missing.is_empty() {
            info.location = format!(
                "missing: looked in {} for {}; get them with `dpml data fetch {} --to {}`",
                dir.join(self.name()).display(),
                missing
                    .iter()
                    .map(|s| format!("{s}[.gz]"))
                    .collect::<Vec<_>>()
                    .join(", "),
                self.name(),
                dir.display()
            );
            return info;
        }
        info.location = dir.join(self.name()).display().to_string();
        match self.header_counts(dir) {
            Ok((train, test)) => {
                info.rows = Some(train);
                info.test_rows = Some(test);
                info.features = Some(SIDE * SIDE);
                info.classes = Some(self.class_names().len());
                info.available = true;
            }
            Err(e) => info.problem = Some(e.to_string()),
        }
        info
    }

    /// Train and test record counts from the headers, checked for consistency.
    fn header_counts(self, dir: &Path) -> Result<(usize, usize), DataError> {
        let f = self.files(Some(dir))?;
        let mut counts = [0usize; 2];
        for (slot, (images, labels)) in counts.iter_mut().zip([
            (&f.train_images, &f.train_labels),
            (&f.test_images, &f.test_labels),
        ]) {
            let label_header = idx::read_header(labels)?;
            if label_header.kind != idx::IdxKind::Labels {
                return Err(DataError::InvalidIdx {
                    path: labels.clone(),
                    reason: "expected a label file (magic 0x00000801), found an image file".into(),
                });
            }
            self.check_pair(
                images,
                &idx::read_header(images)?,
                labels,
                label_header.count(),
            )?;
            *slot = label_header.count();
        }
        Ok((counts[0], counts[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idx::testutil::{gzip, idx_bytes};
    use crate::idx::{IMAGES_MAGIC, LABELS_MAGIC};

    /// Writes a tiny MNIST-shaped set: `n_train` / `n_test` images of 28×28 with labels.
    fn write_set(dir: &Path, n_train: u32, n_test: u32, side: u32, bad_label: bool) {
        let sub = dir.join("mnist");
        std::fs::create_dir_all(&sub).unwrap();
        for (prefix, n) in [("train", n_train), ("t10k", n_test)] {
            let px: Vec<u8> = (0..n * side * side).map(|i| (i % 256) as u8).collect();
            let imgs = idx_bytes(IMAGES_MAGIC, &[n, side, side], &px);
            let mut labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
            if bad_label {
                labels[0] = 10;
            }
            let labs = idx_bytes(LABELS_MAGIC, &[n], &labels);
            // Images gzip-compressed, labels unpacked: both names must be accepted.
            std::fs::write(
                sub.join(format!("{prefix}-images-idx3-ubyte.gz")),
                gzip(&imgs),
            )
            .unwrap();
            std::fs::write(sub.join(format!("{prefix}-labels-idx1-ubyte")), labs).unwrap();
        }
    }

    #[test]
    fn loads_a_small_set_and_catalogues_it() {
        let dir = tempfile::tempdir().unwrap();
        write_set(dir.path(), 12, 5, 28, false);
        let s = IdxSet::Mnist.load(Some(dir.path())).unwrap();
        let test = s.test.unwrap();
        assert_eq!((s.train.n, test.n), (12, 5));
        assert_eq!(s.train.record_shape, vec![1, 28, 28]);
        assert_eq!(s.train.x.len(), 12 * 784);
        assert_eq!(s.train.row(0)[255], 1.0);
        assert_eq!(s.train.y[..3], [0, 1, 2]);
        assert_eq!(s.train.feature_range, Some((0.0, 1.0)));
        assert_eq!(test.name, "mnist-test");
        let info = IdxSet::Mnist.info(Some(dir.path()));
        assert!(info.available, "{info:?}");
        assert_eq!(
            (info.rows, info.test_rows, info.features, info.classes),
            (Some(12), Some(5), Some(784), Some(10))
        );
        let t = IdxSet::Mnist.load_table(Some(dir.path())).unwrap();
        assert_eq!(t.column(LABEL_COLUMN).unwrap().len(), 12);
    }

    #[test]
    fn wrong_dims_labels_and_counts_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        write_set(dir.path(), 3, 2, 27, false);
        let msg = IdxSet::Mnist
            .load(Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("must be 28×28, found 27×27"), "{msg}");
        assert!(
            IdxSet::Mnist
                .info(Some(dir.path()))
                .problem
                .unwrap()
                .contains("27×27")
        );

        let dir = tempfile::tempdir().unwrap();
        write_set(dir.path(), 3, 2, 28, true);
        let msg = IdxSet::Mnist
            .load(Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("label 10 of record 0 is outside 0..9"),
            "{msg}"
        );

        let dir = tempfile::tempdir().unwrap();
        write_set(dir.path(), 3, 2, 28, false);
        let labs = idx_bytes(LABELS_MAGIC, &[4], &[0, 1, 2, 3]);
        std::fs::write(dir.path().join("mnist/train-labels-idx1-ubyte"), labs).unwrap();
        let err = IdxSet::Mnist.load(Some(dir.path())).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::CountMismatch {
                    images: 3,
                    labels: 4,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn missing_files_say_where_we_looked_and_how_to_fetch() {
        let dir = tempfile::tempdir().unwrap();
        let msg = IdxSet::FashionMnist
            .load(Some(dir.path()))
            .unwrap_err()
            .to_string();
        let sub = dir.path().join("fashion-mnist");
        assert!(
            msg.contains(&sub.join("train-images-idx3-ubyte.gz").display().to_string()),
            "{msg}"
        );
        assert!(msg.contains("dpml data fetch fashion-mnist --to"), "{msg}");
        let info = IdxSet::FashionMnist.info(Some(dir.path()));
        assert!(
            !info.available && info.location.starts_with("missing: looked in"),
            "{info:?}"
        );
        let msg = IdxSet::Mnist.load(None).unwrap_err().to_string();
        assert!(msg.contains("DPML_DATA_DIR"), "{msg}");
    }
}
