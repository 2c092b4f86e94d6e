//! Webhook subscriptions: their input rules, revisions that stop a stale
//! worker, positions that only move on and stay inside the feed, leases,
//! key rotation, the attempts kept, and what `trim` keeps for them (and,
//! past its bound, the subscriptions it marks gone).

use super::record_support::*;
use super::*;
use crate::changes;
use crate::subscriptions::{self as subs, Attempt, SubFilter, SubState};
use crate::tasks;

fn filter() -> SubFilter {
    SubFilter {
        tasks: true,
        timers: false,
        verbs: vec![],
        kinds: vec![],
        runs: vec![],
        settling_only: true,
    }
}

const KEY: [u8; 32] = [7u8; 32];

fn add(kv: &mut MemKv, id: &str, from: Option<&str>) -> subs::Subscription {
    subs::add(
        kv,
        id,
        "https://hooks.example.com/in",
        &filter(),
        &KEY,
        from,
        1_000,
    )
    .expect("add")
}

#[test]
fn a_new_subscription_starts_at_the_feeds_head_and_pages_by_id() {
    let mut kv = MemKv::new();
    let empty = add(&mut kv, "s0", None);
    assert_eq!(empty.position, None, "no feed yet: the start");
    open(&mut kv, task("t1"));
    open(&mut kv, task("t2"));
    let head = read_all(&mut kv, &mut None, 100);
    assert_eq!(head.len(), 2);
    let s = add(&mut kv, "s1", None);
    assert_eq!(s.state, SubState::Active);
    assert_eq!(s.revision, 1);
    assert_eq!(s.keys.len(), 1);
    assert_eq!(s.created_at, 1_000);
    let mut after = None;
    read_all(&mut kv, &mut after, 100);
    assert_eq!(
        s.position, after,
        "the head as a reader of the whole feed ends at"
    );
    let from_start = add(&mut kv, "s2", Some("f"));
    assert_eq!(from_start.position, None);
    let p1 = subs::list(&mut kv, 2, None).expect("list");
    assert_eq!(p1.subscriptions.len(), 2);
    assert_eq!(p1.next.as_deref(), Some("s1"));
    let p2 = subs::list(&mut kv, 2, p1.next.as_deref()).expect("list");
    assert_eq!(p2.subscriptions.len(), 1);
    assert_eq!(p2.next, None);
    assert_eq!(subs::get(&mut kv, "s2").expect("get"), Some(from_start));
    assert_healthy(&mut kv);
}

/// A call that answers a subscription, as a case of a table.
type SubCall<'a> = Box<dyn Fn(&mut MemKv) -> Result<subs::Subscription, StoreError> + 'a>;

#[test]
fn bad_input_is_refused_naming_the_field_and_writes_nothing() {
    let mut kv = MemKv::new();
    add(&mut kv, "taken", None);
    let f = filter();
    let cases: Vec<(&str, SubCall)> = vec![
        (
            "in use",
            Box::new(|kv| subs::add(kv, "taken", "https://a.example", &f, &KEY, None, 1)),
        ),
        (
            "url must start",
            Box::new(|kv| subs::add(kv, "x", "ftp://a.example", &f, &KEY, None, 1)),
        ),
        (
            "url has no host",
            Box::new(|kv| subs::add(kv, "x", "https:///p", &f, &KEY, None, 1)),
        ),
        (
            "url contains",
            Box::new(|kv| subs::add(kv, "x", "https://a b", &f, &KEY, None, 1)),
        ),
        (
            "key is 3 bytes",
            Box::new(|kv| subs::add(kv, "x", "https://a.example", &f, &[1, 2, 3], None, 1)),
        ),
        (
            "from is not a position",
            Box::new(|kv| subs::add(kv, "x", "https://a.example", &f, &KEY, Some("zz"), 1)),
        ),
        (
            "from is past the feed's head",
            Box::new(|kv| subs::add(kv, "x", "https://a.example", &f, &KEY, Some("f0.9"), 1)),
        ),
        (
            "neither tasks nor timers",
            Box::new(|kv| {
                let none = SubFilter {
                    tasks: false,
                    timers: false,
                    ..filter()
                };
                subs::add(kv, "x", "https://a.example", &none, &KEY, None, 1)
            }),
        ),
        (
            "id is empty",
            Box::new(|kv| subs::add(kv, "", "https://a.example", &f, &KEY, None, 1)),
        ),
        (
            "note is 0 characters",
            Box::new(|kv| subs::set_state(kv, "taken", SubState::Paused, Some(""), None)),
        ),
        (
            "more than 7 days",
            Box::new(|kv| subs::rotate(kv, "taken", &[9u8; 32], 1 + 8 * 86_400_000, 1)),
        ),
        (
            "already has",
            Box::new(|kv| subs::rotate(kv, "taken", &KEY, 2, 1)),
        ),
    ];
    for (why, call) in cases {
        let e = fails_cleanly(&mut kv, |kv| call(kv));
        let reason = invalid_reason(e);
        assert!(reason.contains(why), "{why}: {reason}");
    }
    let e = fails_cleanly(&mut kv, |kv| subs::change(kv, "nobody", None, None, None));
    assert_eq!(e, StoreError::NotFound("nobody".into()));
    let e = fails_cleanly(&mut kv, |kv| subs::lease(kv, "taken", "h", 1, 0));
    assert!(invalid_reason(e).contains("lease-ms"));
}

