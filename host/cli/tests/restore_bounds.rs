//! Backups and restores bounded and all-or-nothing (issue 60), run for
//! real over files, processes and sockets: a backup that names a tenant
//! twice is refused at its first line with nothing written; a restore that
//! fails (or is stopped) after whole tenants went in leaves the target as
//! it was, on redb and PostgreSQL; keyed (HMAC-SHA256) digests pass with
//! their key and are refused without it or with another, for exports and
//! backups, and a keyed backup missing a tenant is caught by its seal;
//! `backup --server` reads no more of a gibibyte line, or of a refusal's
//! endless body, than its bound, and trusts a private authority with
//! `--ca-file`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

#[path = "support/postgres.rs"]
mod pg_support;
use pg_support::postgres;

// Shared with tests/copy.rs; this file uses only some of it.
#[allow(dead_code)]
#[path = "support/dataset.rs"]
mod dataset;

const BIN: &str = env!("CARGO_BIN_EXE_leasehold");
/// The test-only hook that stops a move after this many batches.
const STOP_AFTER: &str = "LEASEHOLD_COPY_STOP_AFTER_BATCHES";
/// Bounds a hang only: nothing here waits this long when all is well.
const HANG: Duration = Duration::from_secs(180);

fn leasehold(dir: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir)
        .env_remove("LEASEHOLD_DB")
        .env_remove(STOP_AFTER);
    c
}

/// Runs the binary with `--json` and `args`.
fn run(dir: &Path, args: &[&str]) -> Output {
    leasehold(dir)
        .arg("--json")
        .args(args)
        .output()
        .expect("run leasehold")
}

fn ok(out: Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON answer")
}

fn error(out: &Output, code: i32) -> Value {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stderr).expect("the error is one JSON object")
}

/// The error's message, which must say each of `words`.
fn says(e: &Value, words: &[&str]) {
    let message = e["message"].as_str().unwrap_or_default();
    for w in words {
        assert!(message.contains(w), "{w:?} not in {e}");
    }
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn unique(prefix: &str) -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("{prefix}-{}-{ms}", std::process::id())
}

/// `n` tasks in every state in each of `tenants`, on a new redb file.
fn fill(db: &Path, tenants: &[&str], n: usize) {
    let names: Vec<String> = tenants.iter().map(|t| (*t).to_owned()).collect();
    dataset::fill_at_once(db, &names, n);
}

/// The count and digest of `tenant`'s keys on `db`: (0, the empty digest)
/// for a tenant holding nothing.
fn digest(dir: &Path, db: &str, tenant: &str) -> (u64, String) {
    let file = dir.join(format!("{tenant}.digest.export"));
    let answer = ok(run(
        dir,
        &[
            "--db",
            db,
            "--tenant",
            tenant,
            "tenant",
            "export",
            "--out",
            arg(&file),
        ],
    ));
    (
        answer["keys"].as_u64().expect("keys"),
        answer["sha256"].as_str().expect("sha256").to_owned(),
    )
}

/// Whether anything a refused move might have left (the file, or the
/// folder it is built in beside its name) is in `dir` for `name`.
fn leftovers(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f == name || f.starts_with(&format!(".{name}.")))
        .collect()
}

/// Changes the last hex digit of an entry line's value: the count and
/// bytes still match, the digest does not.
fn change_value(line: &mut String) {
    assert!(
        !line.ends_with("\"value\":\"\"}"),
        "a value to change: {line}"
    );
    let at = line.len() - 3;
    let digit = if &line[at..at + 1] == "0" { "1" } else { "0" };
    line.replace_range(at..at + 1, digit);
}

/// A backup's lines: its first line, each tenant's part (its lines), and
/// its end line.
struct Parts {
    header: Value,
    parts: Vec<(String, Vec<String>)>,
    end: Value,
}

fn parts(file: &Path) -> Parts {
    let text = std::fs::read_to_string(file).expect("read the backup");
    let lines: Vec<&str> = text.lines().collect();
    let header: Value = serde_json::from_str(lines[0]).expect("first line");
    let end: Value = serde_json::from_str(lines[lines.len() - 1]).expect("end line");
    let mut parts = Vec::new();
    let mut at = 1;
    while at < lines.len() - 1 {
        let first: Value = serde_json::from_str(lines[at]).expect("a part's first line");
        let tenant = first["tenant"].as_str().expect("tenant").to_owned();
        let mut part = Vec::new();
        loop {
            part.push(lines[at].to_owned());
            at += 1;
            if part.last().is_some_and(|l| l.starts_with("{\"end\"")) {
                break;
            }
        }
        parts.push((tenant, part));
    }
    Parts { header, parts, end }
}

