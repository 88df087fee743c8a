//! The user's own inputs: npy/npz arrays, IDX files by path, image folders, gzipped and
//! delimited csv. Round trips write the same MNIST records in each format and train on each
//! with one seed: every format must give the same run as the IDX files.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::{dpml, mnist_data_dir};
use npyz::WriterBuilder;

/// How many MNIST training images the round trips use (enough for a real epoch, small enough
/// for a quick test).
const N: usize = 2000;

/// The first `N` MNIST training images as bytes and their labels, ordered by label (stable),
/// the order an image folder (one subfolder per class) is read in.
fn mnist_subset(data: &Path) -> (Vec<Vec<u8>>, Vec<u8>) {
    let dir = data.join("mnist");
    let find = |stem: &str| {
        let gz = dir.join(format!("{stem}.gz"));
        if gz.is_file() { gz } else { dir.join(stem) }
    };
    let images = dpml_data::idx::read_images(&find("train-images-idx3-ubyte")).unwrap();
    let labels = dpml_data::idx::read_labels(&find("train-labels-idx1-ubyte")).unwrap();
    let side = images.rows * images.cols;
    let mut records: Vec<(u8, Vec<u8>)> = (0..N)
        .map(|i| {
            let px = images.pixels[i * side..(i + 1) * side]
                .iter()
                .map(|&p| (p * 255.0).round() as u8)
                .collect();
            (labels[i], px)
        })
        .collect();
    records.sort_by_key(|r| r.0);
    let y = records.iter().map(|r| r.0).collect();
    (records.into_iter().map(|r| r.1).collect(), y)
}

fn npy<T: npyz::AutoSerialize>(shape: &[u64], data: impl IntoIterator<Item = T>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut out)
        .begin_nd()
        .unwrap();
    w.extend(data).unwrap();
    w.finish().unwrap();
    out
}