#[test]
fn at_most_a_hundred_per_tenant() {
    let mut kv = MemKv::new();
    for i in 0..subs::row::MAX_SUBSCRIPTIONS {
        add(&mut kv, &format!("s{i:03}"), None);
    }
    let e = fails_cleanly(&mut kv, |kv| {
        subs::add(
            kv,
            "one-more",
            "https://a.example",
            &filter(),
            &KEY,
            None,
            1,
        )
    });
    assert!(invalid_reason(e).contains("at most 100"));
}

#[test]
fn an_operators_change_moves_the_revision_and_stops_a_stale_worker() {
    let mut kv = MemKv::new();
    add(&mut kv, "s", Some("f"));
    open(&mut kv, task("t1"));
    let mut head = None;
    read_all(&mut kv, &mut head, 100);
    let head = head.expect("a head");
    let moved = subs::advance(&mut kv, "s", 1, &head).expect("advance");
    assert_eq!(moved.position.as_deref(), Some(head.as_str()));
    assert_eq!(moved.revision, 1, "a delivery moves only the position");
    // Never back: the earlier position leaves it where it is.
    let same = writes_nothing(&mut kv, |kv| subs::advance(kv, "s", 1, "f"));
    assert_eq!(same.position.as_deref(), Some(head.as_str()));
    let e = fails_cleanly(&mut kv, |kv| subs::advance(kv, "s", 1, "f0.99"));
    assert!(invalid_reason(e).contains("past the feed's head"));
    let changed =
        subs::change(&mut kv, "s", Some("https://other.example/x"), None, Some(1)).expect("change");
    assert_eq!(changed.revision, 2);
    // A repeat changes nothing and takes no revision.
    let again = writes_nothing(&mut kv, |kv| {
        subs::change(kv, "s", Some("https://other.example/x"), None, None)
    });
    assert_eq!(again.revision, 2);
    assert_eq!(
        fails_cleanly(&mut kv, |kv| subs::advance(kv, "s", 1, &head)),
        StoreError::Stale(2)
    );
    assert_eq!(
        fails_cleanly(&mut kv, |kv| subs::set_state(
            kv,
            "s",
            SubState::Paused,
            None,
            Some(1)
        )),
        StoreError::Stale(2)
    );
    let paused =
        subs::set_state(&mut kv, "s", SubState::Paused, Some("by ann"), Some(2)).expect("pause");
    assert_eq!((paused.state, paused.revision), (SubState::Paused, 3));
    assert_eq!(paused.note.as_deref(), Some("by ann"));
    let replay = subs::rewind(&mut kv, "s", None).expect("rewind");
    assert_eq!(
        (replay.state, replay.position, replay.note, replay.revision),
        (SubState::Active, None, None, 4)
    );
    assert!(subs::remove(&mut kv, "s").expect("remove"));
    assert!(!subs::remove(&mut kv, "s").expect("remove again"));
    assert_eq!(
        fails_cleanly(&mut kv, |kv| subs::advance(kv, "s", 4, &head)),
        StoreError::NotFound("s".into())
    );
    assert_healthy(&mut kv);
}

