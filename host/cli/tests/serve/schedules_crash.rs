//! Schedules firing every second while their servers are killed with
//! SIGKILL: on redb (one server, killed and started again on its file) and on
//! PostgreSQL (two servers on one database, either killed while the other
//! serves), no occurrence is lost and none is handed out twice; then, after
//! every server was down for ten minutes, each schedule catches up as its
//! policy says.
//!
//! Time is the test's own: the servers take `now` from each `claim-due`
//! (`--allow-clock-override`), and the test moves it a second at a time
//! once nothing more is due, so what fires depends on the rules alone,
//! never on how fast a machine is. Only the moments of the kills are left
//! to chance (a seed, printed).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::fleet::Fleet;
use super::{client, mint};

const SECOND: i64 = 1000;
/// A claim's lease: a claim whose answer a kill lost is handed out again
/// once it lapses, as at-least-once delivery promises.
const LEASE_MS: i64 = 5 * SECOND;
/// The catch-up windows of the `all` and `latest` schedules.
const WINDOW_MS: i64 = 120 * SECOND;
/// The schedules, by the catch-up policy each carries.
const SCHEDULES: [(&str, &str); 3] = [
    ("all", "all_within"),
    ("latest", "latest_within"),
    ("none", "none"),
];

/// What the one worker saw: each occurrence it was handed, by schedule.
#[derive(Default)]
struct Seen {
    fired: BTreeMap<String, Vec<i64>>,
}

/// The worker: claims what is due at `now` and finishes each occurrence it
/// is handed (disarms it), retrying on whichever server is up when a call
/// gets no answer; answers the occurrences handed out, by schedule.
struct Worker<'a> {
    fleet: &'a Fleet,
    token: String,
    run: String,
    http: reqwest::blocking::Client,
    calls: usize,
    /// Calls sent again because a kill left them unanswered.
    unanswered: usize,
}

