//! Integration tests of the budget ledger: kill -9, concurrent processes, corrupt files,
//! budget mismatch, invalid input, and composition with an accountant.
//!
//! Child processes are this test binary run again: with `DPML_LEDGER_CHILD` set, the test
//! `child_process` acts as the child (and `--exact child_process` filters out all others);
//! without it, `child_process` does nothing.

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dpml_accounting::ledger::{
    Budget, Composition, Ledger, LedgerError, LedgerKey, Neighbouring, Segment, Spend,
};
use dpml_accounting::{Accountant, AccountingError, BoundKind, PrivacyEvent};
use dpml_mechanisms::DpRng;

const CHILD_ROLE: &str = "DPML_LEDGER_CHILD";
const CHILD_PATH: &str = "DPML_LEDGER_PATH";
const CHILD_BUDGET: &str = "DPML_LEDGER_BUDGET";
const CHILD_START_AT_MS: &str = "DPML_LEDGER_START_AT_MS";
/// A looping child stops by itself after this many spends if nobody kills it.
const LOOP_LIMIT: usize = 100_000;

fn laplace(label: &str, epsilon: f64) -> Spend {
    Spend::new(
        label,
        PrivacyEvent::Laplace {
            noise_multiplier: 1.0 / epsilon,
        },
        epsilon,
        0.0,
    )
}

fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    u64::try_from(since.as_millis()).expect("milliseconds fit in u64")
}

/// The child side. Prints `SPENT <id>` after each acknowledged spend, `OVER` when refused.
#[test]
fn child_process() {
    let Ok(role) = std::env::var(CHILD_ROLE) else {
        return;
    };
    let path = PathBuf::from(std::env::var(CHILD_PATH).expect("child path"));
    let budget = std::env::var(CHILD_BUDGET).expect("child budget");
    let (eps, delta) = budget.split_once(',').expect("budget as eps,delta");
    let budget = Budget::new(eps.parse().unwrap(), delta.parse().unwrap()).unwrap();
    if role == "crash_mid_write" {
        write_and_hang(&path);
        return;
    }
    if let Ok(at) = std::env::var(CHILD_START_AT_MS) {
        let at: u64 = at.parse().unwrap();
        std::thread::sleep(Duration::from_millis(at.saturating_sub(now_ms())));
    }
    let ledger = Ledger::open(&path, budget).expect("child opens the ledger");
    match role.as_str() {
        "spend_loop" => {
            for _ in 0..LOOP_LIMIT {
                let receipt = ledger
                    .spend_receipt(&laplace("loop", 0.001))
                    .expect("spend");
                println!("SPENT {}", receipt.entry.id);
            }
        }
        "spend_once" => match ledger.spend_receipt(&laplace("once", 0.3)) {
            Ok(receipt) => println!("SPENT {}", receipt.entry.id),
            Err(LedgerError::OverBudget { .. }) => println!("OVER"),
            Err(e) => panic!("unexpected error: {e}"),
        },
        other => panic!("unknown child role {other}"),
    }
}

/// Starts a big transaction on the ledger with a raw SQLite connection, forces SQLite to write
/// part of it into the database file (a one-page cache spills), says `READY` and waits to be
/// killed: a crash in the middle of a write, with a hot journal left behind.
fn write_and_hang(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("PRAGMA cache_size = 1; BEGIN IMMEDIATE;")
        .unwrap();
    for _ in 0..200 {
        conn.execute(
            "INSERT INTO ledger_entries (time_unix, command, dataset, label, event, epsilon, \
             delta, seal) VALUES (0, '', '', ?1, \
             '{\"type\":\"laplace\",\"noise_multiplier\":2.0}', 0.5, 0.0, '')",
            ["uncommitted ".repeat(200)],
        )
        .unwrap();
    }
    println!("READY");
    std::thread::sleep(Duration::from_secs(60));
}

fn spawn_child(role: &str, path: &Path, budget: Budget, start_at_ms: Option<u64>) -> Child {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args([
        "child_process",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ROLE, role)
    .env(CHILD_PATH, path)
    .env(CHILD_BUDGET, format!("{},{}", budget.epsilon, budget.delta))
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    if let Some(at) = start_at_ms {
        cmd.env(CHILD_START_AT_MS, at.to_string());
    }
    cmd.spawn().expect("spawn child")
}

/// The id in a `SPENT <id>` line. The marker may follow libtest's "test child_process ... "
/// on the same line.
fn spent_id(line: &str) -> Option<i64> {
    let (_, rest) = line.split_once("SPENT ")?;
    let id = rest.split_whitespace().next().expect("an id after SPENT");
    Some(id.parse().expect("a numeric id after SPENT"))
}

fn is_over(line: &str) -> bool {
    line.split_whitespace().any(|word| word == "OVER")
}

fn entry_ids(ledger: &Ledger) -> BTreeSet<i64> {
    ledger.entries().unwrap().iter().map(|e| e.id).collect()
}

#[test]
fn kill_9_never_loses_an_acknowledged_spend() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let budget = Budget::new(1e6, 0.0).unwrap();
    let mut acknowledged = BTreeSet::new();
    // Kill after k acknowledged spends: the child is then usually inside the next transaction.
    for k in [1, 7, 30] {
        let mut child = spawn_child("spend_loop", &path, budget, None);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = 0;
        while seen < k {
            let line = lines.next().expect("child ended before k spends").unwrap();
            if let Some(id) = spent_id(&line) {
                acknowledged.insert(id);
                seen += 1;
            }
        }
        child.kill().unwrap(); // SIGKILL on Unix
        // Lines written before the kill are still in the pipe: those spends were acknowledged too.
        acknowledged.extend(lines.map_while(Result::ok).filter_map(|l| spent_id(&l)));
        assert!(!child.wait().unwrap().success(), "the child was killed");

        let ledger = Ledger::open(&path, budget).expect("the ledger opens after kill -9");
        let ids = entry_ids(&ledger);
        let lost: Vec<_> = acknowledged.difference(&ids).collect();
        assert!(
            lost.is_empty(),
            "acknowledged spends lost after kill -9: {lost:?}"
        );
        let balance = ledger.balance().unwrap();
        assert_eq!(balance.entries, ids.len());
        // n spends of 0.001; the upward-rounded sum is within n ulps of n·0.001.
        let n = ids.len() as f64;
        assert!(
            (balance.spent_epsilon - 0.001 * n).abs() <= 1e-12 * n,
            "{balance:?}"
        );
    }
}

