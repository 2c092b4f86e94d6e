//! One call: an instance (kept from the tenant's last call, or fresh from
//! the pool), the sandbox's limits and
//! deadline, and the commit decision. The call's turn to write
//! comes first; its writes commit only when the guest answered `ok`, the
//! answer passed its checks and nothing broke a limit. It owns running a
//! call and running it again after a lost race; it must never commit a
//! batch whose answer failed its checks, never retry a call whose
//! outcome is unknown, and never keep an instance whose call did not
//! answer `ok`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{Store, Trap};

use crate::compiled::ticks;
use crate::ctx::{CallCtx, Export};
use crate::error::{Error, SandboxError};
use crate::keep::Warm;
use crate::runtime::Shared;
use crate::storage::backend::{Mode, Txn};
use crate::storage::error::StorageError;
use crate::verbs::Verb;
use crate::view::KvView;

/// Runs one exported call in one transaction of its own. `f` makes the
/// call; `check` turns its answer into the caller's, refusing what the
/// contract rules out. The call's writes commit only if `check` accepts.
pub(crate) fn call<R, T>(
    shared: &Shared,
    tenant: &Arc<str>,
    until: Option<Instant>,
    verb: Verb,
    f: impl Fn(&Export, &mut Store<CallCtx>) -> wasmtime::Result<R>,
    check: impl Fn(R) -> Result<T, Error>,
) -> Result<T, Error> {
    let span = tracing::debug_span!("leasehold.call", tenant = &**tenant, verb = verb.name());
    let _entered = span.enter();
    // The clock is read only for the debug event: reading it costs a
    // noticeable share of the cheapest calls.
    let started = tracing::enabled!(tracing::Level::DEBUG).then(Instant::now);
    // Read once for the call, so a call run again records the same instant.
    let at = shared.clock.now();
    let out = run_with_retries(shared, tenant, until, verb, at, &f, &check);
    tracing::debug!(
        outcome = match &out {
            Ok(_) => "ok",
            Err(e) if e.is_refusal() || e.is_invalid_input() => "declined",
            Err(_) => "failed",
        },
        micros = started.map_or(0, |t| t.elapsed().as_micros() as u64),
        "call finished"
    );
    out
}

/// Runs the call until it does not lose a serialization race, each time
/// on a fresh transaction (and, since a failed call's instance is never
/// kept, a fresh instance), at most
/// `conflict_retries` more times. The rules are deterministic, so
/// running a call again is the same call; the waits between attempts
/// grow and are jittered, so racing calls do not meet again in step.
fn run_with_retries<R, T>(
    shared: &Shared,
    tenant: &Arc<str>,
    until: Option<Instant>,
    verb: Verb,
    at: i64,
    f: &impl Fn(&Export, &mut Store<CallCtx>) -> wasmtime::Result<R>,
    check: &impl Fn(R) -> Result<T, Error>,
) -> Result<T, Error> {
    let retries = shared.limits.conflict_retries;
    let mut attempt = 1u32;
    loop {
        match run(shared, tenant, until, verb, at, f, check) {
            Err(Error::Conflict { source, .. }) if attempt <= retries => {
                tracing::debug!(attempt, reason = %source, "serialization conflict; running the call again");
                shared.retries.fetch_add(1, Ordering::Relaxed);
                let pause = backoff(attempt);
                // A caller whose deadline would pass during the pause hears
                // so now rather than after it.
                if until.is_some_and(|u| Instant::now() + pause >= u) {
                    return Err(Error::DeadlinePassed);
                }
                std::thread::sleep(pause);
                attempt += 1;
            }
            Err(Error::Conflict { source, .. }) => {
                return Err(Error::Conflict {
                    attempts: attempt,
                    source,
                });
            }
            out => return out,
        }
    }
}

