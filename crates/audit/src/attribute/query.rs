//! The attacker's queries: the sensitive column found by name in a tabular data set, and every
//! record repeated once per candidate with the candidate written into that column.
//!
//! Substitution happens on the records as loaded (raw feature values). The model's input
//! transform (its public normalisation, saved with it) is applied afterwards, when the
//! queries are evaluated, exactly as for the real records.

use dpml_data::Dataset;

use crate::error::{AuditError, Result};

/// The index of feature `name` among `data.feature_names`.
///
/// # Errors
/// [`AuditError::Invalid`] naming the value: an image data set (record shape of more than one
/// axis), `name` equal to the label column `label`, or a name that is not a feature (the
/// message lists the valid names).
pub fn sensitive_feature(data: &Dataset, name: &str, label: Option<&str>) -> Result<usize> {
    if data.record_shape.len() != 1 {
        return Err(AuditError::Invalid(format!(
            "attribute inference needs a tabular data set; {:?} holds images (record shape {:?}), \
             whose pixels are not attributes",
            data.name, data.record_shape
        )));
    }
    if label == Some(name) {
        return Err(AuditError::Invalid(format!(
            "sensitive column {name:?} is the label of data set {:?}; the attacker knows the label, \
             so choose a feature: {}",
            data.name,
            data.feature_names.join(", ")
        )));
    }
    data.feature_names
        .iter()
        .position(|f| f == name)
        .ok_or_else(|| {
            AuditError::Invalid(format!(
                "unknown sensitive column {name:?} in data set {:?}; valid columns: {}",
                data.name,
                data.feature_names.join(", ")
            ))
        })
}

/// Column `column` of every record, widened to f64.
pub fn column_values(data: &Dataset, column: usize) -> Vec<f64> {
    (0..data.n)
        .map(|i| f64::from(data.row(i)[column]))
        .collect()
}

/// Every record of `data` once per value of `values`, with that value in `column`: row
/// `i · values.len() + c` is record `i` with candidate `c`, keeping record `i`'s label.
///
/// # Errors
/// [`AuditError::Invalid`] when `column` is not a feature index of `data`.
pub fn substituted(data: &Dataset, column: usize, values: &[f64]) -> Result<Dataset> {
    let d = data.n_features();
    if column >= d {
        return Err(AuditError::Invalid(format!(
            "column must be below the number of features ({d}), got {column}"
        )));
    }
    let rows = data.n * values.len();
    let mut x = Vec::with_capacity(rows * d);
    let mut y = Vec::with_capacity(rows);
    for i in 0..data.n {
        for &v in values {
            let start = x.len();
            x.extend_from_slice(data.row(i));
            // Candidates come from f32 data (or medians of it): narrowing is exact or rounds
            // to the nearest representable feature value.
            x[start + column] = v as f32;
            y.push(data.y[i]);
        }
    }
    Ok(Dataset {
        x,
        n: rows,
        y,
        ..data.subset(&[])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Dataset {
        Dataset {
            name: "t".into(),
            x: vec![1.0, 10.0, 2.0, 20.0],
            n: 2,
            record_shape: vec![2],
            y: vec![0, 1],
            n_classes: 2,
            feature_names: vec!["age".into(), "income".into()],
            class_names: vec!["a".into(), "b".into()],
            feature_range: None,
        }
    }

    #[test]
    fn substitutes_each_candidate_into_each_record() {
        let q = substituted(&table(), 1, &[5.0, 7.0, 9.0]).unwrap();
        assert_eq!(q.n, 6);
        assert_eq!(
            q.x,
            vec![1.0, 5.0, 1.0, 7.0, 1.0, 9.0, 2.0, 5.0, 2.0, 7.0, 2.0, 9.0]
        );
        assert_eq!(q.y, vec![0, 0, 0, 1, 1, 1]);
        assert_eq!((q.feature_names.len(), q.n_classes), (2, 2));
        assert!(substituted(&table(), 2, &[1.0]).is_err());
        assert_eq!(column_values(&table(), 1), vec![10.0, 20.0]);
    }

    #[test]
    fn bad_columns_are_named() {
        let t = table();
        assert_eq!(sensitive_feature(&t, "income", Some("target")).unwrap(), 1);
        let e = sensitive_feature(&t, "salary", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"salary\"") && e.contains("valid columns: age, income"),
            "{e}"
        );
        let e = sensitive_feature(&t, "target", Some("target"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"target\" is the label"), "{e}");
        let img = Dataset {
            record_shape: vec![1, 1, 2],
            ..t
        };
        let e = sensitive_feature(&img, "age", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tabular") && e.contains("[1, 1, 2]"), "{e}");
    }
}
