//! The README is the newcomer's only document, so its examples are tested: every command in a
//! fenced `sh` block that needs no downloaded data runs, in the order the README gives them,
//! and exits 0. Commands that need MNIST-family files (or `--data-dir data`) and `cargo`
//! invocations (they would rebuild the workspace) are left out, and the test says how many.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (the README and `examples/` live there).
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The commands of every fenced `sh` block: continuation lines (`\`) joined, comments and blank
/// lines dropped.
fn sh_commands(readme: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_sh = !in_sh && trimmed == "```sh";
            pending.clear();
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = strip_comment(trimmed);
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

/// Why a command is not run here, if it is not.
fn skip_reason(command: &str) -> Option<&'static str> {
    if command.starts_with("cargo ") {
        Some("a cargo invocation")
    } else if command.contains("mnist") || command.contains("--data-dir data") {
        Some("needs downloaded data")
    } else if !command.starts_with("dpml") {
        Some("not a dpml command")
    } else {
        None
    }
}

#[test]
fn comments_and_continuations_are_parsed_as_a_shell_would() {
    let readme = "text\n```sh\ndpml a --x 1 \\\n     --y 2   # a comment\n# only a comment\n\
                  dpml b --c#d\n```\n```json\n{\"not\": \"sh\"}\n```\n";
    assert_eq!(sh_commands(readme), ["dpml a --x 1 --y 2", "dpml b --c#d"]);
}

#[test]
fn every_readme_example_without_downloads_runs() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("read README.md");
    let commands = sh_commands(&readme);
    assert!(
        commands.len() > 20,
        "too few README examples found: {commands:?}"
    );

    // A fresh folder with the repository's example files, as a newcomer's checkout has them.
    let work = tempfile::tempdir().expect("temp dir");
    copy_dir(&root.join("examples"), &work.path().join("examples"));
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_dpml"))
        .parent()
        .expect("binary folder")
        .to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .expect("PATH");

    let mut ran = 0;
    let mut skipped = Vec::new();
    for command in &commands {
        if let Some(why) = skip_reason(command) {
            skipped.push(format!("{command}  ({why})"));
            continue;
        }
        let out = Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(work.path())
            .env("PATH", &path)
            .env_remove("DPML_DATA_DIR")
            .output()
            .expect("run sh");
        assert!(
            out.status.success(),
            "README example failed ({}):\n  {command}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    eprintln!(
        "ran {ran} README examples; skipped {}:\n  {}",
        skipped.len(),
        skipped.join("\n  ")
    );
    assert!(ran >= 20, "only {ran} README examples ran");
}

/// The schema shown in the README is the example file the examples use, word for word.
#[test]
fn the_readme_schema_is_the_example_file() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("read README.md");
    let file = std::fs::read_to_string(root.join("examples/patients.toml")).expect("schema");
    let block = readme
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a toml block in the README");
    assert_eq!(
        block, file,
        "README's toml block differs from examples/patients.toml"
    );
}

/// Copies `from` into `to`, subfolders (an example image folder) included.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create examples copy");
    for entry in std::fs::read_dir(from).expect("read examples/") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy example file");
        }
    }
}
