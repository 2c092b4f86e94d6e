//! Serializable writers: two write transactions of one tenant that each
//! compute their batch from what they read never leave the tenant in a
//! state no serial order of them explains. It owns the races it runs and
//! how it forces them; it must never depend on timing to pass, never wait
//! without a bound, and never hang on a backend whose writers take turns.
//!
//! Each race forces the interleaving a backend allows. The first writer
//! begins and reads; the second then begins on a thread of its own, first
//! asking for its turn without waiting (`lock_wait` zero).
//! - If it begins while the first is open, the backend runs writers side by
//!   side: the second reads too, hands its transaction back, and the two
//!   commit one after the other (each order in its own round), both having
//!   read before either commits.
//! - If it answers that it must wait (a retryable error), or does not answer
//!   at all (a backend that waits for its turn whatever the `lock_wait`),
//!   the writers take turns: the second begins again, waiting as long as a
//!   call would, and the first commits meanwhile.
//!
//! Every wait of the check has a bound; a commit or a read that outlasts it
//! is reported as a failure, never waited for without end. Whatever the
//! path, the tenant must end as some serial order of the writers that
//! committed would leave it. The races: a lost update (both bump one
//! counter), write skew (each writes a key the other read), the same skew
//! made of deletes and of a delete beside a put, and phantoms (one counts a
//! range, forward or in reverse, the other inserts into it). Each runs with
//! the writers begun through pairs of the entry points the engine calls:
//! a backend may give writers their turn through one and not another.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use crate::storage::backend::{Backend, Entry, Mode, Txn, Write, take_within};
use crate::storage::commit::Pending;
use crate::storage::error::StorageError;
use crate::testkit::report::Failure;
use crate::testkit::steps::{
    DOORS, Door, LINES, WAIT, begin_at, everything, failed, show, tenant, write,
};

const C: &str = "writers_are_serializable";

type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// What a writer of a race reads, and the batch it computes from it.
type Work = fn(&mut dyn Txn) -> Result<Vec<Write>, StorageError>;

/// A race: what the tenant holds before it, and its two writers.
struct Race {
    what: &'static str,
    seed: Vec<Entry>,
    first: Work,
    second: Work,
}

fn number(v: Option<Vec<u8>>) -> u64 {
    v.and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
        .map_or(0, u64::from_be_bytes)
}

fn bump_counter(txn: &mut dyn Txn) -> Result<Vec<Write>, StorageError> {
    let n = number(txn.get(b"counter")?);
    Ok(vec![Write::Put(
        b"counter".to_vec(),
        (n + 1).to_be_bytes().to_vec(),
    )])
}

/// Reads both keys and writes `mine` as one more than `theirs`.
fn one_more(txn: &mut dyn Txn, mine: &[u8], theirs: &[u8]) -> Result<Vec<Write>, StorageError> {
    let read = txn.get_many(&[mine.to_vec(), theirs.to_vec()])?;
    let other = number(read.into_iter().nth(1).flatten());
    Ok(vec![Write::Put(
        mine.to_vec(),
        (other + 1).to_be_bytes().to_vec(),
    )])
}

fn x_from_y(txn: &mut dyn Txn) -> Result<Vec<Write>, StorageError> {
    one_more(txn, b"x", b"y")
}

fn y_from_x(txn: &mut dyn Txn) -> Result<Vec<Write>, StorageError> {
    one_more(txn, b"y", b"x")
}

/// Counts the entries under `p/` and seals with the count.
fn seal_with_count(txn: &mut dyn Txn) -> Result<Vec<Write>, StorageError> {
    let (entries, _) = txn.scan(b"p/", Some(b"p0"), 100, false, usize::MAX)?;
    Ok(vec![Write::Put(
        b"sealed".to_vec(),
        (entries.len() as u64).to_be_bytes().to_vec(),
    )])
}

/// Counts the entries under `p/` with a reverse scan and seals with the
/// count.
fn seal_with_reverse_count(txn: &mut dyn Txn) -> Result<Vec<Write>, StorageError> {
    let (entries, _) = txn.scan(b"p/", Some(b"p0"), 100, true, usize::MAX)?;
    Ok(vec![Write::Put(
        b"sealed".to_vec(),
        (entries.len() as u64).to_be_bytes().to_vec(),
    )])
}