/// A part's count and bytes, from its last line.
fn part_totals(part: &[String]) -> (u64, u64) {
    let end: Value = serde_json::from_str(part.last().expect("a line")).expect("end");
    (
        end["end"]["keys"].as_u64().expect("keys"),
        end["end"]["bytes"].as_u64().expect("bytes"),
    )
}

/// Writes a backup of these parts, under `header` and `end` made to match
/// them (tenants, count and bytes).
fn write_parts(file: &Path, mut header: Value, parts: &[&(String, Vec<String>)], mut end: Value) {
    header["tenants"] = parts.iter().map(|(t, _)| Value::from(t.as_str())).collect();
    let (keys, bytes) = parts
        .iter()
        .map(|(_, p)| part_totals(p))
        .fold((0, 0), |(k, b), (pk, pb)| (k + pk, b + pb));
    end["backup_end"]["tenants"] = parts.len().into();
    end["backup_end"]["keys"] = keys.into();
    end["backup_end"]["bytes"] = bytes.into();
    let mut out = header.to_string() + "\n";
    for (_, part) in parts {
        out += &(part.join("\n") + "\n");
    }
    out += &(end.to_string() + "\n");
    std::fs::write(file, out).expect("write the backup");
}

/// Issue 60: a backup whose first line names a tenant twice (each part
/// whole, its digest right, the end line's totals made to match) is
/// refused at its first line, before anything is read on: nothing is
/// written to a target holding another tenant, and no file is made for a
/// target that did not exist. `backup --tenant` naming one twice is
/// refused too, leaving no file.
#[test]
fn a_backup_naming_a_tenant_twice_is_refused_at_its_first_line_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path();
    let (src, dst) = (p.join("src.redb"), p.join("dst.redb"));
    fill(&src, &["acme", "globex"], 40);
    fill(&dst, &["other"], 5);
    let other = digest(p, arg(&dst), "other");
    let backup = p.join("whole.backup");
    ok(run(
        p,
        &["--db", arg(&src), "backup", "--out", arg(&backup)],
    ));
    let Parts { header, parts, end } = parts(&backup);
    assert_eq!(parts.len(), 2);
    let twice = p.join("twice.backup");
    write_parts(&twice, header, &[&parts[0], &parts[1], &parts[0]], end);
    for (target, existed) in [(&dst, true), (&p.join("fresh.redb"), false)] {
        let e = error(
            &run(p, &["restore", "--in", arg(&twice), "--to", arg(target)]),
            2,
        );
        assert_eq!(e["error"], "bad_file", "{e}");
        says(&e, &["line 1", "named twice"]);
        if existed {
            for t in ["acme", "globex"] {
                assert_eq!(digest(p, arg(&dst), t).0, 0, "{t} was not written");
            }
            assert_eq!(digest(p, arg(&dst), "other"), other);
        } else {
            assert_eq!(leftovers(p, "fresh.redb"), Vec::<String>::new());
        }
    }
    let out = p.join("twice-asked.backup");
    let e = error(
        &run(
            p,
            &[
                "--db",
                arg(&src),
                "--tenant",
                "acme",
                "--tenant",
                "acme",
                "backup",
                "--out",
                arg(&out),
            ],
        ),
        2,
    );
    says(&e, &["twice"]);
    assert!(!out.exists());
}

