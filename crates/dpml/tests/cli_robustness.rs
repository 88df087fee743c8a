//! The command-line contract under hostile or careless input: exit 2 (bad input, one `error:`
//! line naming the value) or 1 (runtime failure), never a panic (101), an abort (134) or a hang.

mod common;
use common::{Run, command, dpml, from_output};

use std::process::Stdio;
use std::time::{Duration, Instant};

/// Address space granted to each run (`ulimit -v`, KiB): 4 GiB, ample for every refusal here and
/// far below what a size taken on trust from a file or flag would ask for (16 TiB in the issue).
const ADDRESS_SPACE_KIB: u64 = 4 << 20;

/// Run dpml, killing it and failing the test if it takes longer than `limit` (a hang); it runs
/// under an address-space limit, so allocating what a hostile input declares fails the test.
fn dpml_within(args: &[&str], limit: Duration) -> Run {
    let dpml = command(&[]);
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(dpml.get_program())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dpml");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("poll dpml").is_some() {
            return from_output(child.wait_with_output().expect("collect dpml"));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dpml {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

const FIVE_S: Duration = Duration::from_secs(5);

/// Item 3: with stderr closed, the error line cannot be written, and the exit code still says 2.
#[test]
fn closed_stderr_and_full_disk_do_not_panic() {
    let mut child = command(&[
        "query",
        "--dataset",
        "iris",
        "--column",
        "nope",
        "--aggregate",
        "count",
        "--epsilon",
        "1",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn dpml");
    // Close the read end before the child writes its error line: its write gets EPIPE.
    drop(child.stderr.take());
    let status = child.wait().expect("wait dpml");
    assert_eq!(status.code(), Some(2), "closed stderr: {status:?}");

    // A result that cannot be written (a full disk) is a failure, not a silent success.
    if std::path::Path::new("/dev/full").exists() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("open /dev/full");
        let o = command(&[
            "release",
            "--mechanism",
            "laplace",
            "--value",
            "1",
            "--sensitivity",
            "1",
            "--epsilon",
            "1",
            "--json",
        ])
        .stdout(full)
        .output()
        .expect("run dpml");
        let run = from_output(o);
        assert_eq!(run.code, 1, "full disk: {}", run.stderr);
        assert!(run.stderr.contains("stdout"), "{}", run.stderr);
    }
}

/// Item 6: clap's whole message on one line, and negative numbers refused by their flag.
#[test]
fn usage_errors_keep_clap_message_on_one_line() {
    let base = ["release", "--mechanism", "laplace", "--value", "1"];
    let missing = dpml(&[&base[..], &["--epsilon", "1"]].concat());
    missing.assert_usage_error("--sensitivity");

    let typo = dpml(&[&base[..], &["--sensitivity", "1", "--epslon", "1"]].concat());
    typo.assert_usage_error("similar argument exists: '--epsilon'");

    let bad_value = dpml(&[
        "release",
        "--mechanism",
        "laplce",
        "--value",
        "1",
        "--sensitivity",
        "1",
        "--epsilon",
        "1",
    ]);
    bad_value.assert_usage_error("possible values: laplace");

    let negative = dpml(&[&base[..], &["--sensitivity", "1", "--epsilon", "-1"]].concat());
    negative.assert_usage_error("'-1' for '--epsilon");
    // A negative value where one is allowed is taken as a value, not a flag.
    let run = dpml(&[
        "release",
        "--mechanism",
        "laplace",
        "--value",
        "-3",
        "--sensitivity",
        "1",
        "--epsilon",
        "1",
        "--json",
    ]);
    run.json();
}

/// A safetensors file holding `tensors` (F32) under the architecture JSON `arch`, written by
/// hand so a test can declare anything a hostile or damaged file might.
fn safetensors_file(
    dir: &tempfile::TempDir,
    arch: &str,
    tensors: &[(&str, &[usize], &[f32])],
) -> String {
    let mut header = serde_json::Map::new();
    header.insert(
        "__metadata__".into(),
        serde_json::json!({ "dpml_architecture": arch, "format": "pt" }),
    );
    let mut data = Vec::new();
    for (name, shape, values) in tensors {
        let start = data.len();
        data.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        header.insert(
            (*name).into(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let header = serde_json::Value::Object(header).to_string();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    let path = dir.path().join(format!(
        "model{}.safetensors",
        dir.path().read_dir().unwrap().count()
    ));
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

/// `dpml eval` of `model` on iris's split under the fixed `--split-seed 1`.
fn eval_iris(model: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "eval",
        "--model-file",
        model,
        "--dataset",
        "iris",
        "--split-seed",
        "1",
    ];
    args.extend_from_slice(extra);
    dpml(&args)
}

fn logreg_arch(inputs: usize, outputs: usize) -> String {
    format!(
        r#"{{"name":"logreg","input_shape":[{inputs}],"layers":[{{"type":"linear","in_features":{inputs},"out_features":{outputs}}}]}}"#
    )
}

/// Items 1 and 4: a saved model's declared sizes, weights and classes are checked against the
/// file and the data before anything is allocated or reported.
#[test]
fn saved_models_are_checked_before_use() {
    let dir = tempfile::tempdir().unwrap();
    // Declares Linear 4 → 2^40 (16 TiB) and holds eight values.
    let huge = safetensors_file(
        &dir,
        &logreg_arch(4, 1 << 40),
        &[("0.weight", &[2, 4], &[0.0; 8])],
    );
    assert!(std::fs::metadata(&huge).unwrap().len() < 600);
    for cmd in ["eval", "predict"] {
        let mut args = vec![cmd, "--model-file", &huge, "--dataset", "iris"];
        if cmd == "predict" {
            args.extend(["--epsilon", "1"]);
        } else {
            args.extend(["--split-seed", "1"]);
        }
        let run = dpml_within(&args, FIVE_S);
        run.assert_usage_error("parameters");
    }

    // A model file larger than any model (sparse: takes no disk) is refused before reading.
    let big = dir.path().join("big.safetensors");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    dpml_within(
        &[
            "predict",
            "--model-file",
            big.to_str().unwrap(),
            "--dataset",
            "iris",
            "--epsilon",
            "1",
        ],
        FIVE_S,
    )
    .assert_usage_error("over the limit");

    // NaN weights: refused by tensor name, not evaluated to a null loss.
    let mut w = [0.1f32; 12];
    w[5] = f32::NAN;
    let nan = safetensors_file(
        &dir,
        &logreg_arch(4, 3),
        &[("0.weight", &[3, 4], &w), ("0.bias", &[3], &[0.0; 3])],
    );
    eval_iris(&nan, &[]).assert_usage_error("\"0.weight\"");

    // A 7-class model on 3-class data: refused naming both counts.
    let seven = safetensors_file(
        &dir,
        &logreg_arch(4, 7),
        &[
            ("0.weight", &[7, 4], &[0.1; 28]),
            ("0.bias", &[7], &[0.0; 7]),
        ],
    );
    eval_iris(&seven, &[]).assert_usage_error("7 classes");

    // The same file with the right class count is evaluated.
    let three = safetensors_file(
        &dir,
        &logreg_arch(4, 3),
        &[
            ("0.weight", &[3, 4], &[0.1; 12]),
            ("0.bias", &[3], &[0.0; 3]),
        ],
    );
    let v = eval_iris(&three, &["--json"]).json();
    assert!(v["diagnostics"]["test_loss"].is_number(), "{v}");
}

/// Item 1: layer widths and parameter counts are capped by name before anything is built.
#[test]
fn oversized_models_are_refused_by_name() {
    dpml_within(
        &[
            "train",
            "--dataset",
            "iris",
            "--model",
            "mlp",
            "--hidden",
            "4000000000",
            "--epsilon",
            "1",
        ],
        FIVE_S,
    )
    .assert_usage_error("--hidden");
    // Each width under the cap, the whole over the parameter limit.
    dpml_within(
        &[
            "train",
            "--dataset",
            "iris",
            "--model",
            "mlp",
            "--hidden",
            "65536,65536",
            "--epsilon",
            "1",
        ],
        FIVE_S,
    )
    .assert_usage_error("parameters");
}

/// Counts that size an allocation or a thread pool are refused by name before it is made (each
/// of these aborted the process on the allocation, or started threads without end).
#[test]
fn counts_that_size_allocations_are_refused_by_name() {
    let out = std::env::temp_dir().join(format!("dpml-counts-{}", std::process::id()));
    let out = out.to_str().unwrap();
    let fit = "--dataset iris --model logreg --epochs 1 --epsilon 3";
    for (args, want) in [
        (format!("train {fit} --folds 4294967297"), "got 4294967297"),
        (
            format!(
                "sweep --experiment dp-sgd --epsilons 1 --repeats 1 --folds 4294967297 {fit} --out {out}"
            ),
            "got 4294967297",
        ),
        (
            format!("sweep --experiment kmeans --dataset iris --repeats 4294967297 --out {out}"),
            "'4294967297' for '--repeats",
        ),
        (
            format!("audit --attack loss --threads 4294967297 {fit}"),
            "'4294967297' for '--threads",
        ),
    ] {
        let args: Vec<&str> = args.split(' ').collect();
        dpml_within(&args, FIVE_S).assert_usage_error(want);
    }
    // The benchmark announces itself on stderr before it checks the size.
    let bench = dpml_within(
        &[
            "bench",
            "dpsgd",
            "--model",
            "mlp",
            "--batch-size",
            "4294967297",
            "--steps",
            "1",
        ],
        FIVE_S,
    );
    assert_eq!(bench.code, 2, "{}", bench.stderr);
    assert!(
        bench
            .stderr
            .trim_end()
            .lines()
            .last()
            .unwrap()
            .contains("batch_size 4294967297"),
        "{}",
        bench.stderr
    );
    let _ = std::fs::remove_dir_all(out);
}

/// Item 2: a huge ε sizes the k-means grid in closed form (it used to step down from 2^64),
/// and the iteration count is capped by name.
#[test]
fn kmeans_huge_epsilon_and_iterations_end() {
    let run = dpml_within(
        &[
            "kmeans",
            "--dataset",
            "iris",
            "--k",
            "3",
            "--epsilon",
            "1e308",
            "--json",
        ],
        FIVE_S,
    );
    run.json();
    dpml_within(
        &[
            "kmeans",
            "--dataset",
            "iris",
            "--k",
            "3",
            "--epsilon",
            "1",
            "--iterations",
            "100000",
        ],
        FIVE_S,
    )
    .assert_usage_error("'100000' for '--iterations");
}

/// Item 4: a value the exact sampler cannot represent is refused, not silently clamped; a
/// data folder that is not there is not "verified".
#[test]
fn unrepresentable_values_and_missing_folders_are_refused() {
    dpml(&[
        "release",
        "--mechanism",
        "laplace",
        "--value",
        "1e308",
        "--sensitivity",
        "1",
        "--epsilon",
        "0.5",
    ])
    .assert_usage_error("value to release 1e308");
    let v = dpml(&[
        "release",
        "--mechanism",
        "laplace",
        "--value",
        "1e20",
        "--sensitivity",
        "1",
        "--epsilon",
        "0.5",
        "--json",
    ])
    .json();
    assert!(
        (v["values"][0].as_f64().unwrap() / 1e20 - 1.0).abs() < 1e-6,
        "{v}"
    );
    dpml(&["data", "verify", "--data-dir", "/nonexistent/dpml"])
        .assert_usage_error("/nonexistent/dpml");
}

/// Item 5: each command's defaults run on the built-in data sets (the default batch fits
/// RR-with-prior's first stage; `--model mlp` without `--hidden` gets a hidden layer).
#[test]
fn defaults_run_on_built_in_data_sets() {
    for ds in ["iris", "wine", "breast-cancer", "digits"] {
        for mechanism in ["rr", "rr-prior", "laplace"] {
            let v = dpml(&[
                "label-dp",
                "--dataset",
                ds,
                "--mechanism",
                mechanism,
                "--epsilon",
                "1",
                "--seed",
                "1",
                "--json",
            ])
            .json();
            assert!(v.is_object());
        }
    }
    // The default model of each set too (digits once defaulted to the 28x28 MNIST CNN).
    for ds in ["iris", "digits"] {
        for model in [&["--model", "mlp"][..], &[]] {
            let base = [
                "train",
                "--dataset",
                ds,
                "--epsilon",
                "1",
                "--seed",
                "1",
                "--json",
            ];
            let v = dpml(&[&base[..], model].concat()).json();
            assert!(v.is_object());
        }
    }
}

/// Item 2: FIFOs and devices named as inputs are refused by name instead of blocking or
/// reading forever; an over-long CSV line is refused naming the line.
#[test]
fn special_files_and_huge_csv_lines_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = common::make_fifo(dir.path(), "fifo");
    let fifo = fifo.to_str().unwrap();
    let csv_fifo = format!("csv:{fifo}");
    let q = [
        "query",
        "--column",
        "a",
        "--aggregate",
        "count",
        "--epsilon",
        "1",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        ([&q[..], &["--dataset", &csv_fifo]].concat(), "--dataset"),
        (
            [&q[..], &["--dataset", "csv:/dev/zero"]].concat(),
            "/dev/zero",
        ),
        (
            vec!["eval", "--model-file", fifo, "--dataset", "iris"],
            "--model-file",
        ),
        (
            vec![
                "predict",
                "--model-file",
                fifo,
                "--dataset",
                "iris",
                "--epsilon",
                "1",
            ],
            "--model",
        ),
        (vec!["account", "--events", fifo], "--events"),
        (
            vec![
                "train",
                "--dataset",
                "iris",
                "--schema",
                fifo,
                "--epsilon",
                "1",
            ],
            "--schema",
        ),
        (
            vec![
                "query",
                "--dataset",
                "iris",
                "--column",
                "petal_length",
                "--aggregate",
                "count",
                "--epsilon",
                "1",
                "--ledger",
                fifo,
                "--budget",
                "3",
            ],
            "--ledger",
        ),
    ];
    for (args, flag) in cases {
        let run = dpml_within(&args, FIVE_S);
        run.assert_usage_error(flag);
        assert!(run.stderr.contains("not a regular file"), "{}", run.stderr);
    }

    let long = dir.path().join("long.csv");
    let mut text = String::from("a,label\n");
    text.push_str(&"1".repeat(2 << 20));
    text.push_str(",0\n");
    std::fs::write(&long, text).unwrap();
    let csv_long = format!("csv:{}", long.display());
    dpml_within(&[&q[..], &["--dataset", &csv_long]].concat(), FIVE_S)
        .assert_usage_error("line 2 holds");
}

/// `audit --scores` grew to gigabytes on `/dev/zero`, hung on a FIFO and took 4.6 GB for a
/// 500 MB sparse file: it is a regular file within the limits of every CSV input, refused by
/// name (the file and the limit) before it is read.
#[test]
fn audit_scores_is_a_regular_file_within_the_csv_limits() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = common::make_fifo(dir.path(), "fifo");
    let sparse = |name: &str, bytes: u64| {
        let path = dir.path().join(name);
        std::fs::File::create(&path)
            .unwrap()
            .set_len(bytes)
            .unwrap();
        path.display().to_string()
    };
    let audit =
        |scores: &str| dpml_within(&["audit", "--scores", scores, "--epsilon", "1"], FIVE_S);
    for special in [fifo.to_str().unwrap(), "/dev/zero"] {
        let run = audit(special);
        run.assert_usage_error("--scores");
        assert!(run.stderr.contains("not a regular file"), "{}", run.stderr);
    }
    audit(&sparse("scores.csv", 2 << 30)).assert_usage_error("over the limit of 1073741824");
    let long = dir.path().join("long.csv");
    std::fs::write(&long, format!("score,member\n{},1\n", "1".repeat(2 << 20))).unwrap();
    audit(long.to_str().unwrap()).assert_usage_error("line 2 holds");
}

/// Schemas, search spaces and events files were read whole: a 1.2 GB `tune --search` file
/// aborted on its allocation. Each is refused naming the file and its limit.
#[test]
fn schemas_search_spaces_and_events_files_are_within_their_limits() {
    let dir = tempfile::tempdir().unwrap();
    let sparse = |name: &str, bytes: u64| {
        let path = dir.path().join(name);
        std::fs::File::create(&path)
            .unwrap()
            .set_len(bytes)
            .unwrap();
        path.display().to_string()
    };
    let search = sparse("s.toml", 1200 << 20);
    dpml_within(
        &[
            "tune",
            "--dataset",
            "iris",
            "--epsilon",
            "1",
            "--search",
            &search,
        ],
        FIVE_S,
    )
    .assert_usage_error("over the limit of 1048576");
    for name in ["schema.toml", "schema.json"] {
        let schema = sparse(name, 1200 << 20);
        let run = dpml_within(
            &[
                "train",
                "--dataset",
                "iris",
                "--schema",
                &schema,
                "--epsilon",
                "1",
            ],
            FIVE_S,
        );
        run.assert_usage_error("over the limit of 16777216");
        assert!(run.stderr.contains(name), "{}", run.stderr);
    }
    let events = sparse("events.json", 1200 << 20);
    dpml_within(&["account", "--events", &events, "--delta", "1e-5"], FIVE_S)
        .assert_usage_error("over the limit of 16777216");
}

/// A conv layer's declared padding sizes its output: 10^5 asked for 320 GB (an abort) in every
/// command that builds an architecture, and 2^63 wrapped around and trained. Each is refused by
/// name, from a file and from a saved model.
#[test]
fn declared_layer_sizes_are_refused_by_name_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = |p: &std::path::Path| p.to_str().unwrap().to_string();
    for padding in ["100000", "9223372036854775808"] {
        let arch = format!(
            r#"{{"name": "pad", "input_shape": [1, 8, 8], "layers": [
            {{"type": "conv2d", "in_channels": 1, "out_channels": 2, "kernel": 3, "stride": 1, "padding": {padding}}},
            {{"type": "flatten"}}, {{"type": "linear", "in_features": 4, "out_features": 10}}]}}"#
        );
        let path = dir.path().join(format!("pad{padding}.json"));
        std::fs::write(&path, &arch).unwrap();
        assert!(arch.len() < 400);
        let file = d(&path);
        let out = d(&dir.path().join("sweep"));
        let fit = ["--dataset", "digits", "--arch", &file, "--epochs", "1"];
        let commands: Vec<Vec<&str>> = vec![
            vec!["arch", "show", &file],
            [&["train"], &fit[..], &["--epsilon", "1"]].concat(),
            vec!["bench", "dpsgd", "--arch", &file, "--steps", "1"],
            [
                &[
                    "sweep",
                    "--experiment",
                    "dp-sgd",
                    "--epsilons",
                    "1",
                    "--repeats",
                    "1",
                ],
                &fit[..],
                &["--out", &out],
            ]
            .concat(),
        ];
        for args in &commands {
            let run = dpml_within(args, FIVE_S);
            assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
            let last = run.stderr.trim_end().lines().last().unwrap_or_default();
            assert!(
                last.starts_with("error: ") && last.contains(&format!("padding {padding}")),
                "{args:?}: {}",
                run.stderr
            );
        }
        // The same architecture saved in a model file, with tensors of the declared shapes.
        let model = safetensors_file(
            &dir,
            &arch,
            &[
                ("0.weight", &[2, 1, 3, 3], &[0.1; 18]),
                ("0.bias", &[2], &[0.0; 2]),
                ("2.weight", &[10, 4], &[0.1; 40]),
                ("2.bias", &[10], &[0.0; 10]),
            ],
        );
        for args in [
            vec!["inspect", model.as_str()],
            vec![
                "eval",
                "--model-file",
                &model,
                "--dataset",
                "digits",
                "--split-seed",
                "1",
            ],
            vec![
                "predict",
                "--model-file",
                &model,
                "--dataset",
                "digits",
                "--epsilon",
                "1",
            ],
        ] {
            dpml_within(&args, FIVE_S).assert_usage_error(&format!("padding {padding}"));
        }
    }
}

