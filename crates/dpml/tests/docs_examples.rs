//! Every example in README.md and in the user guide (`docs/src`) runs here, so the documentation
//! cannot drift from the program. One test per page (they run in parallel), a test that fails
//! when a page has none, and the README's own rules (its length, no file outside the
//! repository).
//!
//! The conventions a page is written to:
//! - A ```` ```sh ```` block is run: each line (joined over `\` continuations, `#` comments
//!   dropped) is one command, run by `sh -c` with `dpml` on `PATH`, from a scratch folder that
//!   holds a copy of the repository's `examples/`. A page's blocks run in order in one folder, so
//!   a file one block writes is there for the next. Every command must exit 0 and finish in
//!   seconds (tiny data, few epochs).
//! - Attributes after the language, comma-separated: `mnist` (needs MNIST: the block runs only
//!   in the page's `…_with_mnist` test, listed as ignored without `$DPML_DATA_DIR`; there the
//!   folder also has `data` pointing at it, so `--data-dir data` works as after `dpml data
//!   fetch`), `exit=N` (every command of the block exits N), `no-run` (shown only; the text says
//!   why), `file=PATH` (the block is the repository file PATH, word for word; for blocks that
//!   are not run).
//! - Commands that start with `cargo` or `pip` are not run (they would build the workspace
//!   again): they are listed as skipped.
//! - ```` ```python ```` blocks run in the pytest suite (`python/tests/test_docs.py`) by the same
//!   rules (there the page's `sh` blocks run too, in order, so a Python block can read what a
//!   command wrote); `python,torch` marks a block that needs PyTorch and safetensors, skipped
//!   and listed where they are not installed. ```` ```text ````, `toml`, `json` and `csv` blocks
//!   are shown only. Any other language is refused, so that no command is shown untested by
//!   mistake.
//!
//! What a page test skipped, and why, is printed (`cargo test --test docs_examples --
//! --nocapture` shows it).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every documentation page, by its path from the repository root, with the test that runs it
/// and, for a page with `mnist` blocks, the test that runs it whole with MNIST.
macro_rules! pages {
    ($($test:ident => $page:literal $(, mnist: $mnist_test:ident)?;)*) => {
        /// The pages that have a test, and whether each has `mnist` blocks.
        const PAGES: &[(&str, bool)] = &[$(($page, pages!(@has $($mnist_test)?))),*];
        $(
            #[test]
            fn $test() {
                run_page($page, pages!(@has $($mnist_test)?), false);
            }
            $(
                #[test]
                #[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
                fn $mnist_test() {
                    run_page($page, true, true);
                }
            )?
        )*
    };
    (@has $mnist_test:ident) => { true };
    (@has) => { false };
}

pages! {
    readme => "README.md";
    getting_started => "docs/src/getting-started.md";
    statistics => "docs/src/statistics.md";
    ledger => "docs/src/ledger.md";
    sql => "docs/src/sql.md";
    training => "docs/src/training.md", mnist: training_with_mnist;
    your_data => "docs/src/your-data.md";
    inputs => "docs/src/inputs.md";
    saved_models => "docs/src/saved-models.md";
    tuning => "docs/src/tuning.md", mnist: tuning_with_mnist;
    label_dp_kmeans => "docs/src/label-dp-kmeans.md";
    accounting => "docs/src/accounting.md";
    auditing => "docs/src/auditing.md";
    python => "docs/src/python.md";
    python_reference => "docs/src/python-reference.md";
    scale => "docs/src/scale.md";
    privacy_model => "docs/src/privacy-model.md";
    cli_contract => "docs/src/cli-contract.md";
    coming_from => "docs/src/coming-from.md";
    limitations => "docs/src/limitations.md";
    performance => "docs/src/performance.md";
    summary => "docs/src/SUMMARY.md";
    introduction => "docs/src/introduction.md";
}

/// The README is a front door, not a manual.
const README_MAX_LINES: usize = 200;
/// Longest a documented command may take before the test gives up on it.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(180);
/// Languages of blocks that are shown and not run.
const SHOWN_ONLY: &[&str] = &["text", "toml", "json", "csv"];

/// The repository root.
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fenced code block: its language, attributes, first line number and text.
#[derive(Debug)]
struct Block {
    lang: String,
    attrs: Vec<String>,
    line: usize,
    body: String,
}

impl Block {
    fn has(&self, attr: &str) -> bool {
        self.attrs.iter().any(|a| a == attr)
    }

    /// The value of a `key=value` attribute.
    fn value(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find_map(|a| a.strip_prefix(key)?.strip_prefix('='))
    }
}

/// The fenced blocks of a markdown page (```` ``` ```` fences at the start of a line).
fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let Some(info) = line.strip_prefix("```") else {
            if let Some(b) = open.as_mut() {
                b.body.push_str(line);
                b.body.push('\n');
            }
            continue;
        };
        match open.take() {
            Some(b) => out.push(b),
            None => {
                let mut words = info.trim().split(',').map(|w| w.trim().to_string());
                open = Some(Block {
                    lang: words.next().unwrap_or_default(),
                    attrs: words.filter(|w| !w.is_empty()).collect(),
                    line: i + 1,
                    body: String::new(),
                });
            }
        }
    }
    assert!(open.is_none(), "a code block is never closed");
    out
}

