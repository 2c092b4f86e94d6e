//! A host process of one build of the rules, for the rolling-upgrade test:
//! one engine on a shared PostgreSQL database, running the component the
//! build embeds or one loaded from a file, and answering one line of JSON
//! per command it reads, so the parent test can interleave the writes of
//! two builds in two processes on one tenant.
//!
//! Usage: `upgrade-host URL TENANT [COMPONENT-FILE]`. Prints `ready` once
//! connected, then per line on stdin one of `open ID`, `claim ID ACTOR`,
//! `release ID ACTOR`, `settle ID`, `arm RUN EFFECT FIRE-AT`,
//! `history ID`, `check`, answers `{"ok": …}` or `{"error": KIND,
//! "detail": …}` (KIND as the CLI names a store error or a refusal).

use std::io::{BufRead, Write};

use leasehold_host::{Engine, Error, Settlement, StoreError};
use leasehold_tests::{TaskExt, task, timer};
use serde_json::{Value, json};

fn usage() -> ! {
    eprintln!("usage: upgrade-host URL TENANT [COMPONENT-FILE]");
    std::process::exit(2)
}

/// An error as one JSON object: what kind, and its text.
fn failed(e: &Error) -> Value {
    let kind = match e {
        Error::Store(StoreError::NewerLayout(_)) => "newer_layout",
        Error::Store(StoreError::Corrupt(_)) => "corrupt",
        Error::Store(StoreError::Invalid(_)) => "invalid",
        Error::Store(StoreError::NotFound(_)) => "not_found",
        Error::Store(StoreError::Storage(_)) => "storage",
        Error::Refused(_) => "refused",
        _ => "other",
    };
    let detail = match e {
        Error::Store(
            StoreError::NewerLayout(d)
            | StoreError::Corrupt(d)
            | StoreError::Invalid(d)
            | StoreError::NotFound(d)
            | StoreError::Storage(d),
        ) => d.clone(),
        other => other.to_string(),
    };
    json!({ "error": kind, "detail": detail })
}

fn answer<T>(r: Result<T, Error>, ok: impl FnOnce(T) -> Value) -> Value {
    match r {
        Ok(v) => json!({ "ok": ok(v) }),
        Err(e) => failed(&e),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(url), Some(tenant)) = (args.first(), args.get(1)) else {
        usage()
    };
    let mut builder = Engine::builder();
    if let Some(file) = args.get(2) {
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("read {file}: {e}"));
        builder = builder.component(bytes);
    }
    let engine = builder.postgres(url).expect("the engine connects");
    let t = engine.tenant(tenant).expect("tenant");
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").expect("stdout");
    out.flush().expect("stdout");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["open", id] => answer(t.open(&task(id, 1).roles(&["r"])), |_| json!(null)),
            ["claim", id, actor] => answer(t.claim(id, actor, &["r"], None), |_| json!(null)),
            ["release", id, actor] => answer(t.release(id, actor), |_| json!(null)),
            ["settle", id] => answer(t.settle(id, Settlement::Completed, None), |s| json!(s)),
            ["arm", run, effect, at] => answer(
                t.arm(&timer(run, effect, at.parse().expect("FIRE-AT"))),
                |_| json!(null),
            ),
            ["history", id] => answer(t.history(id, None, 1000), |h| {
                json!(h.iter().map(|e| json!([e.seq, e.verb])).collect::<Vec<_>>())
            }),
            ["check", ..] => answer(t.check(), |found| {
                json!(
                    found
                        .iter()
                        .map(|d| format!("{} {}: {}", d.structure, d.subject, d.detail))
                        .collect::<Vec<_>>()
                )
            }),
            _ => usage(),
        };
        writeln!(out, "{reply}").expect("stdout");
        out.flush().expect("stdout");
    }
}