/// Issue 60's restore half-way, into `db` (a redb file or PostgreSQL)
/// holding `other`: a backup of `a` and `b` (several batches each) whose
/// last value of `b` was changed fails at `b`'s last line, after all of
/// `a` and most of `b` went into the restore's transaction; one stopped by
/// the test's hook after its fourth batch likewise. Each leaves the target as it was. The
/// whole backup then restores.
fn a_restore_failing_half_way_leaves_the_target_as_it_was(dir: &Path, db: &str, names: [&str; 3]) {
    let [a, b, other] = names;
    let src = dir.join("half-src.redb");
    fill(&src, &[a, b], 1500);
    let mine = dir.join("other-src.redb");
    fill(&mine, &[other], 5);
    ok(run(
        dir,
        &["copy", "--from", arg(&mine), "--to", db, "--tenant", other],
    ));
    let before = digest(dir, db, other);
    let backup = dir.join("half.backup");
    ok(run(
        dir,
        &["--db", arg(&src), "backup", "--out", arg(&backup)],
    ));
    let Parts { header, parts, end } = parts(&backup);
    assert_eq!(
        parts.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
        [a, b]
    );
    let (a_keys, _) = part_totals(&parts[0].1);
    assert!(a_keys > 2 * 4096, "{a_keys} keys: several batches");
    // b's last value, one hex digit changed: its count and bytes still
    // match, its digest does not.
    let mut changed = parts[1].clone();
    change_value(&mut changed.1[parts[1].1.len() - 2]);
    let damaged = dir.join("damaged.backup");
    write_parts(&damaged, header, &[&parts[0], &changed], end);
    let b_end = 1 + parts[0].1.len() + parts[1].1.len();
    let unchanged = || {
        for t in [a, b] {
            assert_eq!(digest(dir, db, t).0, 0, "{t} was not written");
        }
        assert_eq!(digest(dir, db, other), before, "{other} untouched");
    };
    let e = error(
        &run(dir, &["restore", "--in", arg(&damaged), "--to", db]),
        2,
    );
    assert_eq!(e["error"], "bad_file", "{e}");
    says(&e, &[&format!("line {b_end}"), "digest"]);
    unchanged();
    let stopped = leasehold(dir)
        .env(STOP_AFTER, "4")
        .args(["--json", "restore", "--in", arg(&backup), "--to", db])
        .output()
        .expect("run leasehold");
    assert_eq!(error(&stopped, 3)["error"], "stopped");
    unchanged();
    let restored = ok(run(dir, &["restore", "--in", arg(&backup), "--to", db]));
    assert_eq!(restored["ok"], true, "{restored}");
    for t in [a, b] {
        assert_eq!(digest(dir, db, t), digest(dir, arg(&src), t), "{t}");
    }
    assert_eq!(digest(dir, db, other), before);
}

#[test]
fn a_restore_failing_half_way_into_redb_leaves_the_target_as_it_was() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("target.redb");
    a_restore_failing_half_way_leaves_the_target_as_it_was(
        dir.path(),
        arg(&db),
        ["acme", "globex", "other"],
    );
    // Into a file that did not exist: none is left by its name.
    let backup = dir.path().join("damaged.backup");
    let fresh = dir.path().join("fresh.redb");
    error(
        &run(
            dir.path(),
            &["restore", "--in", arg(&backup), "--to", arg(&fresh)],
        ),
        2,
    );
    assert_eq!(leftovers(dir.path(), "fresh.redb"), Vec::<String>::new());
}

#[test]
fn a_restore_failing_half_way_into_postgres_leaves_the_target_as_it_was() {
    let Some(url) = postgres() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let names = [unique("half-a"), unique("half-b"), unique("half-o")];
    a_restore_failing_half_way_leaves_the_target_as_it_was(
        dir.path(),
        &url,
        [&names[0], &names[1], &names[2]],
    );
    for t in &names {
        ok(run(
            dir.path(),
            &["--db", &url, "--tenant", t, "tenant", "delete", "--yes"],
        ));
    }
}

/// A digest key file of 32 random-looking bytes in hex, as the docs advise.
fn key_file(dir: &Path, name: &str, seed: u8) -> PathBuf {
    let file = dir.join(name);
    let hex: String = (0..32u8)
        .map(|i| format!("{:02x}", i.wrapping_mul(37).wrapping_add(seed)))
        .collect();
    std::fs::write(&file, hex + "\n").expect("write the key");
    file
}

