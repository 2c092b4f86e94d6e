//! Crash safety: a writer killed with SIGKILL at a random point loses no call
//! it acknowledged and leaves every index and counter consistent.
//!
//! A real process, a real kill, a real redb file: redb commits are atomic and
//! durable (`Durability::Immediate`, the default), and one call is one commit,
//! so whatever the kill interrupts is either all there or not there at all.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use leasehold_host::{ArmOutcome, Engine, TaskState};
use leasehold_tests::{Rng, seed, timer};

#[derive(Default)]
struct Promised {
    opened: Vec<String>,
    claimed: Vec<String>,
    settled: Vec<String>,
    armed: Vec<String>,
}

#[test]
fn a_killed_writer_loses_no_acknowledged_call_and_leaves_the_indexes_consistent() {
    let seed = seed();
    println!("crash test seed {seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("crash.redb");
    let mut promised = Promised::default();
    // Tasks whose next call may have committed unacknowledged, in any round.
    let mut ahead = std::collections::BTreeSet::new();
    for round in 0..5u64 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_crash-writer"))
            .arg(&db)
            .arg((round * 1_000_000).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the writer starts");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let kill_after = 1 + rng.below(80);
        let mut acked = Vec::new();
        while (acked.len() as u64) < kill_after {
            match lines.next() {
                Some(line) => acked.push(line.expect("utf-8")),
                None => panic!("the writer stopped by itself (seed {seed})"),
            }
        }
        // Kill mid-call most of the time: a call takes around a millisecond.
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        // Whatever it printed before dying was acknowledged too.
        acked.extend(lines.map_while(Result::ok));
        // The call after the last acknowledged one may have committed before
        // the kill and never been acknowledged: that task may be one step on.
        let last_task: Option<String> = acked
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix("open ").or_else(|| l.strip_prefix("claim ")))
            .filter(|_| {
                acked
                    .last()
                    .is_some_and(|l| l.starts_with("open ") || l.starts_with("claim "))
            })
            .map(str::to_owned);
        ahead.extend(last_task);
        for line in acked {
            let (what, id) = line.split_once(' ').expect("verb and id");
            let list = match what {
                "open" => &mut promised.opened,
                "claim" => &mut promised.claimed,
                "settle" => &mut promised.settled,
                "arm" => &mut promised.armed,
                "sweep" => continue,
                other => panic!("unknown ack {other}"),
            };
            list.push(id.to_owned());
        }

        let engine = Engine::open(&db).expect("the file reopens after the kill");
        let t = engine.tenant("crash").expect("tenant");
        let mut expected: BTreeMap<&str, TaskState> = BTreeMap::new();
        for id in &promised.opened {
            expected.insert(id, TaskState::Open);
        }
        for id in &promised.claimed {
            expected.insert(id, TaskState::Claimed);
        }
        for id in &promised.settled {
            expected.insert(id, TaskState::Completed);
        }
        for (id, state) in &expected {
            let task = t
                .get(id)
                .expect("get")
                .unwrap_or_else(|| panic!("acknowledged task {id} is gone (seed {seed})"));
            let step = |s: TaskState| match s {
                TaskState::Open => 0,
                TaskState::Claimed => 1,
                _ => 2,
            };
            if ahead.contains(*id) {
                assert!(
                    step(task.state) >= step(*state),
                    "task {id} went back (seed {seed})"
                );
            } else {
                assert_eq!(task.state, *state, "task {id} (seed {seed})");
            }
            if promised.claimed.iter().any(|c| c == id) {
                assert_eq!(
                    task.assignee.as_deref(),
                    Some("w"),
                    "task {id} (seed {seed})"
                );
            }
        }
        for run in &promised.armed {
            assert_eq!(
                t.arm(&timer(run, "wake", 0)).expect("arm"),
                ArmOutcome::AlreadyArmed,
                "acknowledged timer {run} is gone (seed {seed})"
            );
        }
        assert_eq!(
            t.check().expect("check"),
            vec![],
            "inconsistent after the kill (seed {seed})"
        );
    }
    assert!(!promised.opened.is_empty());
}

/// Group commit keeps the promise: with eight threads writing at once, so
/// that their calls share commits, a kill at a random point loses no call
/// any thread was told had succeeded, applies no call in part, and leaves
/// every index and counter consistent, round after round.
#[test]
fn eight_writer_threads_killed_at_random_lose_no_acknowledged_call() {
    let seed = seed();
    println!("crash test seed {seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("crash-threads.redb");
    let mut opened: Vec<String> = Vec::new();
    let mut claimed: Vec<String> = Vec::new();
    for round in 0..20u64 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_crash-writer"))
            .arg(&db)
            .arg(round.to_string())
            .arg("8")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the writer starts");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let kill_after = 1 + rng.below(120);
        let mut acked = Vec::new();
        while (acked.len() as u64) < kill_after {
            match lines.next() {
                Some(line) => acked.push(line.expect("utf-8")),
                None => panic!("the writer stopped by itself (seed {seed})"),
            }
        }
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        acked.extend(lines.map_while(Result::ok));
        for line in acked {
            match line.split_once(' ') {
                Some(("open", id)) => opened.push(id.to_owned()),
                Some(("claim", id)) => claimed.push(id.to_owned()),
                _ => panic!("unknown ack {line} (seed {seed})"),
            }
        }
        let engine = Engine::open(&db).expect("the file reopens after the kill");
        let t = engine.tenant("crash").expect("tenant");
        for id in &opened {
            assert!(
                t.get(id).expect("get").is_some(),
                "acknowledged task {id} is gone (seed {seed}, round {round})"
            );
        }
        for id in &claimed {
            let task = t.get(id).expect("get").expect("claimed tasks exist");
            assert_eq!(
                (task.state, task.assignee.as_deref()),
                (TaskState::Claimed, Some("w")),
                "acknowledged claim of {id} is gone (seed {seed}, round {round})"
            );
        }
        assert_eq!(
            t.check().expect("check"),
            vec![],
            "inconsistent after the kill (seed {seed}, round {round})"
        );
    }
    assert!(!opened.is_empty());
}