/// An image header declaring 20 000 × 20 000 pixels in a file of 60 bytes, and a declared
/// shape of 10^10 pixels to resize to: refused by name, before anything is decoded.
#[test]
fn image_sizes_are_refused_before_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let class = dir.path().join("a");
    std::fs::create_dir(&class).unwrap();
    image::GrayImage::new(8, 8)
        .save(class.join("ok.png"))
        .unwrap();
    // A PNG header (IHDR) claiming 20000 x 20000, its image data cut.
    let full = {
        let mut png = Vec::new();
        image::GrayImage::new(1, 1)
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        png
    };
    let mut forged = full.clone();
    forged[16..20].copy_from_slice(&20_000u32.to_be_bytes());
    forged[20..24].copy_from_slice(&20_000u32.to_be_bytes());
    // The IHDR's CRC over its type and data.
    let mut crc = flate2::Crc::new();
    crc.update(&forged[12..29]);
    forged[29..33].copy_from_slice(&crc.sum().to_be_bytes());
    std::fs::write(class.join("huge.png"), &forged).unwrap();
    let ds = format!("images:{}", dir.path().display());
    let train = |extra: &[&str]| {
        let mut args = vec![
            "train",
            "--dataset",
            &ds,
            "--classes",
            "a",
            "--epsilon",
            "1",
        ];
        args.extend_from_slice(extra);
        dpml_within(&args, FIVE_S)
    };
    for extra in [&["--shape", "1,8,8"][..], &["--shape", "1,8,8", "--resize"]] {
        train(extra).assert_usage_error("20000x20000");
    }
    std::fs::remove_file(class.join("huge.png")).unwrap();
    train(&["--shape", "1,100000,100000", "--resize"]).assert_usage_error("1, 100000, 100000");
}