/// Issue 60: keyed digests. An export and a backup sealed with a key read
/// back with it; with another key, or none, they are refused, and a plain
/// file is refused with a key; a keyed file changed is refused; a keyed
/// backup with a tenant's part dropped (every part's own seal intact, the
/// first and end lines made to match) is caught by the seal over the
/// whole. Nothing is written by any refusal.
#[test]
fn keyed_digests_pass_with_their_key_and_are_refused_without_it_or_with_another() {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path();
    let (src, dst) = (p.join("src.redb"), p.join("dst.redb"));
    fill(&src, &["acme", "globex"], 30);
    fill(&dst, &["other"], 5);
    let other = digest(p, arg(&dst), "other");
    let acme = digest(p, arg(&src), "acme");
    let (k1, k2) = (key_file(p, "k1", 1), key_file(p, "k2", 2));
    let short = p.join("short");
    std::fs::write(&short, "0123456789\n").expect("write");
    let export = |key: &Path, out: &Path| {
        let mut args = vec!["--db", arg(&src), "--tenant", "acme", "tenant", "export"];
        args.extend(["--out", arg(out), "--digest-key-file", arg(key)]);
        ok(run(p, &args))
    };
    let keyed = p.join("acme.keyed");
    export(&k1, &keyed);
    let text = std::fs::read_to_string(&keyed).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains("\"digest\":\"hmac-sha256\""),
        "{}",
        lines[0]
    );
    let last: Value = serde_json::from_str(lines[lines.len() - 1]).expect("last line");
    assert!(last["end"]["hmac_sha256"].is_string(), "{last}");
    assert!(
        last["end"]["sha256"].is_null(),
        "a keyed file carries no plain digest: {last}"
    );
    let plain = p.join("acme.plain");
    ok(run(
        p,
        &[
            "--db",
            arg(&src),
            "--tenant",
            "acme",
            "tenant",
            "export",
            "--out",
            arg(&plain),
        ],
    ));
    let changed = p.join("acme.changed");
    let mut l: Vec<String> = lines.iter().map(|x| (*x).to_owned()).collect();
    let valued = l
        .iter()
        .position(|x| x.contains("\"value\":\"") && !x.ends_with("\"value\":\"\"}"))
        .expect("an entry with a value");
    change_value(&mut l[valued]);
    std::fs::write(&changed, l.join("\n") + "\n").expect("write");
    let import = |file: &Path, key: Option<&Path>| {
        let mut args = vec!["--db", arg(&dst), "--tenant", "acme", "tenant", "import"];
        args.extend(["--in", arg(file)]);
        if let Some(k) = key {
            args.extend(["--digest-key-file", arg(k)]);
        }
        run(p, &args)
    };
    for (name, file, key, code, words) in [
        (
            "another key",
            &keyed,
            Some(&k2),
            2,
            vec!["keyed digest", "does not match"],
        ),
        ("no key", &keyed, None, 2, vec!["line 1", "keyed"]),
        (
            "a plain file",
            &plain,
            Some(&k1),
            2,
            vec!["line 1", "plain SHA-256"],
        ),
        ("changed", &changed, Some(&k1), 2, vec!["does not match"]),
        ("a short key", &keyed, Some(&short), 2, vec!["at least 16"]),
    ] {
        let e = error(&import(file, key.map(PathBuf::as_path)), code);
        says(&e, &words);
        assert_eq!(digest(p, arg(&dst), "acme").0, 0, "{name}: nothing written");
        assert_eq!(digest(p, arg(&dst), "other"), other, "{name}");
    }
    let imported = ok(import(&keyed, Some(&k1)));
    assert_eq!(imported["digests_match"], true, "{imported}");
    assert_eq!(digest(p, arg(&dst), "acme"), acme);

    // A backup, sealed whole.
    let backup = p.join("keyed.backup");
    ok(run(
        p,
        &[
            "--db",
            arg(&src),
            "backup",
            "--out",
            arg(&backup),
            "--digest-key-file",
            arg(&k1),
        ],
    ));
    let Parts { header, parts, end } = parts(&backup);
    assert_eq!(header["digest"], "hmac-sha256", "{header}");
    assert!(end["backup_end"]["hmac_sha256"].is_string(), "{end}");
    let dropped = p.join("dropped.backup");
    write_parts(&dropped, header, &[&parts[0]], end);
    let restore = |file: &Path, key: Option<&Path>, to: &Path| {
        let mut args = vec!["restore", "--in", arg(file), "--to", arg(to)];
        if let Some(k) = key {
            args.extend(["--digest-key-file", arg(k)]);
        }
        run(p, &args)
    };
    let target = p.join("restored.redb");
    for (name, file, key, words) in [
        ("another key", &backup, Some(&k2), vec!["does not match"]),
        ("no key", &backup, None, vec!["line 1", "keyed"]),
        (
            "a part dropped",
            &dropped,
            Some(&k1),
            vec!["does not match"],
        ),
    ] {
        let e = error(&restore(file, key.map(PathBuf::as_path), &target), 2);
        assert_eq!(e["error"], "bad_file", "{name}: {e}");
        says(&e, &words);
        assert_eq!(
            leftovers(p, "restored.redb"),
            Vec::<String>::new(),
            "{name}"
        );
    }
    let restored = ok(restore(&backup, Some(&k1), &target));
    assert_eq!(restored["ok"], true, "{restored}");
    for t in ["acme", "globex"] {
        assert_eq!(digest(p, arg(&target), t), digest(p, arg(&src), t), "{t}");
    }
}

// ---- backup --server's client, over real sockets ----