impl Worker<'_> {
    /// One call, sent again (to a live server) until one answers.
    fn call(&mut self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Value {
        loop {
            self.calls += 1;
            let base = self.fleet.base(self.calls);
            let mut req = self
                .http
                .request(method.clone(), format!("{base}{path}"))
                .bearer_auth(&self.token);
            if let Some(b) = body {
                req = req.json(b);
            }
            match req.send() {
                Ok(r) if r.status().is_success() => return r.json().expect("a JSON answer"),
                Ok(r) if r.status().is_server_error() || r.status() == 429 => {}
                Ok(r) => {
                    let status = r.status();
                    panic!("{method} {path}: {status} {}", r.text().unwrap_or_default())
                }
                // No answer: the server died under the call, which may or
                // may not have committed.
                Err(_) => self.unanswered += 1,
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Claims at `now` until nothing more is due, finishing each occurrence
    /// it is handed; answers them.
    fn drain(&mut self, now: i64) -> Vec<(String, i64)> {
        let mut handed = Vec::new();
        loop {
            let claimed = self.call(
                reqwest::Method::POST,
                "/v1/timers/claim-due",
                Some(&json!({"now": now, "limit": 50, "lease_ms": LEASE_MS})),
            );
            let timers = claimed["timers"].as_array().expect("timers").clone();
            if timers.is_empty() {
                return handed;
            }
            for t in timers {
                let effect = t["effect"].as_str().expect("an effect").to_owned();
                assert_eq!(t["run"], self.run.as_str(), "{t}");
                let (id, nominal) = occurrence(&effect);
                handed.push((id.to_owned(), nominal));
                // Done with it: retire its timer. A retry after a lost
                // answer finds it already retired, which is as good.
                let path = format!(
                    "/v1/runs/{}/timers/{}",
                    self.run,
                    effect.replace('/', "%2F")
                );
                self.call(reqwest::Method::DELETE, &path, None);
            }
        }
    }
}

/// The schedule and nominal instant an occurrence's effect key names.
fn occurrence(effect: &str) -> (&str, i64) {
    let rest = effect
        .strip_prefix("schedule/")
        .unwrap_or_else(|| panic!("not an occurrence: {effect}"));
    let (id, at) = rest.rsplit_once('/').expect("schedule/<id>/<instant>");
    (id, at.parse().expect("an instant"))
}

fn seed() -> u64 {
    std::env::var("LEASEHOLD_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// The whole test on `db` with `servers` servers at once.
fn schedules_survive_kills(db: &Path, dir: &Path, servers: usize, label: &str) {
    let seed = seed();
    println!("{label}: seed {seed}");
    // A tenant of this run alone: the PostgreSQL database is shared.
    let tenant = format!("sched-{label}-{}-{seed}", std::process::id());
    let (service, l1) = mint(dir, &tenant, "workflow", "service", &[]);
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{l1}\n")).expect("tokens");
    let fleet = Arc::new(Fleet::new(
        dir,
        db,
        tokens.to_str().expect("utf-8"),
        &["--allow-clock-override"],
        servers,
    ));
    for i in 0..servers {
        fleet.start(i);
    }
    let run = "pulse-run".to_owned();
    let mut w = Worker {
        fleet: &fleet,
        token: service,
        run: run.clone(),
        http: client(),
        calls: 0,
        unanswered: 0,
    };

    // Every second from an anchor a little ahead of the servers' clock,
    // which arms each schedule's first occurrence at the anchor itself.
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let anchor = (wall / SECOND + 5) * SECOND;
    for (id, policy) in SCHEDULES {
        let catch_up = if policy == "none" {
            json!({"kind": "none"})
        } else {
            json!({"kind": policy, "window_ms": WINDOW_MS})
        };
        let added = w.call(
            reqwest::Method::POST,
            "/v1/schedules",
            Some(&json!({
                "id": id,
                "run": run,
                "recurrence": {"kind": "every", "every_ms": SECOND, "anchor": anchor},
                "zone": "UTC",
                "overlap": "buffer_all",
                "catch_up": catch_up,
            })),
        );
        assert_eq!(added["next_at"], anchor, "{added}");
    }

    // The killer: every so often SIGKILLs one server (on PostgreSQL while
    // the other serves) and starts it again.
    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicUsize::new(0));
    let killer = {
        let (fleet, stop, kills) = (fleet.clone(), stop.clone(), kills.clone());
        let rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
        std::thread::spawn(move || {
            let mut rng = rng;
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(rng.u64(30..250)));
                let i = rng.usize(0..servers);
                fleet.kill(i);
                kills.fetch_add(1, Ordering::SeqCst);
                fleet.start(i);
            }
        })
    };

    // Firing: a second at a time, everything due claimed and finished.
    let mut seen = Seen::default();
    let mut now = anchor + SECOND / 2;
    let mut steps = 0;
    while steps < 40 || kills.load(Ordering::SeqCst) < 6 {
        for (id, at) in w.drain(now) {
            seen.fired.entry(id).or_default().push(at);
        }
        now += SECOND;
        steps += 1;
        assert!(steps < 5_000, "six kills never came (seed {seed})");
    }
    stop.store(true, Ordering::SeqCst);
    killer.join().expect("the killer");
    // Claims whose answers a kill lost are handed out again once their
    // leases lapse.
    let mut settle = now;
    for _ in 0..=(LEASE_MS / SECOND) {
        for (id, at) in w.drain(settle) {
            seen.fired.entry(id).or_default().push(at);
        }
        settle += SECOND;
    }
    let last = settle - SECOND;
    for (id, _) in SCHEDULES {
        let fired = seen.fired.remove(id).unwrap_or_default();
        let once: BTreeSet<i64> = fired.iter().copied().collect();
        assert_eq!(
            once.len(),
            fired.len(),
            "{id}: an occurrence handed out twice (seed {seed}): {fired:?}"
        );
        let expected: BTreeSet<i64> = (0..)
            .map(|k| anchor + k * SECOND)
            .take_while(|&t| t <= last)
            .collect();
        let lost: Vec<_> = expected.difference(&once).collect();
        assert!(
            lost.is_empty(),
            "{id}: occurrences lost (seed {seed}): {lost:?}"
        );
        assert_eq!(once, expected, "{id}: (seed {seed})");
    }
    println!(
        "{label}: {} kills over {steps} seconds; {} calls sent again unanswered",
        kills.load(Ordering::SeqCst),
        w.unanswered
    );

    // Every server down for ten minutes, then started again.
    for i in 0..servers {
        fleet.kill(i);
    }
    let back = last + 600 * SECOND;
    for i in 0..servers {
        fleet.start(i);
    }
    let mut caught: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    for (id, at) in w.drain(back) {
        assert!(
            caught.entry(id).or_default().insert(at),
            "handed out twice after the stop (seed {seed})"
        );
    }
    let whole = |t: i64| t - t.rem_euclid(SECOND);
    let within: BTreeSet<i64> = (0..)
        .map(|k| whole(back) - k * SECOND)
        .take_while(|&t| t >= back - WINDOW_MS)
        .collect();
    assert_eq!(
        caught.remove("all").unwrap_or_default(),
        within,
        "all_within: each missed occurrence within the window, once"
    );
    assert_eq!(
        caught.remove("latest").unwrap_or_default(),
        BTreeSet::from([whole(back)]),
        "latest_within: only the latest"
    );
    assert_eq!(
        caught.remove("none").unwrap_or_default(),
        BTreeSet::new(),
        "none: nothing missed fires"
    );
    assert!(caught.is_empty(), "{caught:?}");
    // And each goes on every second from there.
    for step in 1..=3 {
        let mut fired: Vec<(String, i64)> = w.drain(back + step * SECOND);
        fired.sort();
        let at = whole(back) + step * SECOND;
        assert_eq!(
            fired,
            vec![
                ("all".to_owned(), at),
                ("latest".to_owned(), at),
                ("none".to_owned(), at)
            ],
            "second {step} after the stop"
        );
    }
    drop(w);
    for i in 0..servers {
        fleet.kill(i);
    }
}

#[test]
fn on_redb_a_killed_server_loses_no_occurrence_and_fires_none_twice() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("schedules.redb");
    schedules_survive_kills(&db, dir.path(), 1, "redb");
}

#[test]
fn on_postgres_two_servers_killed_in_turn_lose_no_occurrence_and_fire_none_twice() {
    let Some(url) = super::postgres() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    schedules_survive_kills(Path::new(&url), dir.path(), 2, "postgres");
}
