//! The public entry points as the CLI calls them: `load` and `load_table` for every kind of
//! source, and their errors.

use dpml_data::{DataError, EMBEDDED_LABEL_COLUMN, LoadOptions, Source, catalog, load, load_table};

#[test]
fn embedded_sets_have_their_published_shapes() {
    let want = [
        (Source::Iris, 150, 4, 3),
        (Source::BreastCancer, 569, 30, 2),
        (Source::Wine, 178, 13, 3),
        (Source::Digits, 1797, 64, 10),
    ];
    let opts = LoadOptions::default();
    for (source, rows, features, classes) in want.clone() {
        let s = load(&source, &opts).unwrap();
        assert!(s.test.is_none());
        let d = s.train;
        assert_eq!(
            (d.n, d.n_features(), d.n_classes),
            (rows, features, classes),
            "{source}"
        );
        assert_eq!(d.name, source.name());
        let t = load_table(&source, &opts).unwrap();
        assert_eq!(t.n_rows(), rows);
        assert_eq!(
            t.columns.last().map(String::as_str),
            Some(EMBEDDED_LABEL_COLUMN)
        );
        assert_eq!(&t.columns[..features], &d.feature_names[..]);
        // Both views agree on every value.
        for j in 0..features {
            let col = t.column(&d.feature_names[j]).unwrap();
            assert!(
                (0..rows).all(|i| col[i] as f32 == d.row(i)[j]),
                "{source} column {j}"
            );
        }
    }
    let info = catalog(None);
    for (source, rows, features, classes) in want {
        let i = info.iter().find(|i| i.name == source.name()).unwrap();
        assert_eq!(
            (i.rows, i.features, i.classes),
            (Some(rows), Some(features), Some(classes))
        );
    }
}

#[test]
fn csv_source_with_label_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("people.csv");
    std::fs::write(&path, "age,group,income\n31,b,1200\n45,a,800.5\n27,b,990\n").unwrap();
    let source: Source = format!("csv:{}", path.display()).parse().unwrap();
    let opts = LoadOptions {
        data_dir: None,
        label_column: Some("group".into()),
        ..LoadOptions::default()
    };
    let d = load(&source, &opts).unwrap().train;
    assert_eq!(d.feature_names, vec!["age", "income"]);
    assert_eq!(d.class_names, vec!["a", "b"]);
    assert_eq!(d.y, vec![1, 0, 1]);
    assert_eq!(d.row(1), &[45.0, 800.5]);
    let t = load_table(&source, &opts).unwrap();
    assert_eq!(t.column("income").unwrap(), &[1200.0, 800.5, 990.0]);
    // Text labels without declared classes are their index among the texts the records hold:
    // one record with a new text would renumber every other, so the column is refused.
    let msg = t.column("group").unwrap_err().to_string();
    assert!(
        msg.contains("\"group\" holds text") && msg.contains("--schema"),
        "{msg}"
    );
    // Declared, the classes fix each text's number.
    let declared = LoadOptions {
        schema: Some(
            dpml_data::Schema::default()
                .with_classes(vec!["a".into(), "b".into()])
                .unwrap(),
        ),
        ..opts.clone()
    };
    let t = load_table(&source, &declared).unwrap();
    assert_eq!(t.column("group").unwrap(), &[1.0, 0.0, 1.0]);
    // One label `NaN` among numbers makes every label a text, coded from the records.
    let nan = dir.path().join("nan.csv");
    std::fs::write(&nan, "x,lab\n1,5\n2,5\n3,NaN\n").unwrap();
    let nan: Source = format!("csv:{}", nan.display()).parse().unwrap();
    let coded = load_table(&nan, &LoadOptions::default()).unwrap();
    assert!(coded.column("lab").is_err());
    assert_eq!(coded.column("x").unwrap(), &[1.0, 2.0, 3.0]);
    let msg = t.column("salary").unwrap_err().to_string();
    assert!(
        msg.contains("\"salary\"") && msg.contains("\"age\", \"group\", \"income\""),
        "{msg}"
    );

    // Default label: the last column (income); the text column `group` must then be numeric.
    for msg in [
        load(&source, &LoadOptions::default())
            .unwrap_err()
            .to_string(),
        load_table(&source, &LoadOptions::default())
            .unwrap_err()
            .to_string(),
    ] {
        assert!(
            msg.contains("people.csv: line 2, column \"group\": \"b\" is not a number"),
            "{msg}"
        );
    }
    // A numeric last column stays numeric in the table.
    let nums = dir.path().join("nums.csv");
    std::fs::write(
        &nums,
        "x,y
1,0.5
2,-3
",
    )
    .unwrap();
    let t = load_table(&Source::Csv(nums), &LoadOptions::default()).unwrap();
    assert_eq!(t.column("y").unwrap(), &[0.5, -3.0]);
}

#[test]
fn label_column_is_refused_for_named_sets() {
    let opts = LoadOptions {
        data_dir: None,
        label_column: Some("species".into()),
        ..LoadOptions::default()
    };
    for source in [Source::Iris, Source::Mnist] {
        let err = load(&source, &opts).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::InvalidParameter {
                    name: "label_column",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("\"species\""), "{err}");
    }
}

#[test]
fn missing_idx_files_point_to_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LoadOptions {
        data_dir: Some(dir.path().into()),
        label_column: None,
        ..LoadOptions::default()
    };
    let msg = load(&Source::Mnist, &opts).unwrap_err().to_string();
    assert!(
        msg.contains(&dir.path().join("mnist").display().to_string()),
        "{msg}"
    );
    assert!(msg.contains("dpml data fetch mnist --to"), "{msg}");
    let msg = load_table(&Source::FashionMnist, &opts)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("fashion-mnist"), "{msg}");
}
