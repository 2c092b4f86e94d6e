//! Where a claim-next's turn goes (`--profile`): the PostgreSQL backend's
//! round trips, as its trace events report them, per claim-next, in the
//! worker processes; and the table of their medians. It only listens to
//! trace events; it never changes what a call does.

use std::time::Instant;

use crate::Result;
use crate::workers::queue_run;

/// Round trips of the PostgreSQL backend, as its trace events report them
/// (`leasehold::pg`, trace level): collected on this thread, for the
/// profile of a turn.
pub mod trips {
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    /// One round trip: what it carried, whether it began the transaction,
    /// its wait in microseconds, and when it ended.
    #[derive(Clone, Debug)]
    pub struct Trip {
        pub commit: bool,
        pub first: bool,
        pub micros: u64,
        pub ended: Instant,
    }

    thread_local! {
        static TRIPS: RefCell<Vec<Trip>> = const { RefCell::new(Vec::new()) };
    }

    /// The round trips since the last call.
    pub fn take() -> Vec<Trip> {
        TRIPS.with(|t| std::mem::take(&mut *t.borrow_mut()))
    }

    pub struct Collector {
        next: AtomicU64,
    }

    impl Collector {
        pub fn install() {
            let _ = tracing::subscriber::set_global_default(Collector {
                next: AtomicU64::new(1),
            });
        }
    }

    #[derive(Default)]
    struct Fields {
        what: String,
        first: bool,
        micros: u64,
    }

    impl Visit for Fields {
        fn record_str(&mut self, f: &Field, v: &str) {
            if f.name() == "what" {
                self.what = v.to_owned();
            }
        }
        fn record_bool(&mut self, f: &Field, v: bool) {
            if f.name() == "first" {
                self.first = v;
            }
        }
        fn record_u64(&mut self, f: &Field, v: u64) {
            if f.name() == "micros" {
                self.micros = v;
            }
        }
        fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
    }

    impl Subscriber for Collector {
        fn enabled(&self, m: &Metadata<'_>) -> bool {
            m.target() == "leasehold::pg"
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed))
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, e: &Event<'_>) {
            let ended = Instant::now();
            let mut f = Fields::default();
            e.record(&mut f);
            TRIPS.with(|t| {
                t.borrow_mut().push(Trip {
                    commit: f.what == "commit",
                    first: f.first,
                    micros: f.micros,
                    ended,
                })
            });
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}

/// What one claim-next's round trips say of its turn: the first round trip
/// (the wait for the turn, `BEGIN` and the first read), the reads after it,
/// the commit (the writes, `COMMIT` with its WAL flush, and the turn given
/// back), and the turn as the host sees it: from the first round trip's
/// answer to the commit's, of which the rest is the host's own time.
pub fn turn_line(call_started: Instant, trips: &[trips::Trip]) -> Option<String> {
    let first = trips.iter().find(|t| t.first)?;
    let commit = trips.iter().rev().find(|t| t.commit)?;
    let reads: Vec<&trips::Trip> = trips.iter().filter(|t| !t.first && !t.commit).collect();
    let read_us: u64 = reads.iter().map(|t| t.micros).sum();
    let hold = commit.ended.duration_since(first.ended).as_micros() as u64;
    let host = hold.saturating_sub(read_us + commit.micros);
    let before = first
        .ended
        .duration_since(call_started)
        .as_micros()
        .saturating_sub(u128::from(first.micros)) as u64;
    Some(format!(
        "turn {} {} {} {} {hold} {host} {before}",
        first.micros,
        read_us,
        reads.len(),
        commit.micros
    ))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Where a claim-next's turn goes, from the backend's round trips, at each
/// process count, with the server's `COMMIT` waiting for its WAL flush (as
/// shipped) and, beside it, not waiting (`synchronous_commit = off`, for
/// this measurement only): the difference is the flush.
pub fn profile(base: &str, url: &str, counts: &[usize], seconds: f64) -> Result<()> {
    println!(
        "Where a claim-next's turn goes (medians over every claim, µs; see pg_bench/turns.rs, turn_line):"
    );
    println!();
    println!(
        "| processes | WAL flush at COMMIT | claims/s | first round trip (waits for the turn) | reads after it | commit round trip | turn held (host's view) | of it, host's own time | before the first round trip |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let no_flush = url.replace(
        "options=-c%20search_path",
        "options=-c%20synchronous_commit%3Doff%20-c%20search_path",
    );
    for &procs in counts {
        for (label, u) in [("waited for", url), ("not waited for", no_flush.as_str())] {
            let run = queue_run(base, u, "--next", procs, seconds, "p", &["profile"])?;
            let col = |i: usize| median(run.turns.iter().map(|r| r[i]).collect());
            let reads =
                run.turns.iter().map(|r| r[2]).sum::<u64>() as f64 / run.turns.len().max(1) as f64;
            println!(
                "| {procs} | {label} | {:.0} | {} | {} ({reads:.1} trips) | {} | {} | {} | {} |",
                run.rate,
                col(0),
                col(1),
                col(3),
                col(4),
                col(5),
                col(6)
            );
        }
    }
    println!();
    Ok(())
}
