//! The form every array and image input (npy, npz, IDX by path, image folders) is read into
//! before it becomes a [`Dataset`], so that all of them map labels and shape records alike.

use std::path::PathBuf;

use crate::schema::declared_label;
use crate::tabular::encode_labels;
use crate::{DataError, Dataset};

/// The most feature values an array, IDX or image source may hold (2²⁷: 512 MiB as f32;
/// MNIST's training images hold 4.7·10⁷), checked against the sizes a file declares before
/// its data is read or decompressed.
pub const MAX_SOURCE_VALUES: u64 = 1 << 27;

/// The most values one record may hold (a model's input limit too: CIFAR's records hold 3072).
pub const MAX_RECORD_VALUES: u64 = 1 << 22;

/// The number of values of `shape`, if it is at most `limit`.
pub(crate) fn values_within(shape: &[usize], limit: u64) -> Option<u64> {
    shape
        .iter()
        .try_fold(1u64, |p, &s| p.checked_mul(s as u64))
        .filter(|&n| n <= limit)
}

/// Records read from arrays or images, labels not yet mapped to classes.
#[derive(Debug, Clone)]
pub(crate) struct Records {
    /// Data set name for messages and reports (`npz:data.npz`).
    pub name: String,
    /// The file or folder, for messages.
    pub path: PathBuf,
    /// Features, row-major.
    pub x: Vec<f32>,
    /// Shape of one record.
    pub record_shape: Vec<usize>,
    /// One label per record, as text (a number's text, or an image's subfolder).
    pub labels: Vec<String>,
    /// Where each label comes from, for messages: `None` means "record i" (1-based).
    pub label_origin: Option<fn(&str) -> String>,
    /// Whether the features are 8-bit pixels scaled to [0, 1] (a public range, as MNIST's).
    pub pixels: bool,
}

/// The record shape of an array of shape `[N, rest…]`: a flat vector stays `[D]`, a scalar
/// becomes `[1]`, a grey image `[H, W]` becomes `[1, H, W]` (one channel, as the CNNs expect),
/// anything with more axes is kept.
pub(crate) fn record_shape(shape: &[usize]) -> Vec<usize> {
    match shape.get(1..).unwrap_or(&[]) {
        [] => vec![1],
        [h, w] => vec![1, *h, *w],
        rest => rest.to_vec(),
    }
}

impl Records {
    /// The dataset, with each label mapped to its declared class (refusing one outside
    /// `classes`; a number outside a declared `label_range` is clamped to its nearest end, as
    /// for csv tables), or, without declared classes, to the sorted distinct labels (a domain read
    /// off the records, which only non-private computations accept).
    ///
    /// # Errors
    /// [`DataError::UndeclaredRecordLabel`] naming the record (or subfolder) and the value;
    /// [`DataError::BadInput`] for features that do not number labels × record size.
    pub fn into_dataset(
        self,
        classes: Option<&[String]>,
        label_range: Option<(f64, f64)>,
    ) -> Result<Dataset, DataError> {
        let n = self.labels.len();
        let d: usize = self.record_shape.iter().product();
        if self.x.len() != n * d {
            return Err(DataError::bad_input(
                &self.path,
                format!(
                    "{} labels but {} feature values (expected {} records of {d})",
                    n,
                    self.x.len(),
                    n
                ),
            ));
        }
        if n == 0 {
            return Err(DataError::bad_input(&self.path, "no records"));
        }
        let (y, class_names) = match classes {
            Some(classes) => {
                let y = self
                    .labels
                    .iter()
                    .enumerate()
                    .map(|(i, label)| {
                        declared_label(classes, label_range, label).ok_or_else(|| {
                            DataError::UndeclaredRecordLabel {
                                path: self.path.clone(),
                                at: match self.label_origin {
                                    Some(origin) => origin(label),
                                    None => format!("record {}", i + 1),
                                },
                                value: label.clone(),
                                classes: classes.join(", "),
                            }
                        })
                    })
                    .collect::<Result<Vec<u32>, _>>()?;
                (y, classes.to_vec())
            }
            None => {
                let l = encode_labels(&self.labels);
                (l.y, l.class_names)
            }
        };
        let prefix = if self.pixels { "pixel" } else { "x" };
        Ok(Dataset {
            name: self.name,
            x: self.x,
            n,
            record_shape: self.record_shape,
            y,
            n_classes: class_names.len(),
            feature_names: (0..d).map(|i| format!("{prefix}_{i}")).collect(),
            class_names,
            feature_range: self.pixels.then_some((0.0, 1.0)),
        })
    }
}

/// An 8-bit pixel scaled into [0, 1], as the MNIST reader does.
pub(crate) fn pixel(p: u8) -> f32 {
    f32::from(p) / 255.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(labels: &[&str]) -> Records {
        Records {
            name: "t".into(),
            path: "t.npy".into(),
            x: (0..labels.len() * 2).map(|v| v as f32).collect(),
            record_shape: vec![2],
            labels: labels.iter().map(|s| s.to_string()).collect(),
            label_origin: None,
            pixels: false,
        }
    }

    #[test]
    fn shapes_follow_the_array() {
        assert_eq!(record_shape(&[5]), vec![1]);
        assert_eq!(record_shape(&[5, 3]), vec![3]);
        assert_eq!(record_shape(&[5, 28, 28]), vec![1, 28, 28]);
        assert_eq!(record_shape(&[5, 3, 17, 23]), vec![3, 17, 23]);
    }

    #[test]
    fn labels_map_to_declared_classes_or_are_refused_by_record() {
        let classes = ["0".to_string(), "1".into(), "2".into()];
        let d = records(&["2", "0"])
            .into_dataset(Some(&classes), None)
            .unwrap();
        assert_eq!((d.y.clone(), d.n_classes, d.n), (vec![2, 0], 3, 2));
        let msg = records(&["1", "7"])
            .into_dataset(Some(&classes), None)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("record 2") && msg.contains("\"7\""), "{msg}");
        let inferred = records(&["b", "a", "b"]).into_dataset(None, None).unwrap();
        assert_eq!(inferred.class_names, ["a", "b"]);
        assert_eq!(inferred.y, vec![1, 0, 1]);
    }

    /// A declared label range clamps array labels as it clamps csv labels: the range, not the
    /// records, bounds what a private computation sees.
    #[test]
    fn labels_outside_a_declared_range_are_clamped() {
        let classes = ["0".to_string(), "1".into(), "2".into()];
        let d = records(&["7", "-1", "1", "2.0"])
            .into_dataset(Some(&classes), Some((0.0, 2.0)))
            .unwrap();
        assert_eq!(d.y, vec![2, 0, 1, 2]);
        let msg = records(&["1.5"])
            .into_dataset(Some(&classes), Some((0.0, 2.0)))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("\"1.5\""), "{msg}");
    }

    #[test]
    fn feature_count_must_match() {
        let mut r = records(&["1"]);
        r.x.push(1.0);
        assert!(
            r.into_dataset(None, None)
                .unwrap_err()
                .to_string()
                .contains("t.npy")
        );
    }
}