fn run<R, T>(
    shared: &Shared,
    tenant: &Arc<str>,
    until: Option<Instant>,
    verb: Verb,
    at: i64,
    f: &impl Fn(&Export, &mut Store<CallCtx>) -> wasmtime::Result<R>,
    check: &impl Fn(R) -> Result<T, Error>,
) -> Result<T, Error> {
    let s = shared;
    let limits = s.limits;
    let sandbox_deadline = if verb.is_long() {
        limits.check_deadline
    } else {
        limits.deadline
    };
    if verb.mode() == Mode::Write && s.backend.read_only() {
        return Err(Error::ReadOnly { verb: verb.name() });
    }
    // The caller's deadline shortens every wait and the sandbox's deadline;
    // what it cut short is the caller's deadline passing, not a limit.
    let left = until.map(|u| u.saturating_duration_since(Instant::now()));
    if left == Some(Duration::ZERO) {
        return Err(Error::DeadlinePassed);
    }
    let cut = |d: Duration| left.map_or(d, |l| d.min(l));
    let deadline = cut(sandbox_deadline);
    let lock_wait = cut(limits.lock_wait);
    let passed = || until.is_some_and(|u| Instant::now() >= u);
    // The turn to write comes first, with its own bound: a call waiting
    // for the writer ahead of it holds no instance slot and spends none
    // of its deadline.
    let txn = match verb.line() {
        Some(line) => s
            .backend
            .begin_in_line(tenant, verb.mode(), lock_wait, deadline, line),
        None => s
            .backend
            .begin_with_deadline(tenant, verb.mode(), lock_wait, deadline),
    }
    .map_err(|e| match storage_error(e, verb) {
        Error::LockTimeout(_) if passed() => Error::DeadlinePassed,
        e => e,
    })?;
    let kv = KvView::new(txn, verb.mode(), limits, s.backend.concurrent_writers(), at);
    let mut warm = match s.keeper.take(tenant, at) {
        Some(mut warm) => {
            warm.store.data_mut().kv = kv;
            warm
        }
        None => match instantiate(s, tenant, kv, deadline) {
            Ok(warm) => warm,
            Err(failed) => {
                let (mut ctx, e) = *failed;
                // Nothing ran: the call's transaction comes back in the
                // store data, and ends as a failed call's does.
                let outcome = ctx.kv.take();
                let refused = outcome
                    .violation
                    .unwrap_or_else(|| Error::Sandbox(classify_trap(e, deadline)));
                return finish_unwritten(outcome.txn.ok_or_else(lost)?, verb, Err(refused));
            }
        },
    };
    // The deadline counts from here for a kept instance, and again from
    // here, for the call itself, on a fresh one.
    warm.store.set_epoch_deadline(ticks(deadline));
    let answer = match warm.begin_call(verb, &s.compiled.exports[verb.index()]) {
        Some(func) => f(&Export { func }, &mut warm.store),
        None => Err(wasmtime::Error::msg(format!(
            "the instance has no export {}",
            verb.name()
        ))),
    };

    // The transaction ends before the instance is torn down or kept, so a
    // writer gives up its turn as soon as it can.
    let outcome = warm.store.data_mut().kv.take();
    let txn = outcome.txn.ok_or_else(lost)?;
    let answer = match outcome.violation {
        // A limit the host recorded names the cause better than the trap
        // it led to.
        Some(v) => Err(v),
        None => answer
            .map_err(|trap| match classify_trap(trap, deadline) {
                SandboxError::Deadline(_) if deadline < sandbox_deadline => Error::DeadlinePassed,
                e => Error::Sandbox(e),
            })
            .and_then(check),
    };
    // The last moment to give up: past the caller's deadline, a write
    // commits nothing, whatever the call answered. A read's answer is as
    // true late as on time.
    let answer = match answer {
        Ok(_) if verb.mode() == Mode::Write && passed() => Err(Error::DeadlinePassed),
        answer => answer,
    };
    let answer = match answer {
        Ok(answer) => answer,
        // An instance whose call failed in any way is never kept.
        Err(refused) => {
            drop(warm);
            return finish_unwritten(txn, verb, Err(refused));
        }
    };
    let wrote = !outcome.batch.is_empty();
    let pending = txn
        .commit(outcome.batch)
        .map_err(|e| storage_error(e, verb))?;
    // The instance slot is free (or the instance kept) before the call
    // waits for its commit to be durable (with group commit, possibly
    // another call's fsync).
    s.keeper.give_back(warm, at);
    pending.wait().map_err(|e| storage_error(e, verb))?;
    // Waiters hear of a commit only once it is durable, and never of a
    // call that wrote nothing.
    if wrote {
        s.hub.committed(&*s.backend, tenant);
    }
    Ok(answer)
}

/// Ends a call that writes nothing and answers `refused`. An error answer
/// may rest on writes of calls before it in its group: it is given once
/// they are committed, and if they never are, the caller hears that
/// instead.
fn finish_unwritten<T>(
    txn: Box<dyn Txn>,
    verb: Verb,
    refused: Result<T, Error>,
) -> Result<T, Error> {
    txn.finish_unwritten()
        .wait()
        .map_err(|e| storage_error(e, verb))?;
    refused
}

fn lost() -> Error {
    Error::setup("the call lost its transaction")
}

/// A fresh store and instance for one call. Idle instances hold slots of
/// the pool; when the pool is full and some are kept, the least recently
/// used goes and the call tries again. On failure the call's store data
/// comes back, so that its transaction can end.
fn instantiate(
    s: &Shared,
    tenant: &Arc<str>,
    kv: KvView,
    deadline: Duration,
) -> Result<Warm, Box<(CallCtx, wasmtime::Error)>> {
    let mut ctx = CallCtx {
        kv,
        wasi: None,
        table: ResourceTable::new(),
        memory_cap: s.limits.memory_bytes,
        memory_grew: false,
        memory_bytes: 0,
    };
    loop {
        let mut store = Store::new(&s.compiled.wasm, ctx);
        store.limiter(|c| c);
        // Instantiating runs the component's start code, under the call's
        // deadline as the rest of the call is.
        store.set_epoch_deadline(ticks(deadline));
        store.epoch_deadline_trap();
        match s.compiled.pre.instantiate(&mut store) {
            Ok(instance) => {
                s.keeper.counted_fresh();
                return Ok(Warm::new(store, instance, tenant));
            }
            Err(e) => {
                let full = e
                    .downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
                    .is_some();
                // A store that failed to instantiate is never reused: the
                // next attempt starts from a new one.
                ctx = store.into_data();
                ctx.memory_grew = false;
                ctx.memory_bytes = 0;
                if !(full && s.keeper.evict_one()) {
                    return Err(Box::new((ctx, e)));
                }
            }
        }
    }
}

/// A storage failure as the caller hears it, naming the verb where the
/// store refused to write.
fn storage_error(e: StorageError, verb: Verb) -> Error {
    match e {
        StorageError::ReadOnly => Error::ReadOnly { verb: verb.name() },
        e => Error::from(e),
    }
}

/// A random wait in `[0, ceiling)`, the ceiling doubling from 1 ms up to 64 ms.
fn backoff(attempt: u32) -> Duration {
    let ceiling = 1000u64 << attempt.saturating_sub(1).min(6);
    Duration::from_micros(fastrand::u64(0..ceiling))
}

fn classify_trap(e: wasmtime::Error, deadline: Duration) -> SandboxError {
    let text = format!("{e:#}");
    if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
        .is_some()
    {
        return SandboxError::Busy(text);
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => SandboxError::Deadline(deadline),
        _ => SandboxError::Trap(text),
    }
}