#[test]
fn kill_9_in_the_middle_of_a_write_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let budget = Budget::new(1.0, 0.0).unwrap();
    let ledger = Ledger::open(&path, budget).unwrap();
    ledger.spend(&laplace("committed", 0.25)).unwrap();
    let (entries, bytes) = (ledger.entries().unwrap(), fs::read(&path).unwrap());
    drop(ledger);

    let mut child = spawn_child("crash_mid_write", &path, budget, None);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|l| l.unwrap().contains("READY")),
        "the writer did not get ready"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let journal = dir.path().join("ledger.db-journal");
    assert!(journal.exists(), "the crash left no hot journal");
    assert_ne!(
        fs::read(&path).unwrap(),
        bytes,
        "the crash did not touch the database file"
    );

    // Opening recovers the last committed state from the journal.
    let ledger = Ledger::open(&path, budget).expect("a crashed write is recovered, not refused");
    assert_eq!(ledger.entries().unwrap(), entries);
    assert!(!journal.exists());
    assert_eq!(
        ledger
            .spend(&laplace("after", 0.75))
            .unwrap()
            .remaining_epsilon,
        0.0
    );
}

#[test]
fn kill_9_during_creation_leaves_no_half_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(1e6, 0.0).unwrap();
    // Delays that straddle process start-up and ledger creation: whatever the moment of the
    // kill, the path afterwards holds either nothing or a complete ledger.
    for (i, delay_ms) in [0, 1, 3, 6, 10, 15, 25].into_iter().enumerate() {
        let path = dir.path().join(format!("ledger-{i}.db"));
        let mut child = spawn_child("spend_loop", &path, budget, None);
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        let ledger = Ledger::open(&path, budget)
            .unwrap_or_else(|e| panic!("after a kill at {delay_ms} ms: {e}"));
        ledger.spend(&laplace("after", 0.5)).unwrap();
    }
    // Issue 35: a kill while creating left the temporary `.creating` file behind. The file is
    // written without a name (Linux: O_TMPFILE) and only linked once complete.
    #[cfg(target_os = "linux")]
    {
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".creating"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

#[test]
fn concurrent_processes_never_overspend() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(1.0, 0.0).unwrap();
    // Six processes each spend 0.3 of 1.0 at the same moment: exactly three fit. First on a
    // path that does not exist yet (the processes also race to create it), then on an
    // existing ledger.
    for fresh in [true, false] {
        let path = dir.path().join(format!("ledger-{fresh}.db"));
        if !fresh {
            Ledger::open(&path, budget).unwrap();
        }
        let start_at = now_ms() + 400;
        let children: Vec<Child> = (0..6)
            .map(|_| spawn_child("spend_once", &path, budget, Some(start_at)))
            .collect();
        let mut outcomes = Vec::new();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(output.status.success(), "a child failed: {output:?}");
            let stdout = String::from_utf8(output.stdout).unwrap();
            let outcome = stdout.lines().find(|l| spent_id(l).is_some() || is_over(l));
            outcomes.push(outcome.expect("child reported an outcome").to_string());
        }
        let spent: BTreeSet<i64> = outcomes.iter().filter_map(|l| spent_id(l)).collect();
        let over = outcomes.iter().filter(|l| is_over(l)).count();
        assert_eq!((spent.len(), over), (3, 3), "{outcomes:?}");
        let ledger = Ledger::open(&path, budget).unwrap();
        assert_eq!(entry_ids(&ledger), spent);
        let balance = ledger.balance().unwrap();
        assert!(balance.spent_epsilon <= budget.epsilon, "{balance:?}");
        assert!((balance.spent_epsilon - 0.9).abs() < 1e-12, "{balance:?}");
    }
}

#[test]
fn over_budget_is_refused_and_leaves_the_ledger_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = Ledger::open(&path, Budget::new(1.0, 1e-6).unwrap()).unwrap();
    let balance = ledger.spend(&laplace("first", 0.6)).unwrap();
    assert_eq!((balance.spent_epsilon, balance.entries), (0.6, 1));
    assert!((balance.remaining_epsilon - 0.4).abs() < 1e-15);

    let bytes = fs::read(&path).unwrap();
    let (entries, balance) = (ledger.entries().unwrap(), ledger.balance().unwrap());
    let err = ledger.spend(&laplace("second", 0.5)).unwrap_err();
    match &err {
        LedgerError::OverBudget {
            requested_epsilon,
            spent_epsilon,
            remaining_epsilon,
            budget_epsilon,
            total_epsilon,
            ..
        } => {
            assert_eq!(
                (*requested_epsilon, *spent_epsilon, *budget_epsilon),
                (0.5, 0.6, 1.0)
            );
            assert!((remaining_epsilon - 0.4).abs() < 1e-15);
            assert!((total_epsilon - 1.1).abs() < 1e-15);
        }
        other => panic!("expected OverBudget, got {other:?}"),
    }
    let message = err.to_string();
    for part in [
        "requested ε = 0.5",
        "spent ε = 0.6",
        "budget ε = 1",
        "nothing was recorded",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }
    // δ over budget is refused the same way.
    let too_much_delta = Spend {
        delta: 2e-6,
        ..laplace("delta", 0.1)
    };
    assert!(matches!(
        ledger.spend(&too_much_delta),
        Err(LedgerError::OverBudget { .. })
    ));
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "a refused spend changed the file"
    );
    assert_eq!(ledger.entries().unwrap(), entries);
    assert_eq!(ledger.balance().unwrap(), balance);

    // The rest of the budget can still be spent exactly, and then nothing more.
    let balance = ledger.spend(&laplace("rest", 0.4)).unwrap();
    assert_eq!(
        (balance.spent_epsilon, balance.remaining_epsilon),
        (1.0, 0.0)
    );
    assert!(ledger.spend(&laplace("more", 1e-9)).is_err());
}