#[test]
fn one_holder_leases_a_subscription_until_it_lapses_or_is_released() {
    let mut kv = MemKv::new();
    add(&mut kv, "s", None);
    assert!(subs::lease(&mut kv, "s", "a", 100, 1_000).expect("lease"));
    assert!(!subs::lease(&mut kv, "s", "b", 500, 1_000).expect("held by a"));
    assert!(subs::lease(&mut kv, "s", "a", 900, 1_000).expect("renewed"));
    assert!(!subs::lease(&mut kv, "s", "b", 1_899, 1_000).expect("still a's"));
    assert!(subs::lease(&mut kv, "s", "b", 1_900, 1_000).expect("lapsed: b's"));
    subs::release(&mut kv, "s", "a").expect("a no longer holds it: nothing");
    assert!(!subs::lease(&mut kv, "s", "a", 2_000, 1_000).expect("b's"));
    subs::release(&mut kv, "s", "b").expect("release");
    assert!(subs::lease(&mut kv, "s", "a", 2_000, 1_000).expect("free"));
    assert!(!subs::lease(&mut kv, "nobody", "a", 2_000, 1_000).expect("none"));
    let s = subs::get(&mut kv, "s").expect("get").expect("there");
    assert_eq!(s.revision, 1, "leases move no revision");
    assert_healthy(&mut kv);
}

#[test]
fn rotation_keeps_the_old_key_signing_until_its_end() {
    let mut kv = MemKv::new();
    add(&mut kv, "s", None);
    let r = subs::rotate(&mut kv, "s", &[1u8; 32], 5_000, 1_000).expect("rotate");
    assert_eq!(r.keys.len(), 2);
    assert_eq!(r.keys[0].until, Some(5_000));
    assert_eq!(r.keys[1].until, None);
    assert_eq!(r.revision, 2);
    // A second rotation shortens no end past what it was, and drops a key
    // whose time ran out.
    let r = subs::rotate(&mut kv, "s", &[2u8; 32], 9_000, 6_000).expect("rotate");
    assert_eq!(r.keys.len(), 2, "the first key's time ran out at 5000");
    assert_eq!(r.keys[0].key, vec![1u8; 32]);
    assert_eq!(r.keys[0].until, Some(9_000));
    for i in 3..10u8 {
        subs::rotate(&mut kv, "s", &[i; 32], 20_000, 7_000).expect("rotate");
    }
    let s = subs::get(&mut kv, "s").expect("get").expect("there");
    assert_eq!(s.keys.len(), subs::row::MAX_KEYS);
    assert_eq!(s.keys.last().map(|k| k.key.clone()), Some(vec![9u8; 32]));
    assert_healthy(&mut kv);
}

#[test]
fn the_last_twenty_attempts_are_kept() {
    let mut kv = MemKv::new();
    add(&mut kv, "s", None);
    let attempt = |i: u32| Attempt {
        message_id: format!("msg_{i}"),
        at: i64::from(i),
        attempt: 1,
        outcome: "500".into(),
        latency_ms: 3,
    };
    for chunk in (0..30u32).collect::<Vec<_>>().chunks(7) {
        let list: Vec<Attempt> = chunk.iter().map(|&i| attempt(i)).collect();
        subs::record_attempts(&mut kv, "s", &list).expect("record");
    }
    let s = subs::get(&mut kv, "s").expect("get").expect("there");
    assert_eq!(s.attempts.len(), 20);
    assert_eq!(s.attempts[0].message_id, "msg_10");
    assert_eq!(s.attempts[19].message_id, "msg_29");
    let bad = Attempt {
        outcome: String::new(),
        ..attempt(1)
    };
    let e = fails_cleanly(&mut kv, |kv| subs::record_attempts(kv, "s", &[bad]));
    assert!(invalid_reason(e).contains("outcome"));
}

/// Opens `n` tasks, each one feed entry, at instants from `at`.
fn changes_at(kv: &mut MemKv, prefix: &str, n: usize, at: i64) {
    for i in 0..n {
        kv.now = at + i as i64;
        open(kv, task(&format!("{prefix}{i}")));
    }
}