/// A server on a loopback port that answers one request with `head`, then
/// `start`, then up to `filler` bytes of `a` (hex, so a line of them is
/// well formed as far as it goes) until the client hangs up. Answers its
/// address and, once done, how many filler bytes went out.
fn one_answer(head: &str, start: &str, filler: u64) -> (String, std::thread::JoinHandle<u64>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = format!("http://{}", listener.local_addr().expect("address"));
    let answer = format!("{head}{start}");
    let served = std::thread::spawn(move || {
        let (conn, _) = listener.accept().expect("accept");
        let mut request = BufReader::new(conn.try_clone().expect("clone"));
        let mut line = String::new();
        while request.read_line(&mut line).expect("read the request") > 2 {
            line.clear();
        }
        let mut conn = conn;
        conn.write_all(answer.as_bytes()).expect("answer");
        let chunk = vec![b'a'; 64 * 1024];
        let mut sent = 0;
        while sent < filler {
            // The client hanging up ends the answer.
            if conn.write_all(&chunk).is_err() {
                break;
            }
            sent += chunk.len() as u64;
        }
        sent
    });
    (addr, served)
}

/// Runs the binary held to `kib` of address space (`ulimit -v`), so that
/// taking a gibibyte into memory fails where a bounded read does not.
fn bounded(dir: &Path, kib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .current_dir(dir)
        .env_remove("LEASEHOLD_DB")
        .env_remove(STOP_AFTER)
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" --json \"$@\""))
        .arg(BIN)
        .args(args)
        .output()
        .expect("run leasehold under sh")
}

const GIB: u64 = 1 << 30;

/// Issue 60: a server whose backup stream holds a line of a gibibyte is
/// refused at that line by a `backup --server` held to 512 MiB of address
/// space: it read no more of the line than the bound, hung up, and left
/// no file.
#[test]
fn backup_server_refuses_a_gibibyte_line_having_read_no_more_than_the_bound() {
    let dir = tempfile::tempdir().expect("temp dir");
    let start = concat!(
        r#"{"format":"leasehold-backup","version":1,"began_at_ms":1,"snapshot":"per-tenant","tenants":["acme"]}"#,
        "\n",
        r#"{"format":"leasehold-tenant-keys","version":1,"tenant":"acme"}"#,
        "\n",
        r#"{"key":"00","value":""#,
    );
    let (base, served) = one_answer(
        "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\nconnection: close\r\n\r\n",
        start,
        GIB,
    );
    let out = dir.path().join("long.backup");
    let e = error(
        &bounded(
            dir.path(),
            512 * 1024,
            &["backup", "--server", &base, "--out", arg(&out)],
        ),
        2,
    );
    assert_eq!(e["error"], "bad_file", "{e}");
    says(&e, &["line 3", "longer than"]);
    let sent = served.join().expect("the server");
    assert!(sent < GIB, "the client read the whole line: {sent} bytes");
    let stray: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(stray.is_empty(), "nothing is left beside it: {stray:?}");
}

/// Issue 60: a refusal whose body runs on for a gibibyte is answered with
/// the first 64 KiB of it, by a client held to 512 MiB of address space,
/// which then hangs up.
#[test]
fn backup_server_reads_no_more_than_64_kib_of_a_refusal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (base, served) = one_answer(
        &format!(
            "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/problem+json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n",
            GIB + 11
        ),
        r#"{"detail":""#,
        GIB,
    );
    let out = dir.path().join("refused.backup");
    let e = error(
        &bounded(
            dir.path(),
            512 * 1024,
            &["backup", "--server", &base, "--out", arg(&out)],
        ),
        3,
    );
    assert_eq!(e["error"], "server", "{e}");
    let message = e["message"].as_str().expect("message");
    assert!(message.contains("500"), "{}", &message[..80]);
    let kept = message.matches('a').count();
    assert!(
        (64 * 1024 - 11..=64 * 1024).contains(&kept),
        "{kept} bytes of the body kept"
    );
    assert!(served.join().expect("the server") < GIB);
    assert!(!out.exists());
}