/// The commands of an `sh` block: continuation lines (`\`) joined, comments and blank lines
/// dropped.
fn commands(body: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut pending = String::new();
    for line in body.lines() {
        let code = strip_comment(line.trim());
        if let Some(head) = code.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(code);
        let command = pending.trim().to_string();
        pending.clear();
        if !command.is_empty() {
            commands.push(command);
        }
    }
    commands
}

/// A line without its shell comment (`#` at the start of a word), trailing space removed.
fn strip_comment(line: &str) -> &str {
    let cut = line
        .char_indices()
        .find(|&(i, c)| c == '#' && (i == 0 || line[..i].ends_with(char::is_whitespace)))
        .map_or(line.len(), |(i, _)| i);
    line[..cut].trim_end()
}

/// Why a block is not run by this test, if it is not: `None` for an `sh` block to run.
fn block_skip(block: &Block, with_mnist: bool) -> Option<&'static str> {
    match block.lang.as_str() {
        "sh" if block.has("no-run") => Some("marked no-run"),
        "sh" if block.has("mnist") && !with_mnist => {
            Some("needs MNIST: runs in the page's _with_mnist test")
        }
        "sh" => None,
        "python" => Some("python: runs in python/tests/test_docs.py"),
        _ => Some("shown only"),
    }
}

/// Why a command is not run, if it is not.
fn command_skip(command: &str) -> Option<&'static str> {
    (command.starts_with("cargo ") || command.starts_with("pip "))
        .then_some("cargo or pip: would build the workspace again")
}

/// The attributes and languages a block may have; panics naming the page and line otherwise.
fn check_block(page: &str, block: &Block) {
    let known_lang = ["sh", "python"].contains(&block.lang.as_str())
        || SHOWN_ONLY.contains(&block.lang.as_str());
    assert!(
        known_lang,
        "{page}:{}: a ```{} block: use sh (run), python (run by pytest) or one of {SHOWN_ONLY:?} \
         (shown only)",
        block.line, block.lang
    );
    for attr in &block.attrs {
        let known = ["mnist", "no-run", "torch"].contains(&attr.as_str())
            || attr.starts_with("exit=")
            || attr.starts_with("file=");
        assert!(known, "{page}:{}: unknown attribute {attr:?}", block.line);
    }
    if let Some(code) = block.value("exit") {
        assert!(
            code.parse::<i32>().is_ok(),
            "{page}:{}: exit={code}",
            block.line
        );
    }
    if let Some(file) = block.value("file") {
        let text = std::fs::read_to_string(repo_root().join(file))
            .unwrap_or_else(|e| panic!("{page}:{}: file={file}: {e}", block.line));
        assert_eq!(
            block.body, text,
            "{page}:{}: the block differs from {file}",
            block.line
        );
    }
}

/// Run one page's blocks in order in a scratch folder; with `with_mnist` its `mnist` blocks too.
/// `marked_mnist` is whether [`pages!`] lists a `_with_mnist` test for it.
fn run_page(page: &str, marked_mnist: bool, with_mnist: bool) {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join(page))
        .unwrap_or_else(|e| panic!("{page}: {e} (remove it from pages! if it is gone)"));
    let blocks = blocks(&text);
    let has_mnist = blocks.iter().any(|b| b.has("mnist"));
    assert_eq!(
        has_mnist, marked_mnist,
        "{page}: `mnist` blocks and its `, mnist: …_with_mnist` entry in pages! go together"
    );
    check_links(page, &text);

    let work = tempfile::tempdir().expect("scratch folder");
    copy_dir(&root.join("examples"), &work.path().join("examples"));
    let data = with_mnist.then(common::mnist_data_dir);
    if let Some(data) = &data {
        std::os::unix::fs::symlink(data, work.path().join("data")).expect("link data/");
    }
    let path = path_with_dpml();

    let mut ran = 0;
    let mut skipped = Vec::new();
    for block in &blocks {
        check_block(page, block);
        if let Some(why) = block_skip(block, with_mnist) {
            skipped.push(format!(
                "{page}:{} ```{} block ({why})",
                block.line, block.lang
            ));
            continue;
        }
        let expected: i32 = block.value("exit").map_or(0, |c| c.parse().unwrap());
        for command in commands(&block.body) {
            if let Some(why) = command_skip(&command) {
                skipped.push(format!("{page}:{} {command} ({why})", block.line));
                continue;
            }
            let code = run_command(&command, work.path(), &path, data.as_deref());
            assert_eq!(
                code.0,
                Some(expected),
                "{page}:{}: `{command}` exited {:?}, expected {expected}\nstdout:\n{}\nstderr:\n{}",
                block.line,
                code.0,
                tail(&code.1),
                tail(&code.2)
            );
            ran += 1;
        }
    }
    eprintln!(
        "{page}: ran {ran} commands; skipped {}{}",
        skipped.len(),
        skipped
            .iter()
            .map(|s| format!("\n  {s}"))
            .collect::<String>()
    );
}