/// Whether `key` is there, by a point read.
fn present(txn: &mut dyn Txn, key: &[u8]) -> Result<bool, StorageError> {
    Ok(txn.get(key)?.is_some())
}

/// Deletes `x` if `y` is still there (one of two on call steps down only
/// while the other stays).
fn delete_x_if_y(txn: &mut dyn Txn) -> Result<Vec<Write>, StorageError> {
    let x = present(txn, b"x")?;
    Ok(if x && present(txn, b"y")? {
        vec![Write::Delete(b"x".to_vec())]
    } else {
        Vec::new()
    })
}

fn delete_y_if_x(txn: &mut dyn Txn) -> Result<Vec<Write>, StorageError> {
    let y = present(txn, b"y")?;
    Ok(if y && present(txn, b"x")? {
        vec![Write::Delete(b"y".to_vec())]
    } else {
        Vec::new()
    })
}

/// Retires `x` unless `y` has joined it.
fn retire_x_unless_y(txn: &mut dyn Txn) -> Result<Vec<Write>, StorageError> {
    let read = txn.get_many(&[b"x".to_vec(), b"y".to_vec()])?;
    Ok(match read.as_slice() {
        [Some(_), None] => vec![Write::Delete(b"x".to_vec())],
        _ => Vec::new(),
    })
}

/// `y` joins only while `x` is there.
fn join_y_while_x(txn: &mut dyn Txn) -> Result<Vec<Write>, StorageError> {
    let read = txn.get_many(&[b"y".to_vec(), b"x".to_vec()])?;
    Ok(match read.as_slice() {
        [None, Some(_)] => vec![Write::Put(b"y".to_vec(), b"joined".to_vec())],
        _ => Vec::new(),
    })
}

/// Adds an entry under `p/`, holding what it saw of the seal.
fn add_unless_sealed(txn: &mut dyn Txn) -> Result<Vec<Write>, StorageError> {
    let seal = txn.get(b"sealed")?;
    Ok(vec![Write::Put(
        b"p/b".to_vec(),
        seal.unwrap_or_else(|| b"unsealed".to_vec()),
    )])
}

fn races() -> Vec<Race> {
    let n = |v: u64| v.to_be_bytes().to_vec();
    vec![
        Race {
            what: "a lost update (both writers bump one counter)",
            seed: vec![(b"counter".to_vec(), n(5))],
            first: bump_counter,
            second: bump_counter,
        },
        Race {
            what: "write skew (each writer writes a key the other read)",
            seed: vec![(b"x".to_vec(), n(0)), (b"y".to_vec(), n(0))],
            first: x_from_y,
            second: y_from_x,
        },
        Race {
            what: "write skew by deletes (each deletes its key if the other's is there)",
            seed: vec![(b"x".to_vec(), n(1)), (b"y".to_vec(), n(1))],
            first: delete_x_if_y,
            second: delete_y_if_x,
        },
        Race {
            what: "write skew by a delete and a put (x retires unless y joined; y joins while x is there)",
            seed: vec![(b"x".to_vec(), n(1))],
            first: retire_x_unless_y,
            second: join_y_while_x,
        },
        Race {
            what: "a phantom (one counts a range, the other adds to it)",
            seed: vec![
                (b"p/a".to_vec(), b"a".to_vec()),
                (b"q".to_vec(), b"q".to_vec()),
            ],
            first: seal_with_count,
            second: add_unless_sealed,
        },
        Race {
            what: "a phantom in reverse (one counts a range backwards, the other adds to it)",
            seed: vec![
                (b"p/a".to_vec(), b"a".to_vec()),
                (b"q".to_vec(), b"q".to_vec()),
            ],
            first: seal_with_reverse_count,
            second: add_unless_sealed,
        },
    ]
}

/// A reference transaction over a map: what a writer reads when the
/// writers run one after the other.
struct Model(State);

impl Txn for Model {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.0.get(key).cloned())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        if end.is_some_and(|e| e <= start) {
            return Ok((Vec::new(), false));
        }
        let high = end.map_or(Bound::Unbounded, |e| Bound::Excluded(e.to_vec()));
        let range = self.0.range((Bound::Included(start.to_vec()), high));
        let entries: Vec<Entry> = if reverse {
            range.rev().map(|(k, v)| (k.clone(), v.clone())).collect()
        } else {
            range.map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        take_within(
            entries
                .into_iter()
                .take(limit as usize)
                .map(Ok::<_, StorageError>),
            max_bytes,
        )
    }

    fn commit(self: Box<Self>, _batch: Vec<Write>) -> Result<Pending, StorageError> {
        Ok(Pending::done())
    }
}