/// Rewrites the JSON of metadata entry `key` of the safetensors file `path` with `edit`.
fn edit_metadata(path: &str, key: &str, edit: impl Fn(&mut serde_json::Value)) {
    let path = std::path::Path::new(path);
    common::edit_safetensors_header(path, path, |header| {
        let entry = &mut header["__metadata__"][key];
        let mut value: serde_json::Value = serde_json::from_str(entry.as_str().unwrap()).unwrap();
        edit(&mut value);
        *entry = value.to_string().into();
    });
}

/// Privacy facts edited into a model file (ε = −1, δ = 2, σ = −5, q = 7) are not shown as
/// the model's guarantee but as invalid, by name; text from the file (its data set's name, its
/// architecture's name) reaches the terminal with control characters escaped.
#[test]
fn forged_model_facts_are_invalid_and_file_text_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.safetensors");
    let model = model.to_str().unwrap();
    dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--epsilon",
        "1",
        "--epochs",
        "1",
        "--save-model",
        model,
        "--json",
    ])
    .json();
    let v = dpml(&["inspect", model, "--json"]).json();
    assert_eq!(v["privacy"]["guarantee"], "dp-sgd", "{v}");
    edit_metadata(model, "dpml_privacy", |f| {
        f["epsilon"] = (-1.0).into();
        f["delta"] = 2.0.into();
        f["noise_multiplier"] = (-5.0).into();
        f["sampling_rate"] = 7.0.into();
        f["dataset"] = "\u{1b}[2Jiris".into();
    });
    let v = dpml(&["inspect", model, "--json"]).json();
    let p = &v["privacy"];
    assert_eq!(p["guarantee"], "invalid", "{v}");
    assert!(
        p.get("epsilon").is_none(),
        "a forged ε at the guarantee's place: {v}"
    );
    let problems = p["problems"].to_string();
    for name in [
        "epsilon -1",
        "delta 2",
        "noise_multiplier -5",
        "sampling_rate 7",
    ] {
        assert!(problems.contains(name), "{problems}");
    }
    let human = dpml(&["inspect", model]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.contains("invalid"), "{}", human.stdout);
    assert!(!human.stdout.contains('\u{1b}'), "{:?}", human.stdout);
    let eval = eval_iris(model, &["--json"]).json();
    assert_eq!(eval["model_privacy"]["guarantee"], "invalid", "{eval}");
    // An architecture named with a terminal escape.
    let arch = dir.path().join("a.json");
    std::fs::write(
        &arch,
        r#"{"name": "\u001b]0;owned\u0007x", "input_shape": [4], "layers": [{"type": "linear", "in_features": 4, "out_features": 3}]}"#,
    )
    .unwrap();
    let shown = dpml(&["arch", "show", arch.to_str().unwrap()]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        !shown.stdout.contains('\u{1b}') && !shown.stdout.contains('\u{7}'),
        "{:?}",
        shown.stdout
    );
    assert!(shown.stdout.contains("\\u{1b}"), "{:?}", shown.stdout);
}

