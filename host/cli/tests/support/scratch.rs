//! A database of a test's own and the `leasehold` binary run on it: the
//! commands' output read as JSON or as text, a task opened from standard
//! input, an input file written beside the database. Shared by the CLI
//! test files that drive one redb file (`#[path]`-included); it only runs
//! the binary and parses what it prints.

use std::path::PathBuf;

use assert_cmd::Command;
use assert_cmd::cargo::cargo_bin_cmd;
use serde_json::Value;
use tempfile::TempDir;

pub struct Scratch {
    pub dir: TempDir,
    pub db: PathBuf,
}

pub fn scratch() -> Scratch {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("test.redb");
    Scratch { dir, db }
}

impl Scratch {
    pub fn run(&self, args: &[&str]) -> Command {
        let mut c = cargo_bin_cmd!("leasehold");
        c.current_dir(self.dir.path())
            .env_remove("LEASEHOLD_DB")
            .arg("--db")
            .arg(&self.db)
            .args(args);
        c
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args).arg("--json").assert().success();
        parse(&out.get_output().stdout)
    }

    pub fn json_error(&self, args: &[&str], code: i32) -> Value {
        let out = self.run(args).arg("--json").assert().code(code);
        let out = out.get_output();
        assert!(out.stdout.is_empty(), "an error prints nothing on stdout");
        parse(&out.stderr)
    }

    pub fn human(&self, args: &[&str]) -> String {
        let out = self.run(args).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).expect("UTF-8")
    }

    pub fn open(&self, task: &str) -> Value {
        let out = self
            .run(&["task", "open", "--json"])
            .write_stdin(task)
            .assert()
            .success();
        parse(&out.get_output().stdout)
    }

    pub fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write input file");
        path.to_str().expect("a UTF-8 path").to_owned()
    }

    pub fn get(&self, id: &str) -> Value {
        self.json(&["task", "get", id])
    }
}

pub fn parse(bytes: &[u8]) -> Value {
    let text = std::str::from_utf8(bytes).expect("UTF-8 output");
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}