/// Every state the writers in `committed` leave the tenant in, run one
/// after the other in some order from `seed`.
fn serial_outcomes(seed: &[Entry], committed: &[Work]) -> Result<Vec<State>, Failure> {
    let orders: Vec<Vec<Work>> = match committed {
        [a, b] => vec![vec![*a, *b], vec![*b, *a]],
        other => vec![other.to_vec()],
    };
    let mut out = Vec::new();
    for order in orders {
        let mut state: State = seed.iter().cloned().collect();
        for work in order {
            let mut model = Model(state.clone());
            let batch = work(&mut model).map_err(failed(C, "the reference model"))?;
            for w in batch {
                match w {
                    Write::Put(k, v) => {
                        state.insert(k, v);
                    }
                    Write::Delete(k) => {
                        state.remove(&k);
                    }
                }
            }
        }
        out.push(state);
    }
    Ok(out)
}

fn describe(state: &State) -> String {
    let shown: Vec<String> = state
        .iter()
        .map(|(k, v)| match <[u8; 8]>::try_from(v.as_slice()) {
            Ok(n) => format!("{}={}", show(k), u64::from_be_bytes(n)),
            Err(_) => format!("{}={}", show(k), show(v)),
        })
        .collect();
    format!("{{{}}}", shown.join(", "))
}

/// How the second writer's begin went, while the first was open.
enum Begun {
    /// It began at once: the backend runs writers side by side.
    AtOnce,
    /// Asked for its turn without waiting, it answered that it must wait.
    MustWait,
    /// Its begin failed, and not for want of a turn.
    Failed(StorageError),
}

/// The second writer's transaction and batch, once it has read; or why it
/// stopped before it could commit.
type Read = Result<(Box<dyn Txn>, Vec<Write>), (StorageError, &'static str)>;

/// The second writer, on a thread of its own: begins (first without
/// waiting when `probe`), reads, and hands its transaction back.
fn second_writer<B: Backend>(
    b: Arc<B>,
    t: String,
    work: Work,
    (door, probe): (Door, bool),
    begun: Sender<Begun>,
    read: Sender<Read>,
) {
    let began = if probe {
        match door.open(b.as_ref(), &t, Mode::Write, Duration::ZERO) {
            Ok(txn) => {
                let _ = begun.send(Begun::AtOnce);
                Ok(txn)
            }
            Err(e) if e.is_retryable() => {
                let _ = begun.send(Begun::MustWait);
                door.open(b.as_ref(), &t, Mode::Write, WAIT)
            }
            Err(e) => {
                let _ = begun.send(Begun::Failed(e));
                return;
            }
        }
    } else {
        door.open(b.as_ref(), &t, Mode::Write, WAIT)
    };
    let answer = match began {
        Ok(mut txn) => match work(txn.as_mut()) {
            Ok(batch) => Ok((txn, batch)),
            Err(e) => Err((e, "read")),
        },
        Err(e) => Err((e, "begin")),
    };
    let _ = read.send(answer);
}

/// Commits on a thread of its own and waits for the commit, so that a
/// commit that waits on the other writer cannot hold the check up.
fn commit(txn: Box<dyn Txn>, batch: Vec<Write>) -> Receiver<Result<(), StorageError>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(txn.commit(batch).and_then(Pending::wait));
    });
    rx
}

/// Whether a writer committed (`false`: it lost, writing nothing), from its
/// commit's answer within `wait`.
fn committed(
    rx: &Receiver<Result<(), StorageError>>,
    who: &str,
    wait: Duration,
) -> Result<bool, Failure> {
    match rx.recv_timeout(wait) {
        Ok(Ok(())) => Ok(true),
        Ok(Err(e)) => lost(e, who, "commit"),
        Err(RecvTimeoutError::Timeout) => Err(Failure::new(
            C,
            format!("the {who} writer's commit had not answered after {wait:?}"),
        )),
        Err(RecvTimeoutError::Disconnected) => Err(Failure::new(
            C,
            format!("the {who} writer's commit stopped without an answer (did the backend panic?)"),
        )),
    }
}