fn idx(dims: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 8, dims.len() as u8];
    for &d in dims {
        out.extend_from_slice(&(d as u32).to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

fn npz(path: &Path, members: &[(&str, Vec<u8>)]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    for (name, bytes) in members {
        zip.start_file(format!("{name}.npy"), opts).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

/// Square grey images of `side` pixels as PNGs, one subfolder per label.
fn png_folder(dir: &Path, side: u32, images: &[Vec<u8>], labels: &[u8]) {
    for (i, (px, &y)) in images.iter().zip(labels).enumerate() {
        let class = dir.join(y.to_string());
        std::fs::create_dir_all(&class).unwrap();
        let img = image::GrayImage::from_raw(side, side, px.clone()).unwrap();
        img.save(class.join(format!("{i:05}.png"))).unwrap();
    }
}

/// A Parquet table (snappy) of FLOAT columns `p0…` holding the pixels of `images` scaled to
/// [0, 1] as the IDX reader scales them, and an INT32 label column `y`.
fn parquet_table(path: &Path, images: &[Vec<u8>], labels: &[u8]) {
    use parquet::data_type::{FloatType, Int32Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    let d = images[0].len();
    let mut message = String::from("message mnist {\n");
    for j in 0..d {
        message.push_str(&format!("REQUIRED FLOAT p{j};\n"));
    }
    message.push_str("REQUIRED INT32 y;\n}");
    let schema =
        std::sync::Arc::new(parquet::schema::parser::parse_message_type(&message).unwrap());
    let props = WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = SerializedFileWriter::new(file, schema, props.into()).unwrap();
    let mut group = writer.next_row_group().unwrap();
    let mut j = 0;
    while let Some(mut column) = group.next_column().unwrap() {
        if j < d {
            let values: Vec<f32> = images.iter().map(|px| f32::from(px[j]) / 255.0).collect();
            column
                .typed::<FloatType>()
                .write_batch(&values, None, None)
                .unwrap();
        } else {
            let values: Vec<i32> = labels.iter().map(|&l| i32::from(l)).collect();
            column
                .typed::<Int32Type>()
                .write_batch(&values, None, None)
                .unwrap();
        }
        column.close().unwrap();
        j += 1;
    }
    group.close().unwrap();
    writer.close().unwrap();
}

/// The numbers of one seeded one-epoch training run on `dataset` with labels 0..9.
fn train(dataset: &str, extra: &[&str]) -> Vec<(String, serde_json::Value)> {
    let mut args = vec![
        "train",
        "--dataset",
        dataset,
        "--label-range",
        "0,9",
        "--epochs",
        "1",
        "--seed",
        "1",
        "--epsilon",
        "3",
        // One split key for every run (records then fall on the same side in each format).
        "--split-key",
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
        "--json",
    ];
    args.extend_from_slice(extra);
    let v = dpml(&args).json();
    let numbers: Vec<(String, serde_json::Value)> = [
        ("epsilon", &v["epsilon"]),
        ("train_size", &v["train_size"]),
        ("test_accuracy", &v["diagnostics"]["test_accuracy"]),
        ("train_accuracy", &v["diagnostics"]["train_accuracy"]),
        ("test_loss", &v["diagnostics"]["test_loss"]),
    ]
    .into_iter()
    .map(|(k, x)| (k.to_string(), x.clone()))
    .collect();
    assert!(numbers.iter().all(|(_, x)| x.is_number()), "{v}");
    numbers
}

#[test]
#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
fn mnist_as_npy_npz_and_png_trains_as_the_idx_files_do() {
    let data = mnist_data_dir();
    let (images, labels) = mnist_subset(&data);
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| -> PathBuf { dir.path().join(name) };
    let flat: Vec<u8> = images.concat();
    std::fs::write(p("images.idx"), idx(&[N, 28, 28], &flat)).unwrap();
    std::fs::write(p("labels.idx"), idx(&[N], &labels)).unwrap();
    let x = npy(&[N as u64, 28, 28], flat.iter().copied());
    let y = npy(&[N as u64], labels.iter().map(|&l| i64::from(l)));
    std::fs::write(p("x.npy"), &x).unwrap();
    std::fs::write(p("y.npy"), &y).unwrap();
    npz(&p("d.npz"), &[("x", x), ("y", y)]);
    png_folder(&p("png"), 28, &images, &labels);

    let show = |q: PathBuf| q.display().to_string();
    let cnn = ["--model", "cnn"];
    let reference = train(
        &format!("idx:{},{}", show(p("images.idx")), show(p("labels.idx"))),
        &cnn,
    );
    assert!(reference[0].1.as_f64().unwrap() > 0.0, "{reference:?}");
    for dataset in [
        format!("npy:{},{}", show(p("x.npy")), show(p("y.npy"))),
        format!("npz:{}", show(p("d.npz"))),
    ] {
        assert_eq!(train(&dataset, &cnn), reference, "{dataset}");
    }
    // A private run on images declares their shape (never read from an image).
    let folder = format!("images:{}", show(p("png")));
    assert_eq!(
        train(&folder, &["--model", "cnn", "--shape", "1,28,28"]),
        reference
    );
    // A table's columns hold the scaled pixels (the split hashes each record's features, so
    // they must be the same values): bounds declare their range, a shape lays them out as the
    // CNN's image.
    parquet_table(&p("mnist.parquet"), &images, &labels);
    std::fs::write(p("pixels.toml"), "bounds = [0, 1]\nshape = [1, 28, 28]\n").unwrap();
    let schema = show(p("pixels.toml"));
    let parquet = train(
        &format!("parquet:{}", show(p("mnist.parquet"))),
        &["--model", "cnn", "--schema", &schema],
    );
    assert_eq!(parquet, reference);
}

#[test]
fn a_stray_file_in_an_image_folder_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let img = vec![vec![0u8; 4 * 4]; 2];
    png_folder(dir.path(), 4, &img, &[0, 1]);
    std::fs::write(dir.path().join("1").join("notes.txt"), "not an image").unwrap();
    let ds = format!("images:{}", dir.path().display());
    dpml(&[
        "train",
        "--dataset",
        &ds,
        "--classes",
        "0,1",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("notes.txt");
    std::fs::remove_file(dir.path().join("1").join("notes.txt")).unwrap();
    // A subfolder that is not a declared class is refused, naming it.
    dpml(&[
        "train",
        "--dataset",
        &ds,
        "--classes",
        "0,2",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("subfolder \"1\"");
}

#[test]
fn malformed_and_undeclared_arrays_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    let y = dir.path().join("y.npy");
    std::fs::write(&x, b"\x93NUMPY garbage").unwrap();
    std::fs::write(&y, npy(&[2], [0i64, 1])).unwrap();
    let ds = format!("npy:{},{}", x.display(), y.display());
    let args = |ds: &str| {
        let run = dpml(&[
            "train",
            "--dataset",
            ds,
            "--classes",
            "0,1",
            "--bounds",
            "0,1",
            "--epsilon",
            "1",
        ]);
        (run.code, run.stderr)
    };
    let (code, err) = args(&ds);
    assert!(
        code == 2 && err.contains("x.npy") && err.contains("not a valid .npy"),
        "{err}"
    );
    std::fs::write(&x, npy(&[2, 3], [0.5f32, 0.1, 0.2, 0.3, 0.4, 0.5])).unwrap();
    std::fs::write(&y, npy(&[2], [0i64, 7])).unwrap();
    dpml(&[
        "train",
        "--dataset",
        &ds,
        "--classes",
        "0,1",
        "--bounds",
        "0,1",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("record 2: label \"7\"");
    let npz_path = dir.path().join("nothing.npz");
    std::fs::write(&npz_path, b"PK not really").unwrap();
    dpml(&[
        "train",
        "--dataset",
        &format!("npz:{}", npz_path.display()),
        "--classes",
        "0,1",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("nothing.npz");
}

#[test]
fn gzipped_csv_with_a_delimiter_reads_as_the_plain_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("a;b;y\n");
    for i in 0..200 {
        text.push_str(&format!("{};{};{}\n", i % 7, (i * 3) % 5, i % 2));
    }
    let plain = dir.path().join("t.csv");
    std::fs::write(&plain, text.replace(';', ",")).unwrap();
    let gz = dir.path().join("t.csv.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(text.as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let ds = |p: &Path| format!("csv:{}", p.display());
    let tabular = ["--bounds", "0,10"];
    let a = train(&ds(&plain), &tabular);
    let b = train(&ds(&gz), &["--bounds", "0,10", "--delimiter", ";"]);
    assert_eq!(a, b);
    dpml(&[
        "train",
        "--dataset",
        &ds(&gz),
        "--delimiter",
        "ab",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("delimiter");
}

#[test]
fn categorical_columns_and_fill_values_follow_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("s.toml");
    std::fs::write(
        &schema,
        "label_range = [0, 9]\nbounds = [0, 10]\n\
         [[features]]\nname = \"a\"\nfill = 5\n\
         [[features]]\nname = \"colour\"\ncategories = [\"red\", \"green\"]\n",
    )
    .unwrap();
    let csv = dir.path().join("t.csv");
    let mut text = String::from("a,colour,y\n");
    for i in 0..200 {
        let a = if i % 10 == 0 {
            String::new()
        } else {
            (i % 7).to_string()
        };
        text.push_str(&format!("{a},{},{}\n", ["red", "green"][i % 2], i % 2));
    }
    std::fs::write(&csv, &text).unwrap();
    let ds = format!("csv:{}", csv.display());
    let schema = schema.display().to_string();
    let v = dpml(&[
        "train",
        "--dataset",
        &ds,
        "--schema",
        &schema,
        "--epsilon",
        "3",
        "--seed",
        "1",
        "--epochs",
        "1",
        "--json",
    ])
    .json();
    assert!(v["epsilon"].as_f64().unwrap() <= 3.0, "{v}");
    // One-hot columns: the record has 1 + 2 features, the one-hot ones in [0, 1].
    assert_eq!(
        v["normalize"]["ranges"],
        serde_json::json!([[0.0, 10.0], [0.0, 1.0], [0.0, 1.0]]),
        "{v}"
    );
    let bad = text.replacen("green", "blue", 1);
    std::fs::write(&csv, bad).unwrap();
    dpml(&[
        "train",
        "--dataset",
        &ds,
        "--schema",
        &schema,
        "--epsilon",
        "3",
    ])
    .assert_usage_error(
        "line 3, column \"colour\": \"blue\" is not one of the declared categories",
    );
    let no_fill = dir.path().join("nofill.toml");
    std::fs::write(
        &no_fill,
        "label_range = [0, 9]\nbounds = [0, 10]\n\
         [[features]]\nname = \"a\"\n\
         [[features]]\nname = \"colour\"\ncategories = [\"red\", \"green\"]\n",
    )
    .unwrap();
    std::fs::write(&csv, &text).unwrap();
    let no_fill = no_fill.display().to_string();
    dpml(&[
        "train",
        "--dataset",
        &ds,
        "--schema",
        &no_fill,
        "--epsilon",
        "3",
    ])
    .assert_usage_error("line 2, column \"a\": missing value");
}

/// Local-DP input perturbation on colour images of an odd size: every pixel of every
/// channel is one feature, so a record's ε composes over 3 × 17 × 23 of them, and that
/// composed ε is what the run states beside DP-SGD's.
#[test]
fn input_perturbation_on_colour_images_states_the_composed_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    for (class, shade) in [("dark", 30u8), ("light", 220)] {
        std::fs::create_dir(dir.path().join(class)).unwrap();
        for i in 0..10u8 {
            let img = image::RgbImage::from_fn(23, 17, |x, y| {
                image::Rgb([shade, shade.wrapping_add(i), (x + y) as u8])
            });
            img.save(dir.path().join(class).join(format!("{i}.png")))
                .unwrap();
        }
    }
    let ds = format!("images:{}", dir.path().display());
    let v = dpml(&[
        "train",
        "--dataset",
        &ds,
        "--classes",
        "dark,light",
        "--shape",
        "3,17,23",
        "--model",
        "logreg",
        "--epsilon",
        "2",
        "--input-perturbation",
        "laplace",
        "--input-epsilon",
        "0.01",
        "--batch-size",
        "8",
        "--seed",
        "3",
        "--json",
    ])
    .json();
    let per_record = v["epsilon_per_record"].as_f64().unwrap();
    let features = 3.0 * 17.0 * 23.0;
    assert!((per_record - 0.01 * features).abs() < 1e-9, "{v}");
    assert!(v["epsilon"].as_f64().unwrap() <= 2.0, "{v}");
}

/// An image folder's shape is declared for a private run: one RGB image named to be read
/// first would otherwise turn every grey record into three channels and change the model.
#[test]
fn private_runs_on_images_need_a_declared_shape() {
    let dir = tempfile::tempdir().unwrap();
    let grey: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i * 10; 64]).collect();
    let labels: Vec<u8> = (0..20).map(|i| i % 2).collect();
    png_folder(dir.path(), 8, &grey, &labels);
    let ds = format!("images:{}", dir.path().display());
    let run = |extra: &[&str]| {
        let mut args = vec![
            "train",
            "--dataset",
            &ds,
            "--classes",
            "0,1",
            "--model",
            "logreg",
            "--epochs",
            "1",
            "--batch-size",
            "4",
            "--seed",
            "1",
            "--json",
        ];
        args.extend_from_slice(extra);
        dpml(&args)
    };
    run(&["--epsilon", "1"]).assert_usage_error("--shape");
    let declared = run(&["--epsilon", "1", "--shape", "1,8,8"]).json();
    assert!(declared["train_size"].as_u64().unwrap() > 0, "{declared}");
    // The RGB image read first changes nothing a private run uses: its declared grey shape
    // holds, the image is converted to it.
    image::RgbImage::from_pixel(8, 8, image::Rgb([255, 0, 0]))
        .save(dir.path().join("0").join("aaa.png"))
        .unwrap();
    run(&["--epsilon", "1"]).assert_usage_error("--shape");
    let v = run(&["--epsilon", "1", "--shape", "1,8,8"]).json();
    assert_eq!(v["schema"]["shape"], "declared", "{v}");
    // A non-private look at the data may take the first image's shape, and says so.
    let v = run(&["--non-private"]).json();
    assert_eq!(
        v["schema"]["shape"], "inferred from the records (not private)",
        "{v}"
    );
}
