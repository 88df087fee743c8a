//! The schema at the data boundary: what a private computation relies on is declared, never
//! read from the records, and one record cannot change it.

use std::path::{Path, PathBuf};

use dpml_data::{FeatureBounds, LoadOptions, Provenance, Schema, Source, load, load_table};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn opts(schema: Schema) -> LoadOptions {
    LoadOptions {
        schema: Some(schema),
        ..LoadOptions::default()
    }
}

#[test]
fn declared_classes_fix_the_domain_and_an_unseen_label_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = "a,b,y\n1,2,yes\n3,4,no\n5,6,yes\n";
    let p = write(dir.path(), "d.csv", base);
    let schema = Schema::default()
        .with_classes(vec!["no".into(), "yes".into(), "maybe".into()])
        .unwrap();
    let d = load(&Source::Csv(p), &opts(schema.clone())).unwrap();
    // Three declared classes although only two appear: the shape does not follow the records.
    assert_eq!(d.train.n_classes, 3);
    assert_eq!(d.train.y, vec![1, 0, 1]);
    assert_eq!(d.schema.classes_provenance, Some(Provenance::Declared));

    let p2 = write(dir.path(), "d2.csv", &format!("{base}7,8,unknown\n"));
    let msg = load(&Source::Csv(p2.clone()), &opts(schema))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("\"unknown\"") && msg.contains("line 5") && msg.contains("no, yes, maybe"),
        "{msg}"
    );
    // Without declared classes the domain is read off the records, and marked as such.
    let inferred = load(&Source::Csv(p2), &LoadOptions::default()).unwrap();
    assert_eq!(inferred.train.n_classes, 3);
    assert_eq!(
        inferred.schema.classes_provenance,
        Some(Provenance::Inferred)
    );
    assert!(inferred.schema.require_classes("csv:d2.csv").is_err());
}

#[test]
fn features_are_clamped_to_declared_bounds_before_anything_else() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "d.csv",
        "a,b,y\n3e38,-3e38,0\n0.5,2,1\n-1e-3,0.25,0\n",
    );
    let schema = Schema::default()
        .with_bounds(FeatureBounds::PerFeature(vec![(0.0, 1.0), (-1.0, 1.0)]))
        .unwrap()
        .with_label_range((0.0, 1.0))
        .unwrap();
    let d = load(&Source::Csv(p.clone()), &opts(schema.clone())).unwrap();
    assert_eq!(d.train.x, vec![1.0, -1.0, 0.5, 1.0, 0.0, 0.25]);
    // Both views see the same clamped values.
    let t = load_table(&Source::Csv(p), &opts(schema)).unwrap();
    assert_eq!(t.column("a").unwrap(), &[1.0, 0.5, 0.0]);
    assert_eq!(t.column("y").unwrap(), &[0.0, 1.0, 0.0]);
}

#[test]
fn declared_features_select_and_order_the_columns() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "d.csv", "a,y,b\n1,0,2\n3,1,4\n");
    let schema_file = write(
        dir.path(),
        "s.json",
        r#"{"label_column": "y", "classes": [0, 1],
            "features": [{"name": "b", "bounds": [0, 10]}, {"name": "a", "bounds": [0, 2]}]}"#,
    );
    let schema = Schema::from_file(&schema_file).unwrap();
    let d = load(&Source::Csv(p.clone()), &opts(schema)).unwrap();
    assert_eq!(d.train.feature_names, ["b", "a"]);
    assert_eq!(d.train.x, vec![2.0, 1.0, 4.0, 2.0]);

    let only_a = write(
        dir.path(),
        "a.json",
        r#"{"label_column": "y", "features": [{"name": "a"}]}"#,
    );
    let msg = load(&Source::Csv(p), &opts(Schema::from_file(&only_a).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("\"b\" is not among the schema's features"),
        "{msg}"
    );
}

#[test]
fn built_in_sets_carry_their_schema_with_provenance() {
    for (source, bounds) in [
        (Source::Digits, Provenance::Public),
        (Source::Iris, Provenance::DataDerived),
        (Source::Wine, Provenance::DataDerived),
        (Source::BreastCancer, Provenance::DataDerived),
    ] {
        let s = load(&source, &LoadOptions::default()).unwrap();
        assert_eq!(s.schema.bounds_provenance, Some(bounds), "{source}");
        assert_eq!(
            s.schema.classes_provenance,
            Some(Provenance::Public),
            "{source}"
        );
        assert_eq!(s.schema.classes.as_ref().unwrap(), &s.train.class_names);
        let d = s.train.n_features();
        let ranges = s.schema.require_bounds(&source.name(), d).unwrap();
        for i in 0..s.train.n {
            for (v, (lo, hi)) in s.train.row(i).iter().zip(&ranges) {
                assert!(
                    f64::from(*v) >= *lo as f32 as f64 && f64::from(*v) <= *hi as f32 as f64,
                    "{source}"
                );
            }
        }
    }
    // Named sets have fixed classes.
    let msg = load(
        &Source::Iris,
        &opts(Schema::default().with_classes(vec!["a".into()]).unwrap()),
    )
    .unwrap_err()
    .to_string();
    assert!(msg.contains("csv: tables only"), "{msg}");
}

#[test]
fn a_schema_built_in_code_with_a_feature_twice_is_refused_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "d.csv", "age,bmi,y\n30,20,0\n40,25,1\n");
    // `Schema::from_file` refuses this; a schema built field by field reaches the loader.
    let schema = Schema {
        features: Some(vec!["age".into(), "bmi".into(), "age".into()]),
        ..Schema::default()
    };
    for result in [
        load(&Source::Csv(p.clone()), &opts(schema.clone())).map(|_| ()),
        load_table(&Source::Csv(p), &opts(schema)).map(|_| ()),
    ] {
        let msg = result.unwrap_err().to_string();
        assert!(msg.contains("feature \"age\" is declared twice"), "{msg}");
    }
}

#[test]
fn a_shape_whose_product_wraps_to_the_feature_count_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "d.csv", "a,b,c,d,y\n1,2,3,4,0\n");
    // 2^62 + 1 times 4 wraps to 4 in a usize: the four features would pass unchecked.
    let shape = vec![(1usize << 62) + 1, 4, 1];
    let schema = Schema {
        shape: Some(shape.clone()),
        shape_provenance: Some(Provenance::Declared),
        ..Schema::default()
    };
    let msg = load(&Source::Csv(p), &opts(schema))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&format!("shape {shape:?}")) && msg.contains("overflows"),
        "{msg}"
    );
}