/// `data fetch` from a server that accepts and never answers gives up after its few-second
/// read timeout (it waited 62 s), saying so; offline or not, the error says where the files
/// go by hand and how to check them; `data verify` counts missing files and fails on them.
#[test]
fn data_fetch_fails_in_seconds_and_says_how_to_install_by_hand() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        // Hold every connection open without a byte of answer.
        let held: Vec<_> = listener.incoming().flatten().collect();
        drop(held);
    });
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().to_str().unwrap();
    let start = Instant::now();
    let run = dpml_within(
        &["data", "fetch", "mnist", "--to", to, "--base-url", &base],
        Duration::from_secs(30),
    );
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let mnist = dir.path().join("mnist");
    for needle in [
        "no answer within 5 s",
        "train-labels-idx1-ubyte.gz",
        mnist.to_str().unwrap(),
        &format!("dpml data verify mnist --data-dir {to}"),
    ] {
        assert!(run.stderr.contains(needle), "{needle:?}: {}", run.stderr);
    }
    // Nothing is there: verify names the missing files and fails, for one set or all.
    for args in [
        vec!["data", "verify", "--data-dir", to],
        vec!["data", "verify", "mnist", "--data-dir", to],
    ] {
        let run = dpml(&args);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr.contains("missing:") && run.stderr.contains("t10k-images-idx3-ubyte.gz"),
            "{}",
            run.stderr
        );
    }
}