/// A throwaway certificate authority and a leaf for 127.0.0.1 signed by
/// it, made with the openssl CLI in `dir`: the leaf's chain, its key, and
/// the authority's certificate file.
fn tls_certificate(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n",
    )
    .expect("write");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    for args in [
        vec!["req", "-x509", "-days", "1", "-subj", "/CN=test-ca"],
        vec!["req", "-subj", "/CN=localhost"],
        vec![
            "x509",
            "-req",
            "-in",
            &path("leaf.csr"),
            "-CA",
            &path("ca.pem"),
        ],
    ] {
        let mut c = Command::new("openssl");
        c.args(&args);
        match args[1] {
            "-x509" => c
                .args(ec)
                .args(["-keyout", &path("ca.key"), "-out", &path("ca.pem")]),
            "-subj" => c
                .args(ec)
                .args(["-keyout", &path("key.pem"), "-out", &path("leaf.csr")]),
            _ => c
                .args(["-CAkey", &path("ca.key"), "-CAcreateserial", "-days", "1"])
                .args(["-extfile", &path("leaf.ext"), "-out", &path("cert.pem")]),
        };
        let status = c.stderr(Stdio::null()).status().expect("openssl runs");
        assert!(status.success(), "openssl {args:?}");
    }
    (
        dir.join("cert.pem"),
        dir.join("key.pem"),
        dir.join("ca.pem"),
    )
}

/// A running `leasehold serve`, killed when dropped.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 60's leftover: `backup --server` over HTTPS signed by a private
/// authority is refused without `--ca-file` (no file left) and taken with
/// it, plain or sealed with a digest key; a `--ca-file` holding no
/// certificate is refused as a usage error.
#[test]
fn backup_server_trusts_a_private_authority_with_ca_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path();
    let db = p.join("served.redb");
    fill(&db, &["acme"], 20);
    let minted = ok(run(
        p,
        &[
            "--tenant", "acme", "token", "new", "--actor", "ops", "--scope", "operator", "--role",
            "finance",
        ],
    ));
    let tokens = p.join("tokens");
    std::fs::write(
        &tokens,
        format!("{}\n", minted["line"].as_str().expect("line")),
    )
    .expect("write");
    let token = p.join("token");
    std::fs::write(
        &token,
        format!("{}\n", minted["token"].as_str().expect("token")),
    )
    .expect("write");
    let (cert, key, ca) = tls_certificate(p);
    let mut child = leasehold(p)
        .args(["--db", arg(&db), "serve", "--listen", "127.0.0.1:0"])
        .args(["--tokens", arg(&tokens), "--admin-tenant", "acme"])
        .args(["--tls-cert", arg(&cert), "--tls-key", arg(&key)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve");
    let stderr = child.stderr.take().expect("stderr");
    let _served = Served(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.split("listening on ").nth(1) {
                let _ = tx.send(at.trim().to_owned());
            }
        }
    });
    let base = rx.recv_timeout(HANG).expect("serve listens");
    assert!(base.starts_with("https://"), "{base}");
    let backup = |out: &Path, extra: &[&str]| {
        let mut args = vec!["backup", "--server", &base, "--token-file", arg(&token)];
        args.extend(["--out", arg(out)]);
        args.extend(extra);
        run(p, &args)
    };
    let untrusted = p.join("untrusted.backup");
    let e = error(&backup(&untrusted, &[]), 3);
    assert_eq!(e["error"], "io", "{e}");
    assert!(!untrusted.exists());
    let not_pem = p.join("not.pem");
    std::fs::write(&not_pem, "no certificate here\n").expect("write");
    let e = error(&backup(&untrusted, &["--ca-file", arg(&not_pem)]), 2);
    says(&e, &["holds no PEM certificate"]);
    let trusted = p.join("trusted.backup");
    let v = ok(backup(&trusted, &["--ca-file", arg(&ca)]));
    assert_eq!(v["tenants"][0]["tenant"], "acme", "{v}");
    let k = key_file(p, "k", 9);
    let sealed = p.join("sealed.backup");
    ok(backup(
        &sealed,
        &["--ca-file", arg(&ca), "--digest-key-file", arg(&k)],
    ));
    for (file, key) in [(&trusted, None), (&sealed, Some(&k))] {
        let to = p.join(format!(
            "{}.redb",
            arg(file).rsplit('/').next().expect("name")
        ));
        let mut args = vec!["restore", "--in", arg(file), "--to", arg(&to)];
        if let Some(k) = key {
            args.extend(["--digest-key-file", arg(k)]);
        }
        assert_eq!(ok(run(p, &args))["ok"], true);
        assert_eq!(digest(p, arg(&to), "acme").1, v["tenants"][0]["sha256"]);
    }
    let mut text = String::new();
    std::fs::File::open(&sealed)
        .and_then(|mut f| f.read_to_string(&mut text))
        .expect("read");
    assert!(
        text.starts_with("{\"format\":\"leasehold-backup\",\"version\":2"),
        "{text:.120}"
    );
}