#[test]
fn decimal_spends_add_up_as_a_user_expects() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("l.db"), Budget::new(1.0, 0.0).unwrap()).unwrap();
    // Ten spends of 0.1 exceed 1.0 by 5.6e-17 in exact binary arithmetic; the documented
    // relative slack of 1e-12 lets them fit, and the eleventh is refused.
    for _ in 0..10 {
        ledger.spend(&laplace("tenth", 0.1)).unwrap();
    }
    assert!(ledger.spend(&laplace("eleventh", 0.1)).is_err());
    assert_eq!(ledger.balance().unwrap().entries, 10);
}

#[test]
fn a_pure_epsilon_ledger_sums_epsilon_and_refuses_any_delta_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pure.db");
    let ledger = Ledger::open(&path, Budget::new(1.0, 0.0).unwrap()).unwrap();
    for eps in [0.25, 0.5] {
        ledger.spend(&laplace("count", eps)).unwrap();
    }
    let balance = ledger.balance().unwrap();
    assert_eq!((balance.spent_epsilon, balance.spent_delta), (0.75, 0.0));
    assert_eq!(balance.composition, "basic");

    // A Gaussian spend (δ > 0), even a tiny one with ε to spare, is refused by name.
    let bytes = fs::read(&path).unwrap();
    let gaussian = Spend::new(
        "mean",
        PrivacyEvent::Gaussian {
            noise_multiplier: 20.0,
        },
        0.1,
        1e-12,
    );
    let err = ledger.spend(&gaussian).unwrap_err();
    assert!(
        matches!(err, LedgerError::DeltaOnPureBudget { requested_delta, .. } if requested_delta == 1e-12),
        "{err:?}"
    );
    let message = err.to_string();
    for part in [
        "pure-epsilon",
        "delta = 0.000000000001",
        "nothing was recorded",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "a refused spend changed the file"
    );
    assert_eq!(ledger.balance().unwrap(), balance);
    // The same holds with an accountant composing the ledger, and reopened.
    let again = Ledger::open(&path, Budget::new(1.0, 0.0).unwrap())
        .unwrap()
        .with_composition(Composition::Accountant(Box::new(
            dpml_accounting::RdpAccountant::default(),
        )));
    assert!(matches!(
        again.spend(&gaussian),
        Err(LedgerError::DeltaOnPureBudget { .. })
    ));
    assert_eq!(
        again.spend(&laplace("rest", 0.25)).unwrap().spent_epsilon,
        1.0
    );
}

/// Writes `bytes` as a would-be ledger in its own directory, checks that opening it is refused
/// as corrupt and that the directory afterwards holds exactly the same single file.
fn assert_refused_untouched(root: &Path, name: &str, bytes: &[u8]) {
    let dir = root.join(name);
    fs::create_dir(&dir).unwrap();
    let path = dir.join("ledger.db");
    fs::write(&path, bytes).unwrap();
    for budget in [
        Budget::new(1.0, 1e-5).unwrap(),
        Budget::new(5.0, 0.0).unwrap(),
    ] {
        match Ledger::open(&path, budget) {
            Err(e @ LedgerError::Corrupt { .. }) => {
                assert!(e.to_string().contains(&path.display().to_string()), "{e}");
            }
            other => panic!("{name}: expected Corrupt, got {other:?}"),
        }
    }
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "{name}: the file was modified"
    );
    let names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        ["ledger.db"],
        "{name}: files were added beside the ledger"
    );
}

#[test]
fn corrupt_files_are_refused_and_left_byte_identical() {
    let root = tempfile::tempdir().unwrap();
    let real_path = root.path().join("real.db");
    let real = Ledger::open(&real_path, Budget::new(1.0, 1e-5).unwrap()).unwrap();
    for i in 0..5 {
        real.spend(&laplace(&format!("spend {i}"), 0.1)).unwrap();
    }
    drop(real);
    let real = fs::read(&real_path).unwrap();
    assert!(
        real.len() >= 4 * 4096,
        "a ledger spans several pages: {} bytes",
        real.len()
    );

    let mut rng = DpRng::seeded(7);
    let random: Vec<u8> = (0..8192).map(|_| rng.next_u64() as u8).collect();
    assert_refused_untouched(root.path(), "random", &random);
    assert_refused_untouched(root.path(), "empty", &[]);
    for cut in [16, 99, 100, 4096, real.len() / 2, real.len() - 1] {
        assert_refused_untouched(root.path(), &format!("truncated-{cut}"), &real[..cut]);
    }
    // Page 1 intact, every later page overwritten with random bytes.
    let mut scrambled = real.clone();
    scrambled[4096..]
        .iter_mut()
        .for_each(|b| *b = rng.next_u64() as u8);
    assert_refused_untouched(root.path(), "scrambled", &scrambled);

    // A valid SQLite database that is not a ledger.
    let foreign_path = root.path().join("foreign.db");
    let foreign = rusqlite::Connection::open(&foreign_path).unwrap();
    foreign
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT);")
        .unwrap();
    foreign
        .execute("INSERT INTO notes (text) VALUES ('hello')", [])
        .unwrap();
    drop(foreign);
    assert_refused_untouched(root.path(), "foreign", &fs::read(&foreign_path).unwrap());
}