/// A writer that lost the race (a conflict, no turn, an aborted group)
/// wrote nothing; any other failure fails the check.
fn lost(e: StorageError, who: &str, doing: &str) -> Result<bool, Failure> {
    if e.is_retryable() {
        Ok(false)
    } else {
        Err(Failure::new(
            C,
            format!("the {who} writer's {doing} failed: {e}"),
        ))
    }
}

/// What the second writer's thread answered within `wait`.
fn second_read(rx: &Receiver<Read>, wait: Duration) -> Result<Option<Read>, Failure> {
    match rx.recv_timeout(wait) {
        Ok(read) => Ok(Some(read)),
        Err(RecvTimeoutError::Timeout) => Ok(None),
        Err(RecvTimeoutError::Disconnected) => Err(Failure::new(
            C,
            "the second writer stopped without an answer (did the backend panic?)",
        )),
    }
}

/// One race on a fresh tenant, the writers begun through `doors`.
/// `second_first`: when both writers have read before either commits, the
/// second commits first. `turns`: an earlier race found that the second
/// writer's begin waits for its turn however short its `lock_wait`, so it
/// is not asked to begin without waiting.
fn run_race<B: Backend>(
    b: &Arc<B>,
    race: &Race,
    (first_door, second_door): (Door, Door),
    second_first: bool,
    turns: &mut bool,
) -> Result<String, Failure> {
    let t = tenant("");
    write(
        C,
        b.as_ref(),
        &t,
        race.seed
            .iter()
            .map(|(k, v)| Write::Put(k.clone(), v.clone()))
            .collect(),
    )?;
    let mut first = begin_at(C, first_door, b.as_ref(), &t, Mode::Write)?;
    let first_batch = (race.first)(first.as_mut()).map_err(failed(C, "the first writer's read"))?;
    let (begun_tx, begun_rx) = mpsc::channel();
    let (read_tx, read_rx) = mpsc::channel();
    {
        let (b, t, work, probe) = (b.clone(), t.clone(), race.second, !*turns);
        std::thread::spawn(move || {
            second_writer(b, t, work, (second_door, probe), begun_tx, read_tx)
        });
    }
    let side_by_side = if *turns {
        false
    } else {
        match begun_rx.recv_timeout(WAIT) {
            Ok(Begun::AtOnce) => true,
            Ok(Begun::MustWait) => false,
            Ok(Begun::Failed(e)) => {
                return Err(Failure::new(
                    C,
                    format!("the second writer's begin failed: {e}"),
                ));
            }
            // It waits for its turn whatever its lock_wait: from now on it
            // begins waiting at once.
            Err(RecvTimeoutError::Timeout) => {
                *turns = true;
                false
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Failure::new(
                    C,
                    "the second writer stopped while it began (did the backend panic?)",
                ));
            }
        }
    };
    let (how, first_ok, second_ok) = if side_by_side {
        // Both read before either commits, unless the second's read waits
        // for the first (a backend that locks what it reads).
        match second_read(&read_rx, WAIT)? {
            Some(Ok((second, second_batch))) => {
                let (one, two) = if second_first {
                    ((second, second_batch), (first, first_batch))
                } else {
                    ((first, first_batch), (second, second_batch))
                };
                let one_rx = commit(one.0, one.1);
                // Within the bound, the first commit is over before the
                // other starts; past it, it waits on the other writer.
                let one_early = match one_rx.recv_timeout(WAIT) {
                    Ok(answer) => Some(answer),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(Failure::new(
                            C,
                            "a writer's commit stopped without an answer (did the backend panic?)",
                        ));
                    }
                };
                let two_rx = commit(two.0, two.1);
                let (one_name, two_name) = if second_first {
                    ("second", "first")
                } else {
                    ("first", "second")
                };
                let two_ok = committed(&two_rx, two_name, 2 * WAIT)?;
                let one_ok = match one_early {
                    Some(Ok(())) => true,
                    Some(Err(e)) => lost(e, one_name, "commit")?,
                    None => committed(&one_rx, one_name, WAIT)?,
                };
                let (first_ok, second_ok) = if second_first {
                    (two_ok, one_ok)
                } else {
                    (one_ok, two_ok)
                };
                let order = if second_first {
                    "the second committing first"
                } else {
                    "the first committing first"
                };
                (
                    format!("both writers read before either committed, {order}"),
                    first_ok,
                    second_ok,
                )
            }
            Some(Err((e, doing))) => {
                let second_ok = lost(e, "second", doing)?;
                let first_ok = committed(&commit(first, first_batch), "first", 2 * WAIT)?;
                (
                    "the second writer lost before it could commit".to_owned(),
                    first_ok,
                    second_ok,
                )
            }
            None => {
                let first_rx = commit(first, first_batch);
                let second_ok = in_turn(&read_rx)?;
                let first_ok = committed(&first_rx, "first", 2 * WAIT)?;
                (
                    "the second writer's read waited for the first".to_owned(),
                    first_ok,
                    second_ok,
                )
            }
        }
    } else {
        let first_rx = commit(first, first_batch);
        let second_ok = in_turn(&read_rx)?;
        let first_ok = committed(&first_rx, "first", 2 * WAIT)?;
        (
            "the second writer waited for its turn".to_owned(),
            first_ok,
            second_ok,
        )
    };
    let end: State = everything(C, b.as_ref(), &t, false)?.into_iter().collect();
    let works: Vec<Work> = [(first_ok, race.first), (second_ok, race.second)]
        .into_iter()
        .filter_map(|(ok, w)| ok.then_some(w))
        .collect();
    let outcomes = serial_outcomes(&race.seed, &works)?;
    let who = match (first_ok, second_ok) {
        (true, true) => "both",
        (true, false) => "only the first",
        (false, true) => "only the second",
        (false, false) => "neither",
    };
    let how = format!("begun through {first_door} and {second_door}, {how}");
    if outcomes.contains(&end) {
        return Ok(format!("{how}; {who} committed"));
    }
    let expected: Vec<String> = outcomes.iter().map(describe).collect();
    Err(Failure::new(
        C,
        format!(
            "{}: {how}; {who} committed, and the tenant ended as {}, which no serial order of them explains ({}): {}",
            race.what,
            describe(&end),
            expected.join(" or "),
            if first_ok && second_ok {
                "an update was lost"
            } else {
                "a writer's commit did not land as it answered"
            }
        ),
    ))
}

