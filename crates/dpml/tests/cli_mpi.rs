//! `mpirun -np 2 dpml …` against one process (only with `--features mpi`; needs `mpirun` on
//! the PATH, see .ci/mpi.sh). Run as root they pass `--allow-run-as-root`.
#![cfg(feature = "mpi")]

mod common;

use std::path::Path;
use std::process::Command;

use common::{Run, from_output};

/// `dpml args…` under `mpirun -np ranks`.
fn mpirun(ranks: usize, args: &[&str]) -> Run {
    let o = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(ranks.to_string())
        .arg(env!("CARGO_BIN_EXE_dpml"))
        .args(args)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .expect("run mpirun (install openmpi-bin)");
    from_output(o)
}

/// Every parameter value of a saved model.
fn params(path: &Path) -> Vec<f32> {
    let saved = dpml_learn::dpsgd::load_saved(path).unwrap();
    saved
        .model
        .params()
        .iter()
        .flat_map(|p| p.value.iter().copied())
        .collect()
}

/// One epoch of digits, seeded: 2 ranks (each clipping its share of every Poisson batch, the
/// root adding the noise) give the model of 1 process up to the order of the f32 sums (max
/// parameter difference < 1e-5), the same per-epoch batch statistics (so the same batch
/// membership), the same ε and the same JSON fields; only the root writes. Exact noise (the
/// default), added to the sum of the ranks' shares on the root.
#[test]
fn two_ranks_train_the_model_of_one() {
    two_ranks_match_one(&[]);
}

/// As [`two_ranks_train_the_model_of_one`] with float noise, which the root writes into its
/// gradient buffers before its own share is added and the other ranks' shares are summed in.
#[test]
fn two_ranks_train_the_model_of_one_with_float_noise() {
    two_ranks_match_one(&["--float-noise"]);
}

fn two_ranks_match_one(extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let run = |ranks: usize| {
        let model = dir.path().join(format!("m{ranks}.safetensors"));
        let log = dir.path().join(format!("log{ranks}.csv"));
        let mut args = vec![
            "train",
            "--dataset",
            "digits",
            "--epsilon",
            "1",
            "--epochs",
            "1",
            "--seed",
            "11",
            "--save-model",
            model.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(extra);
        let r = mpirun(ranks, &args);
        (
            r.json(),
            params(&model),
            std::fs::read_to_string(log).unwrap(),
        )
    };
    let (one, p1, log1) = run(1);
    let (two, p2, log2) = run(2);
    let mut keys1: Vec<_> = one.as_object().unwrap().keys().collect();
    let mut keys2: Vec<_> = two.as_object().unwrap().keys().collect();
    keys1.sort();
    keys2.sort();
    assert_eq!(keys1, keys2);
    for f in [
        "epsilon",
        "steps",
        "noise_multiplier",
        "sampling_rate",
        "split_key",
        "seeded",
    ] {
        assert_eq!(one[f], two[f], "{f}");
    }
    let diff = p1
        .iter()
        .zip(&p2)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert_eq!(p1.len(), p2.len());
    assert!(diff < 1e-5, "max parameter difference {diff}");
    // The epoch's training loss is summed over the batches' records: equal to summation
    // order only if every step had the same members.
    let row = |log: &str| -> Vec<f64> {
        log.lines()
            .nth(1)
            .unwrap()
            .split(',')
            .take(4)
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let (r1, r2) = (row(&log1), row(&log2));
    assert_eq!(r1[1], r2[1]);
    assert!(
        (r1[2] - r2[2]).abs() < 1e-6 * r1[2].abs().max(1.0),
        "{r1:?} {r2:?}"
    );
}

/// A sweep's runs divided between 2 ranks give the results of one process, bit for bit.
#[test]
fn sweep_under_two_ranks_matches_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let run = |ranks: usize| {
        let out = dir.path().join(format!("sweep{ranks}"));
        let r = mpirun(
            ranks,
            &[
                "sweep",
                "--experiment",
                "kmeans",
                "--dataset",
                "iris",
                "--epsilons",
                "0.05,30",
                "--repeats",
                "3",
                "--seed",
                "3",
                "--out",
                out.to_str().unwrap(),
                "--json",
            ],
        );
        let v = r.json();
        (
            v["runs"].clone(),
            std::fs::read_to_string(out.join("results.csv")).unwrap(),
        )
    };
    let (runs1, csv1) = run(1);
    let (runs2, csv2) = run(2);
    assert_eq!(runs1, runs2);
    assert_eq!(csv1, csv2);
}

/// A LiRA audit's target and reference models divided between 2 ranks give the attack
/// results and bounds of one process with the same seed.
#[test]
fn lira_audit_under_two_ranks_matches_one_process() {
    let run = |ranks: usize| {
        let v = mpirun(
            ranks,
            &[
                "audit",
                "--dataset",
                "digits",
                "--model",
                "logreg",
                "--attack",
                "loss,lira",
                "--reference-models",
                "4",
                "--train-size",
                "300",
                "--epochs",
                "3",
                "--epsilon",
                "4",
                "--seed",
                "5",
                "--no-cache",
                "--json",
            ],
        )
        .json();
        (
            v["attacks"].clone(),
            v["epsilon_lower_bound"].clone(),
            v["epsilon_theoretical"].clone(),
        )
    };
    let one = run(1);
    assert!(one.0["lira"].is_object(), "{one:?}");
    assert_eq!(one, run(2));
}

/// A rank that dies ends the job with a non-zero status and a message naming it, and no
/// result is printed.
#[test]
fn a_dying_rank_ends_the_job() {
    let script = format!(
        "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then sleep 1; kill -9 $$; fi; exec {} train \
         --dataset digits --epsilon 1 --epochs 30 --seed 1 --json",
        env!("CARGO_BIN_EXE_dpml")
    );
    let o = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "2",
            "sh",
            "-c",
        ])
        .arg(script)
        .output()
        .unwrap();
    let r = from_output(o);
    assert_ne!(r.code, 0);
    assert!(r.stdout.trim().is_empty(), "{}", r.stdout);
    assert!(r.stderr.contains("rank 1"), "{}", r.stderr);
}

