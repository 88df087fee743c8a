//! The catalogue behind `dpml data list`: each named data set, its size and where it was found.
//!
//! Fast by construction: embedded sets report their compiled-in shape, IDX sets read only the
//! few header bytes of their files.

use std::path::Path;

use crate::Source;
use crate::embedded::Embedded;
use crate::idxset::IdxSet;
use crate::source::resolve_data_dir;

/// One catalogue entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetInfo {
    /// The data set name, as typed after `--dataset`.
    pub name: String,
    /// Records (the training split for IDX sets); `None` when unavailable.
    pub rows: Option<usize>,
    /// Records in the set's own test split (IDX sets); `None` otherwise.
    pub test_rows: Option<usize>,
    /// Features per record.
    pub features: Option<usize>,
    /// Number of classes.
    pub classes: Option<usize>,
    /// `embedded`, the directory holding the files, or `missing: looked in …` saying where we
    /// looked and how to fetch.
    pub location: String,
    /// Whether the set can be loaded.
    pub available: bool,
    /// Why a set whose files exist cannot be used (bad header, counts that disagree).
    pub problem: Option<String>,
}

/// Every named data set, in [`Source::all_named`] order. `data_dir` `None` falls back to
/// `DPML_DATA_DIR`.
pub fn catalog(data_dir: Option<&Path>) -> Vec<DatasetInfo> {
    let dir = resolve_data_dir(data_dir);
    Source::all_named()
        .iter()
        .filter_map(|s| {
            if let Some(set) = IdxSet::from_source(s) {
                Some(set.info(dir.as_deref()))
            } else {
                Embedded::from_source(s).map(embedded_info)
            }
        })
        .collect()
}

fn embedded_info(e: Embedded) -> DatasetInfo {
    let (rows, features, classes) = e.shape();
    DatasetInfo {
        name: e.name().to_string(),
        rows: Some(rows),
        test_rows: None,
        features: Some(features),
        classes: Some(classes),
        location: "embedded".into(),
        available: true,
        problem: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_every_named_set() {
        let dir = tempfile::tempdir().unwrap();
        let list = catalog(Some(dir.path()));
        let names: Vec<_> = list.iter().map(|i| i.name.clone()).collect();
        let want: Vec<_> = Source::all_named().iter().map(Source::name).collect();
        assert_eq!(names, want);
        let iris = &list[2];
        assert_eq!(
            (iris.rows, iris.features, iris.classes),
            (Some(150), Some(4), Some(3))
        );
        assert_eq!(iris.location, "embedded");
        assert!(!list[0].available && list[0].location.starts_with("missing"));
    }
}