#[test]
fn opening_with_another_budget_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    drop(Ledger::open(&path, Budget::new(1.0, 1e-5).unwrap()).unwrap());
    let bytes = fs::read(&path).unwrap();
    for (eps, delta) in [(2.0, 1e-5), (1.0, 1e-4), (0.5, 0.0)] {
        let err = Ledger::open(&path, Budget::new(eps, delta).unwrap()).unwrap_err();
        let LedgerError::BudgetMismatch {
            stored_epsilon,
            requested_epsilon,
            ..
        } = err
        else {
            panic!("expected BudgetMismatch, got {err:?}");
        };
        assert_eq!((stored_epsilon, requested_epsilon), (1.0, eps));
        let message = err.to_string();
        assert!(message.contains("ε = 1, δ = 0.00001"), "{message}");
        assert!(
            message.contains(&format!("ε = {eps}, δ = {delta}")),
            "{message}"
        );
    }
    assert_eq!(fs::read(&path).unwrap(), bytes);
    assert!(Ledger::open(&path, Budget::new(1.0, 1e-5).unwrap()).is_ok());
}

#[test]
fn invalid_budgets_and_spends_are_refused_naming_the_value() {
    let bad_budgets = [
        (0.0, 0.0, "got 0"),
        (-1.0, 0.0, "got -1"),
        (f64::NAN, 0.0, "got NaN"),
        (f64::INFINITY, 0.0, "got inf"),
        (1.0, 1.0, "delta must be in [0, 1), got 1"),
        (1.0, -0.1, "got -0.1"),
        (1.0, f64::NAN, "delta must be in [0, 1), got NaN"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    for (epsilon, delta, expected) in bad_budgets {
        let message = Budget::new(epsilon, delta).unwrap_err().to_string();
        assert!(
            message.contains(expected),
            "{message} should contain {expected:?}"
        );
        // The fields are public: open checks again, and creates no file.
        let err = Ledger::open(&path, Budget { epsilon, delta }).unwrap_err();
        assert!(matches!(err, LedgerError::InvalidParameter(_)), "{err:?}");
        assert!(!path.exists());
    }

    let ledger = Ledger::open(&path, Budget::new(1.0, 1e-5).unwrap()).unwrap();
    let bytes = fs::read(&path).unwrap();
    let bad_spends = [
        (
            Spend {
                epsilon: f64::NAN,
                ..laplace("nan", 0.1)
            },
            "epsilon must be finite and >= 0, got NaN",
        ),
        (
            Spend {
                epsilon: -0.1,
                ..laplace("neg", 0.1)
            },
            "got -0.1",
        ),
        (
            Spend {
                delta: 1.0,
                ..laplace("delta", 0.1)
            },
            "delta must be in [0, 1), got 1",
        ),
        (
            Spend {
                event: PrivacyEvent::Laplace {
                    noise_multiplier: f64::NAN,
                },
                ..laplace("e", 0.1)
            },
            "cannot be stored",
        ),
    ];
    for (spend, expected) in bad_spends {
        let err = ledger.spend(&spend).unwrap_err();
        assert!(matches!(err, LedgerError::InvalidParameter(_)), "{err:?}");
        assert!(
            err.to_string().contains(expected),
            "{err} should contain {expected:?}"
        );
    }
    assert_eq!(fs::read(&path).unwrap(), bytes);

    // A path in a missing directory is an error, not a panic.
    let missing = dir.path().join("no/such/dir/ledger.db");
    assert!(Ledger::open(&missing, Budget::new(1.0, 0.0).unwrap()).is_err());
}

/// A fake accountant: ε = per_event · √(number of events), at the ledger's δ only.
/// Randomized response is "unsupported".
struct SqrtAccountant {
    per_event: f64,
    bound: BoundKind,
    expected_delta: f64,
}

impl Accountant for SqrtAccountant {
    fn name(&self) -> &'static str {
        "sqrt"
    }
    fn bound(&self) -> BoundKind {
        self.bound
    }
    fn epsilon(&self, event: &PrivacyEvent, delta: f64) -> Result<f64, AccountingError> {
        if delta != self.expected_delta {
            return Err(AccountingError::InvalidParameter(format!(
                "unexpected δ = {delta}"
            )));
        }
        let PrivacyEvent::Composed { events } = event else {
            return Err(AccountingError::InvalidParameter(
                "expected a composition".into(),
            ));
        };
        if events
            .iter()
            .any(|e| matches!(e, PrivacyEvent::RandomizedResponse { .. }))
        {
            return Err(AccountingError::Unsupported("randomized response".into()));
        }
        Ok(self.per_event * (events.len() as f64).sqrt())
    }
    fn delta(&self, _: &PrivacyEvent, _: f64) -> Result<f64, AccountingError> {
        Err(AccountingError::Unsupported("not needed".into()))
    }
}

fn sqrt_ledger(dir: &Path, name: &str, budget: Budget, per_event: f64, bound: BoundKind) -> Ledger {
    let accountant = SqrtAccountant {
        per_event,
        bound,
        expected_delta: budget.delta,
    };
    Ledger::open(&dir.join(name), budget)
        .unwrap()
        .with_composition(Composition::Accountant(Box::new(accountant)))
}

#[test]
fn accountant_composition_takes_the_smaller_bound() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(1.0, 1e-5).unwrap();
    // Spends of ε = 0.04 against an accountant at 0.1·√n: basic (0.04·n) is tighter up to
    // n = 6, the accountant from n = 7 on; basic alone would stop at n = 25.
    let ledger = sqrt_ledger(dir.path(), "min.db", budget, 0.1, BoundKind::UpperBound);
    assert_eq!(ledger.balance().unwrap().composition, "sqrt");
    for n in 1..=40 {
        let spend = Spend {
            delta: 1e-7,
            ..laplace("step", 0.04)
        };
        let balance = ledger.spend(&spend).unwrap();
        let (basic, accountant) = (0.04 * f64::from(n), 0.1 * f64::from(n).sqrt());
        assert!(
            (balance.spent_epsilon - basic.min(accountant)).abs() < 1e-12,
            "n = {n}"
        );
        if basic < accountant {
            assert_eq!(balance.composition, "basic (tighter than sqrt)");
            assert!((balance.spent_delta - 1e-7 * f64::from(n)).abs() < 1e-18);
        } else {
            assert_eq!(balance.composition, "sqrt");
            assert_eq!(balance.spent_delta, budget.delta);
        }
        assert_eq!(ledger.balance().unwrap(), balance);
    }

    // The accountant also refuses: at 0.5·√n, four spends fit (ε = 1) and the fifth does not,
    // where basic composition alone would allow two.
    let ledger = sqrt_ledger(dir.path(), "over.db", budget, 0.5, BoundKind::UpperBound);
    for _ in 0..4 {
        ledger.spend(&laplace("half", 0.5)).unwrap();
    }
    match ledger.spend(&laplace("fifth", 0.5)) {
        Err(LedgerError::OverBudget {
            total_epsilon,
            composition,
            ..
        }) => {
            assert!((total_epsilon - 0.5 * 5f64.sqrt()).abs() < 1e-12);
            assert_eq!(composition, "sqrt");
        }
        other => panic!("expected OverBudget, got {other:?}"),
    }
    assert_eq!(ledger.entries().unwrap().len(), 4);
    // Reopened with basic composition, the same file shows Σε = 2 (over the budget, nothing
    // left) and refuses any further spend.
    let basic = Ledger::open(&dir.path().join("over.db"), budget).unwrap();
    let balance = basic.balance().unwrap();
    assert_eq!(
        (balance.spent_epsilon, balance.remaining_epsilon),
        (2.0, 0.0)
    );
    assert_eq!(balance.composition, "basic");
    assert!(basic.spend(&laplace("more", 0.01)).is_err());
}