#[test]
fn trimming_keeps_what_a_live_subscription_is_owed() {
    let mut kv = MemKv::new();
    changes_at(&mut kv, "a", 4, 10);
    let mut mid = None;
    read_all(&mut kv, &mut mid, 100);
    add(&mut kv, "s", mid.as_deref());
    // A paused subscription is owed its entries too; a gone one is not.
    add(&mut kv, "old", Some("f"));
    subs::set_state(&mut kv, "old", SubState::Gone, Some("lost"), None).expect("gone");
    changes_at(&mut kv, "b", 4, 100);
    subs::set_state(&mut kv, "s", SubState::Paused, Some("hold"), None).expect("pause");
    let out = changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    assert_eq!(out.feed_removed, 4, "only what s was given goes");
    assert!(!out.more, "what is owed is not more to do");
    let kept = read_all(&mut kv, &mut None, 100);
    assert_eq!(kept.len(), 4);
    assert_healthy(&mut kv);
    // Delivered: the rest may go.
    let mut head = None;
    read_all(&mut kv, &mut head, 100);
    let s = subs::get(&mut kv, "s").expect("get").expect("there");
    subs::advance(&mut kv, "s", s.revision, head.as_deref().expect("head")).expect("advance");
    let out = changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    assert_eq!(out.feed_removed, 4);
    assert_healthy(&mut kv);
    // A rewind to before the trim is refused; to the head it is not.
    let e = fails_cleanly(&mut kv, |kv| subs::rewind(kv, "s", Some("f")));
    assert!(invalid_reason(e).contains("no longer holds"));
    let e = fails_cleanly(&mut kv, |kv| subs::rewind(kv, "s", None));
    assert!(invalid_reason(e).contains("trimmed"));
}

#[test]
fn past_its_bound_trimming_marks_the_subscriptions_in_the_way_gone() {
    let mut kv = MemKv::new();
    add(&mut kv, "behind", Some("f"));
    changes_at(&mut kv, "a", 6, 10);
    let two = page(changes::feed(&mut kv, None, 2).expect("feed")).next;
    add(&mut kv, "ahead", Some(&two));
    let five = page(changes::feed(&mut kv, Some(&two), 3).expect("feed")).next;
    add(&mut kv, "near", Some(&five));
    // Keep at most 3 for subscriptions: 6 are in the feed. Entries 1-3 go
    // past the bound, taking the two subscriptions owed them; 4 and 5 are
    // then owed to nobody; 6 is owed to `near` and within the bound.
    let out = changes::trim_holding(&mut kv, None, Some(0), 1000, 3).expect("trim");
    assert_eq!(out.feed_removed, 5);
    let behind = subs::get(&mut kv, "behind").expect("get").expect("there");
    assert_eq!(behind.state, SubState::Gone);
    assert_eq!(behind.revision, 2);
    let note = behind.note.unwrap_or_default();
    assert!(note.contains("trimmed past position f "), "{note}");
    let ahead = subs::get(&mut kv, "ahead").expect("get").expect("there");
    assert_eq!(ahead.state, SubState::Gone, "it was owed the third");
    let near = subs::get(&mut kv, "near").expect("get").expect("there");
    assert_eq!(near.state, SubState::Active);
    assert_eq!(read_all(&mut kv, &mut None, 100).len(), 1);
    assert_healthy(&mut kv);
    // A gone subscription does not simply become active again.
    let e = fails_cleanly(&mut kv, |kv| {
        subs::set_state(kv, "behind", SubState::Active, None, None)
    });
    assert!(invalid_reason(e).contains("rewind"));
    let mut head = None;
    read_all(&mut kv, &mut head, 100);
    let back = subs::rewind(&mut kv, "behind", head.as_deref()).expect("rewind to the head");
    assert_eq!(back.state, SubState::Active);
    assert_healthy(&mut kv);
}

#[test]
fn the_check_finds_a_live_subscription_the_feed_was_trimmed_past() {
    let mut kv = MemKv::new();
    changes_at(&mut kv, "a", 3, 10);
    add(&mut kv, "s", Some("f"));
    // Plant the damage: trim as an earlier build would, blind to it.
    subs::set_state(&mut kv, "s", SubState::Gone, None, None).expect("gone");
    changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    let mut row = subs::get(&mut kv, "s").expect("get").expect("there");
    row.state = SubState::Active;
    subs::row::save(&mut kv, &row).expect("save");
    let found = check::check(&mut kv).expect("check");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].detail.contains("trimmed past its position"),
        "{found:#?}"
    );
    let _ = tasks::get(&mut kv, "a0");
}