/// `PATH` with the tested `dpml` binary's folder first.
fn path_with_dpml() -> std::ffi::OsString {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_dpml"))
        .parent()
        .expect("binary folder")
        .to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(&rest)))
        .expect("PATH")
}

/// Run `command` with `sh -c` in `dir`; its exit code (`None` if killed) and output. Without
/// `data`, `DPML_DATA_DIR` is removed, so that a block not marked `mnist` cannot read MNIST.
fn run_command(
    command: &str,
    dir: &Path,
    path: &std::ffi::OsStr,
    data: Option<&Path>,
) -> (Option<i32>, String, String) {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(command)
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match data {
        Some(d) => c.env("DPML_DATA_DIR", d),
        None => c.env_remove("DPML_DATA_DIR"),
    };
    let mut child = c.spawn().expect("run sh");
    // Read the pipes on their own threads so that a chatty command cannot block on a full pipe.
    let out = child.stdout.take().map(read_all);
    let err = child.stderr.take().map(read_all);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > COMMAND_TIMEOUT {
            let _ = child.kill();
            panic!("`{command}` ran past {COMMAND_TIMEOUT:?}: documented examples take seconds");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let join = |h: Option<std::thread::JoinHandle<String>>| h.map(|h| h.join().unwrap());
    (
        status.code(),
        join(out).unwrap_or_default(),
        join(err).unwrap_or_default(),
    )
}

fn read_all(mut r: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = r.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The last lines of a command's output, for a failure message.
fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Relative links of a page must name files of the repository that exist.
fn check_links(page: &str, text: &str) {
    let root = repo_root().canonicalize().expect("repository root");
    let dir = root.join(page).parent().expect("page folder").to_path_buf();
    for target in text.split("](").skip(1).filter_map(|s| s.split(')').next()) {
        let file = target.split('#').next().unwrap_or_default();
        if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
            continue;
        }
        let resolved = dir.join(file).canonicalize();
        let inside = resolved.as_ref().is_ok_and(|p| p.starts_with(&root));
        assert!(
            inside,
            "{page}: the link ({target}) names no file of the repository"
        );
    }
}

/// A copy of `from` (the examples folder, with its subfolders) at `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create examples copy");
    for entry in std::fs::read_dir(from).expect("read examples/") {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("a file name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copy example file");
        }
    }
}

/// Every markdown page under `dir`, as paths from the repository root.
fn markdown_under(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("read docs/src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            markdown_under(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            let rel = path.strip_prefix(root).expect("under the root");
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
}

#[test]
fn every_page_has_a_test() {
    let root = repo_root();
    let mut on_disk = BTreeSet::from(["README.md".to_string()]);
    markdown_under(&root, &root.join("docs/src"), &mut on_disk);
    let tested: BTreeSet<String> = PAGES.iter().map(|(p, _)| p.to_string()).collect();
    let untested: Vec<&String> = on_disk.difference(&tested).collect();
    let gone: Vec<&String> = tested.difference(&on_disk).collect();
    assert!(
        untested.is_empty() && gone.is_empty(),
        "pages without a test (add them to pages! in this file): {untested:?}; \
         tests of missing pages: {gone:?}"
    );
}

#[test]
fn the_readme_is_short_and_names_nothing_outside_the_repository() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, at most {README_MAX_LINES}: move the rest into docs/src"
    );
    for (i, line) in readme.lines().enumerate() {
        assert!(
            !line.contains("../") && !line.contains("/work/") && !line.contains("/home/"),
            "README.md:{}: names a file outside the repository: {line}",
            i + 1
        );
    }
}

#[test]
fn blocks_and_commands_are_parsed_as_a_shell_would() {
    let page = "text\n```sh,exit=2,mnist\ndpml a --x 1 \\\n     --y 2   # a comment\n\
                # only a comment\ndpml b --c#d\n```\n```json\n{\"not\": \"sh\"}\n```\n";
    let b = blocks(page);
    assert_eq!(b.len(), 2);
    assert_eq!((b[0].lang.as_str(), b[0].line), ("sh", 2));
    assert_eq!(b[0].value("exit"), Some("2"));
    assert!(b[0].has("mnist") && !b[0].has("no-run"));
    assert_eq!(commands(&b[0].body), ["dpml a --x 1 --y 2", "dpml b --c#d"]);
    assert_eq!(b[1].lang, "json");
    assert_eq!(
        block_skip(&b[0], false),
        Some("needs MNIST: runs in the page's _with_mnist test")
    );
    assert_eq!(block_skip(&b[0], true), None);
    assert!(command_skip("cargo run --release").is_some());
    assert!(command_skip("dpml train").is_none());
}