#[test]
fn accountant_that_is_no_upper_bound_or_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(1.0, 1e-5).unwrap();
    for bound in [BoundKind::Approximation, BoundKind::LowerBound] {
        let ledger = sqrt_ledger(dir.path(), &format!("{bound:?}.db"), budget, 0.1, bound);
        let err = ledger.spend(&laplace("x", 0.1)).unwrap_err();
        assert!(matches!(err, LedgerError::Accountant { .. }), "{err:?}");
        assert!(err.to_string().contains("not an upper bound"), "{err}");
        assert!(ledger.balance().is_err());
        assert!(ledger.entries().unwrap().is_empty());
    }

    // An event the accountant does not support: basic composition, and the balance says so.
    let ledger = sqrt_ledger(dir.path(), "rr.db", budget, 0.1, BoundKind::UpperBound);
    let rr = Spend::new(
        "survey",
        PrivacyEvent::RandomizedResponse {
            epsilon: 0.5,
            categories: 2,
        },
        0.5,
        0.0,
    );
    let balance = ledger.spend(&rr).unwrap();
    assert!(
        balance.composition.starts_with("basic (sqrt unsupported"),
        "{balance:?}"
    );
    assert_eq!(balance.spent_epsilon, 0.5);

    // A pure-DP budget (δ = 0) gives the accountant nothing to convert at: basic.
    let pure = Budget::new(1.0, 0.0).unwrap();
    let ledger = sqrt_ledger(dir.path(), "pure.db", pure, 0.1, BoundKind::UpperBound);
    let balance = ledger.spend(&laplace("x", 0.3)).unwrap();
    assert_eq!((balance.spent_epsilon, balance.spent_delta), (0.3, 0.0));
    assert!(
        balance.composition.contains("need a δ budget > 0"),
        "{balance:?}"
    );
}

#[test]
fn a_ledger_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Ledger>();
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("l.db"), Budget::new(1.0, 0.0).unwrap()).unwrap();
    // Eight threads each try 0.25 of 1.0 on one Ledger: exactly four succeed.
    let successes = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| ledger.spend(&laplace("t", 0.25)).is_ok()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&ok| ok)
            .count()
    });
    assert_eq!(successes, 4);
    assert_eq!(ledger.balance().unwrap().spent_epsilon, 1.0);
}