/// The second writer, once the first is committing: it gets its turn,
/// reads what the first committed, and commits.
fn in_turn(read_rx: &Receiver<Read>) -> Result<bool, Failure> {
    match second_read(read_rx, 2 * WAIT)? {
        Some(Ok((second, batch))) => committed(&commit(second, batch), "second", 2 * WAIT),
        Some(Err((e, doing))) => lost(e, "second", doing),
        None => Err(Failure::new(
            C,
            format!(
                "the second writer had neither begun nor read {:?} after the first committed",
                2 * WAIT
            ),
        )),
    }
}

/// The pairs of entry points the writers of a race begin through: each
/// entry point against itself, the two a call begins through against each
/// other both ways, and two lines against each other.
fn door_pairs() -> Vec<(Door, Door)> {
    let [begin, deadline, in_line] = DOORS;
    vec![
        (begin, begin),
        (deadline, deadline),
        (in_line, in_line),
        (deadline, in_line),
        (in_line, deadline),
        (in_line, Door::InLine(LINES[1])),
    ]
}

/// Two write transactions that each compute their batch from what they
/// read never leave the tenant in a state no serial order of the committed
/// ones explains: one waits for the other, or one answers a conflict (or
/// that its turn did not come) and writes nothing. Run as races (a lost
/// update, write skew by puts, by deletes and by a delete beside a put,
/// phantoms forward and in reverse), each with both commit orders and the
/// writers begun through pairs of the entry points the engine calls, with
/// the interleaving forced where the backend allows it.
pub fn writers_are_serializable<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    let b = Arc::new(make());
    // Whether writers take turns whatever their lock wait, found once for
    // each entry point the second writer begins through.
    let mut turns: BTreeMap<String, bool> = BTreeMap::new();
    let mut ran = Vec::new();
    for doors in door_pairs() {
        let turns = turns.entry(doors.1.to_string()).or_default();
        for race in races() {
            for second_first in [false, true] {
                ran.push(run_race(&b, &race, doors, second_first, turns)?);
            }
        }
    }
    // What the races were, so a backend's author can see whether its
    // writers were raced side by side or took turns.
    eprintln!("{C}: {}", ran.join(" | "));
    Ok(())
}