/// `mpirun` with one process per argument list (MPI's colon-separated app contexts): each
/// rank runs its own command line.
fn mpirun_each(ranks: &[Vec<String>]) -> Run {
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "--oversubscribe"]);
    for (i, args) in ranks.iter().enumerate() {
        if i > 0 {
            c.arg(":");
        }
        c.args(["-np", "1"])
            .arg(env!("CARGO_BIN_EXE_dpml"))
            .args(args);
    }
    from_output(
        c.env("RAYON_NUM_THREADS", "1")
            .output()
            .expect("run mpirun (install openmpi-bin)"),
    )
}

/// Ranks that loaded other data or another recipe (a table with a row less, a renamed
/// column, more epochs) are refused before the first step, naming the rank and what differs.
#[test]
fn ranks_that_disagree_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let table = |name: &str, header: &str, rows: usize| {
        let mut text = format!("{header}\n");
        for i in 0..rows {
            text.push_str(&format!("{},{},{}\n", i % 7, (i * 3) % 5, i % 2));
        }
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        format!("csv:{}", path.display())
    };
    let base = table("a.csv", "a,b,y", 200);
    let args = |dataset: &str, epochs: &str| -> Vec<String> {
        [
            "train",
            "--dataset",
            dataset,
            "--classes",
            "0,1",
            "--bounds",
            "0,10",
            "--model",
            "logreg",
            "--epsilon",
            "1",
            "--epochs",
            epochs,
            "--seed",
            "1",
            "--json",
        ]
        .map(String::from)
        .to_vec()
    };
    let agree = mpirun_each(&[args(&base, "1"), args(&base, "1")]);
    assert_eq!(agree.code, 0, "{}", agree.stderr);
    for (other, epochs, what) in [
        (table("short.csv", "a,b,y", 199), "1", "training-set size N"),
        (table("renamed.csv", "a,c,y", 200), "1", "data schema"),
        (base.clone(), "2", "step count T"),
    ] {
        let r = mpirun_each(&[args(&base, "1"), args(&other, epochs)]);
        assert_ne!(r.code, 0, "{what}: {}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("rank 1 disagrees with rank 0 on the {what}")),
            "{what}: {}",
            r.stderr
        );
    }
}