#[test]
fn create_sets_the_budget_once_and_open_stored_reads_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("once.ledger");
    let missing = Ledger::open_stored(&path).unwrap_err();
    assert!(matches!(missing, LedgerError::Missing { .. }), "{missing}");
    assert!(
        !path.exists(),
        "opening a missing ledger must not create it"
    );
    let budget = Budget::new(2.0, 1e-6).unwrap();
    let created = Ledger::create(&path, budget).unwrap();
    created.spend(&laplace("first", 0.5)).unwrap();
    drop(created);
    let before = fs::read(&path).unwrap();
    let again = Ledger::create(&path, Budget::new(9.0, 0.0).unwrap()).unwrap_err();
    assert!(
        matches!(again, LedgerError::AlreadyExists { .. }),
        "{again}"
    );
    assert_eq!(
        fs::read(&path).unwrap(),
        before,
        "create must not touch a ledger"
    );

    let opened = Ledger::open_stored(&path).unwrap();
    assert_eq!(opened.budget(), budget);
    assert_eq!(opened.balance().unwrap().entries, 1);
    opened.require_budget(Some(2.0), None).unwrap();
    opened.require_budget(None, Some(1e-6)).unwrap();
    let other = opened.require_budget(Some(3.0), None).unwrap_err();
    assert!(
        matches!(other, LedgerError::BudgetMismatch { .. }),
        "{other}"
    );
    assert!(other.to_string().contains('3'), "{other}");
}

/// The fronts' way of opening a named ledger: a missing file is created only with a budget, an
/// existing one keeps its stored budget (a different one is refused), and the default δ applies.
#[test]
fn open_or_create_never_starts_a_budget_by_accident() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.ledger");
    assert!(matches!(
        Ledger::open_or_create(&path, None, None, &LedgerKey::Beside),
        Err(LedgerError::Missing { .. })
    ));
    assert!(!path.exists());
    let created = Ledger::open_or_create(&path, Some(2.0), None, &LedgerKey::Beside).unwrap();
    assert_eq!(
        created.budget(),
        Budget {
            epsilon: 2.0,
            delta: dpml_accounting::ledger::DEFAULT_BUDGET_DELTA
        }
    );
    created.spend(&laplace("count", 0.5)).unwrap();
    drop(created);
    let reopened = Ledger::open_or_create(&path, None, None, &LedgerKey::Beside).unwrap();
    assert_eq!(reopened.balance().unwrap().spent_epsilon, 0.5);
    assert!(matches!(
        Ledger::open_or_create(&path, Some(3.0), None, &LedgerKey::Beside),
        Err(LedgerError::BudgetMismatch { .. })
    ));
}

/// The fronts' composition: heterogeneous events (Laplace, Gaussian, subsampled Gaussian,
/// randomized response, an exponential-mechanism (ε, 0) selection) composed by the tightest
/// accountant that covers them all, which the balance names; the entries' ε at the ledger's δ
/// and the spend over time.
#[test]
fn the_tightest_accountant_composes_heterogeneous_events_and_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("mix.db"), Budget::new(10.0, 1e-5).unwrap())
        .unwrap()
        .with_tightest();
    let spends = [
        laplace("count", 0.1),
        Spend::new(
            "mean",
            PrivacyEvent::Gaussian {
                noise_multiplier: 5.0,
            },
            0.97,
            1e-6,
        ),
        Spend::new("model", PrivacyEvent::dp_sgd(1.1, 0.01, 500), 1.13, 1e-5),
        Spend::new(
            "survey",
            PrivacyEvent::RandomizedResponse {
                epsilon: 0.5,
                categories: 2,
            },
            0.5,
            0.0,
        ),
        Spend::new(
            "selection",
            PrivacyEvent::EpsilonDelta {
                epsilon: 0.2,
                delta: 0.0,
            },
            0.2,
            0.0,
        ),
    ];
    for s in &spends {
        ledger.spend(s).unwrap();
    }
    let balance = ledger.balance().unwrap();
    // Adding up gives 2.9 with Σδ = 1.1e-5 > δ_B (no bound at δ_B); PLD is tighter than RDP.
    assert_eq!(balance.composition, "pld", "{balance:?}");
    assert!(balance.spent_epsilon < 2.9, "{balance:?}");
    let events = PrivacyEvent::Composed {
        events: spends.iter().map(|s| s.event.clone()).collect(),
    };
    let rdp = dpml_accounting::RdpAccountant::default()
        .epsilon(&events, 1e-5)
        .unwrap();
    let pld = dpml_accounting::PldAccountant::pessimistic()
        .epsilon(&events, 1e-5)
        .unwrap();
    assert!(pld < rdp, "pld {pld} rdp {rdp}");
    assert_eq!(balance.spent_epsilon, pld);
    let history = ledger.history(true).unwrap();
    assert_eq!(history.len(), spends.len());
    // Over time the spend grows, and ends at the balance.
    for w in history.windows(2) {
        assert!(w[0].spent_after <= w[1].spent_after, "{history:?}");
    }
    assert_eq!(
        history.last().unwrap().spent_after,
        Some(balance.spent_epsilon)
    );
    // A pure-ε entry's ε at the ledger's δ is its own; the Gaussian's stated (0.97, 1e-6)
    // costs less ε at the ledger's larger δ.
    assert_eq!(history[0].epsilon_at_ledger_delta, 0.1);
    assert!(
        history[1].epsilon_at_ledger_delta < 0.97,
        "{:?}",
        history[1]
    );
}

/// Issue 40: after pure-ε spends the balance reported all of δ spent. Adding up spends no δ
/// and is kept while an accountant saves under 1% of ε.
#[test]
fn pure_epsilon_spends_spend_no_delta() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(3.0, 1e-5).unwrap();
    let ledger = Ledger::open(&dir.path().join("pure.db"), budget)
        .unwrap()
        .with_tightest();
    for _ in 0..4 {
        ledger.spend(&laplace("count", 0.5)).unwrap();
    }
    let balance = ledger.balance().unwrap();
    assert_eq!(balance.spent_epsilon, 2.0, "{balance:?}");
    assert_eq!(balance.spent_delta, 0.0, "{balance:?}");
    assert_eq!(balance.remaining_delta, 1e-5, "{balance:?}");
    assert!(balance.composition.starts_with("basic"), "{balance:?}");
    // Many small pure spends: the accountant saves much more than 1%, and spends δ for it.
    let many = Ledger::open(
        &dir.path().join("many.db"),
        Budget::new(10.0, 1e-5).unwrap(),
    )
    .unwrap()
    .with_tightest();
    for _ in 0..60 {
        many.spend(&laplace("small", 0.05)).unwrap();
    }
    let balance = many.balance().unwrap();
    assert!(balance.spent_epsilon < 2.5, "{balance:?}");
    assert_eq!(balance.spent_delta, 1e-5);
}

/// `check` answers what a spend would leave without recording it, and refuses an overspend the
/// way `spend` would.
#[test]
fn check_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let ledger = Ledger::open(&path, Budget::new(1.0, 0.0).unwrap()).unwrap();
    let before = fs::read(&path).unwrap();
    assert_eq!(ledger.check(&laplace("a", 0.4)).unwrap().spent_epsilon, 0.4);
    assert!(matches!(
        ledger.check(&laplace("b", 1.5)),
        Err(LedgerError::OverBudget { .. })
    ));
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_eq!(ledger.entries().unwrap().len(), 0);
}

/// A checkpointed run is one spend: charged at its first segment, free to continue, charged
/// again for a fork (a checkpoint continued twice), refused when the fork does not fit.
#[test]
fn a_checkpointed_run_is_charged_once_and_a_fork_again() {
    use dpml_accounting::ledger::{Segment, SegmentCost};
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("runs.db"), Budget::new(1.0, 0.0).unwrap()).unwrap();
    let whole = laplace("run", 0.5);
    let rest = laplace("fork", 0.3);
    let seg = |parent: Option<&str>, child: &str| Segment {
        run: "r1".into(),
        parent: parent.map(Into::into),
        child: child.into(),
    };
    let first = ledger
        .record_segment(&seg(None, "c1"), &whole, &rest)
        .unwrap();
    assert_eq!(first.cost, SegmentCost::FirstCharge);
    assert_eq!(first.entry.unwrap().run.as_deref(), Some("r1"));
    // The same process goes on, and a resume of the latest checkpoint continues: free.
    for (parent, child) in [("c1", "c2"), ("c2", "c3"), ("c3", "release")] {
        let r = ledger
            .record_segment(&seg(Some(parent), child), &whole, &rest)
            .unwrap();
        assert_eq!(r.cost, SegmentCost::Continues);
        assert_eq!(r.balance.spent_epsilon, 0.5);
    }
    // c2 was already continued: resuming it again is a fork, charged again.
    assert_eq!(
        ledger.segment_cost("r1", Some("c2")).unwrap(),
        SegmentCost::Fork
    );
    let fork = ledger
        .record_segment(&seg(Some("c2"), "c4"), &whole, &rest)
        .unwrap();
    assert_eq!(fork.cost, SegmentCost::Fork);
    assert_eq!(fork.balance.spent_epsilon, 0.8);
    // A second fork does not fit: refused, nothing recorded.
    assert!(matches!(
        ledger.record_segment(&seg(Some("c1"), "c5"), &whole, &rest),
        Err(LedgerError::OverBudget { .. })
    ));
    assert_eq!(ledger.entries().unwrap().len(), 2);
    // Another run is charged on its own.
    assert_eq!(
        ledger.segment_cost("r2", None).unwrap(),
        SegmentCost::FirstCharge
    );
}

#[test]
fn a_delta_budget_no_spend_could_be_composed_under_is_refused() {
    let err = Budget::new(1.0, 1e-320).unwrap_err().to_string();
    assert!(err.contains("1e-320") && err.contains("1e-12"), "{err}");
    assert!(Budget::new(1.0, 0.0).is_ok());
    assert!(Budget::new(1.0, 1e-12).is_ok());
}

#[test]
fn a_spend_of_the_whole_delta_budget_leaves_basic_composition_for_the_rest() {
    // An (ε, δ) event with δ = the budget's δ leaves no accountant a finite ε at that δ; the
    // ledger must fall back to basic composition, which still fits, not refuse every later spend.
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(10.0, 1e-5).unwrap();
    let ledger = Ledger::open(&dir.path().join("d.db"), budget)
        .unwrap()
        .with_tightest();
    let whole_delta = PrivacyEvent::EpsilonDelta {
        epsilon: 1.0,
        delta: 1e-5,
    };
    ledger
        .spend(&Spend::new("sweep", whole_delta, 1.0, 1e-5))
        .unwrap();
    let balance = ledger.spend(&laplace("survey", 0.5)).unwrap();
    assert_eq!(balance.spent_epsilon, 1.5);
    assert!(
        balance.composition.starts_with("basic"),
        "{}",
        balance.composition
    );
    // Basic composition still refuses what does not fit.
    assert!(matches!(
        ledger.spend(&laplace("more", 9.0)),
        Err(LedgerError::OverBudget { .. })
    ));
}

#[test]
fn an_infinite_total_never_fits_a_budget_near_the_largest_float() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(f64::MAX, 0.0).unwrap();
    let ledger = Ledger::open(&dir.path().join("max.db"), budget).unwrap();
    let pure = |label: &str| {
        let event = PrivacyEvent::EpsilonDelta {
            epsilon: 1e308,
            delta: 0.0,
        };
        Spend::new(label, event, 1e308, 0.0)
    };
    ledger.spend(&pure("first")).unwrap();
    assert!(matches!(
        ledger.spend(&pure("second")),
        Err(LedgerError::OverBudget { .. })
    ));
    assert_eq!(ledger.entries().unwrap().len(), 1);
}

#[test]
fn a_stated_epsilon_below_the_events_own_is_refused() {
    // Basic composition adds the stated ε: a Laplace release of ε = 1000 stated as costing 0
    // would be charged nothing.
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        Ledger::open(&dir.path().join("s.db"), Budget::new(2000.0, 1e-5).unwrap()).unwrap();
    let event = PrivacyEvent::Laplace {
        noise_multiplier: 0.001,
    };
    for stated in [0.0, 999.0] {
        let err = ledger
            .spend(&Spend::new("understated", event.clone(), stated, 0.0))
            .unwrap_err();
        assert!(matches!(err, LedgerError::InvalidParameter(_)), "{err:?}");
        assert!(
            err.to_string().contains("below what its event costs"),
            "{err}"
        );
    }
    assert!(ledger.entries().unwrap().is_empty());
    // The event's own ε (as its caller computes it), and any more, is accepted.
    ledger
        .spend(&Spend::new("honest", event.clone(), 1.0 / 0.001, 0.0))
        .unwrap();
    // The same event passing at its own ε does not let it through understated afterwards.
    let err = ledger
        .spend(&Spend::new("understated", event.clone(), 999.0, 0.0))
        .unwrap_err();
    assert!(matches!(err, LedgerError::InvalidParameter(_)), "{err:?}");
    ledger.spend(&laplace("rounded", 0.3)).unwrap();
    // So is a Gaussian's ε at its δ from the (upper-bound) PLD accountant.
    let gaussian = PrivacyEvent::Gaussian {
        noise_multiplier: 2.0,
    };
    let eps = dpml_accounting::PldAccountant::pessimistic()
        .epsilon(&gaussian, 1e-6)
        .unwrap();
    ledger
        .spend(&Spend::new("gaussian", gaussian, eps, 1e-6))
        .unwrap();
}

#[test]
fn a_spend_of_minus_zero_leaves_the_ledger_readable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.db");
    let budget = Budget::new(5.0, 1e-5).unwrap();
    let ledger = Ledger::open(&path, budget).unwrap();
    let event = PrivacyEvent::EpsilonDelta {
        epsilon: 0.0,
        delta: 0.0,
    };
    ledger
        .spend(&Spend::new("minus zero", event, -0.0, -0.0))
        .unwrap();
    ledger.spend(&laplace("after", 1.0)).unwrap();
    drop(ledger);
    let reopened = Ledger::open(&path, budget).unwrap();
    let entries = reopened.entries().unwrap();
    assert_eq!(entries.len(), 2);
    assert!(entries[0].epsilon.is_sign_positive() && entries[0].delta.is_sign_positive());
}

#[test]
fn an_event_that_is_no_mechanism_is_refused_whatever_its_stated_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("e.db"), Budget::new(5.0, 1e-5).unwrap()).unwrap();
    for noise_multiplier in [0.0, -1.0] {
        let event = PrivacyEvent::Laplace { noise_multiplier };
        let err = ledger
            .spend(&Spend::new("no noise", event, 1.0, 0.0))
            .unwrap_err();
        assert!(matches!(err, LedgerError::InvalidParameter(_)), "{err:?}");
        assert!(err.to_string().contains("not a valid mechanism"), "{err}");
    }
    assert!(ledger.entries().unwrap().is_empty());
    // A valid event too large for the PLD's grid is no invalid mechanism.
    let huge = PrivacyEvent::dp_sgd(1.0, 0.5, 100_000_000_000_000);
    ledger.spend(&Spend::new("huge", huge, 4.0, 1e-6)).unwrap();
}

/// A ledger adds up ε under one neighbouring relation: its first entry fixes it, and a spend
/// under another (label DP after whole-record DP, say) is refused by every way of spending,
/// nothing recorded. Each entry reports its relation.
#[test]
fn a_spend_under_another_neighbouring_relation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("l.db"), Budget::new(10.0, 1e-5).unwrap()).unwrap();
    ledger.spend(&laplace("count", 1.0)).unwrap();
    let label = laplace("labels", 1.0)
        .by("label-dp", "iris")
        .under(Neighbouring::Label);
    for refused in [
        ledger.check(&label).map(drop),
        ledger.spend(&label).map(drop),
        ledger
            .record_segment(
                &Segment {
                    run: "r".into(),
                    parent: None,
                    child: "c".into(),
                },
                &label,
                &label,
            )
            .map(drop),
    ] {
        match refused {
            Err(LedgerError::MixedNeighbouring {
                entry: 1,
                stored: Neighbouring::Record,
                requested: Neighbouring::Label,
                ..
            }) => {}
            other => panic!("expected MixedNeighbouring, got {other:?}"),
        }
    }
    let entries = ledger.entries().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].neighbouring, Neighbouring::Record);
    // A ledger of label-DP releases takes label-DP releases, and refuses whole-record ones.
    let labels = Ledger::open(
        &dir.path().join("labels.db"),
        Budget::new(10.0, 1e-5).unwrap(),
    )
    .unwrap();
    labels.spend(&label).unwrap();
    labels.spend(&label).unwrap();
    assert!(matches!(
        labels.spend(&laplace("count", 1.0)),
        Err(LedgerError::MixedNeighbouring { .. })
    ));
    let stored: Vec<_> = labels
        .entries()
        .unwrap()
        .iter()
        .map(|e| e.neighbouring)
        .collect();
    assert_eq!(stored, [Neighbouring::Label, Neighbouring::Label]);
    let msg = ledger.spend(&label).unwrap_err().to_string();
    assert!(
        msg.contains("change one record's label") && msg.contains("ledger of its own"),
        "{msg}"
    );
}
