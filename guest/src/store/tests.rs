//! Unit tests of the store's own promises: rows round-trip and their bytes
//! are pinned, layouts this component does not read are refused by name, and
//! a counter is the sum of its shards.
//!
//! They call the store directly, never a verb; the verbs' tests live in
//! `crate::tests`.

use super::*;
use crate::keys::Key;
use crate::kv::MemKv;
use crate::model::{OnExpiry, Phase, Priority, StoreError, Task, TaskState, Timer};
use crate::schema::{self, Shards};

fn full_task() -> Task {
    Task {
        id: "t-1".into(),
        run: "r".into(),
        case: Some("c é".into()),
        kind: "approve".into(),
        justification: r#"{"why":[1]}"#.into(),
        candidate_roles: vec!["reviewer".into()],
        assignee: Some("alice".into()),
        lease_until: Some(253_402_300_799_999 + 604_800_000),
        priority: Priority::Urgent,
        state: TaskState::Claimed,
        on_expiry: OnExpiry::Escalate,
        escalate_to: vec!["lead".into()],
        excluded_actors: vec!["mallory".into()],
        created_at: 5,
        due_at: Some(253_402_300_799_999),
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

#[test]
fn rows_round_trip_and_leftover_bytes_are_refused() {
    let row = TaskRow {
        task: full_task(),
        ever_escalated: true,
    };
    let mut bytes = encode_row(&row).expect("encodes");
    assert_eq!(decode_task(&bytes).expect("decodes"), row);
    bytes.push(0);
    assert!(decode_task(&bytes).is_err(), "a row with bytes left over");
    let timer = TimerRow {
        timer: Timer {
            run: "r".into(),
            case: None,
            effect: "e".into(),
            step: 3,
            phase: Phase::Compensating,
            fire_at: 42,
        },
        lease_until: Some(253_402_300_799_999 + 604_800_000),
    };
    let bytes = encode_row(&timer).expect("encodes");
    assert_eq!(decode_timer(&bytes).expect("decodes"), timer);
    assert!(decode_timer(&bytes[..bytes.len() - 1]).is_err());
    assert!(decode_task(b"").is_err());
}

/// The stored form of rows, unchanged since layout 2, is part of the
/// layout: a change to it must be a new layout, so these bytes are pinned.
#[test]
fn the_layout_2_row_bytes_are_pinned() {
    let row = TaskRow {
        task: Task {
            id: "t".into(),
            run: "r".into(),
            case: None,
            kind: "k".into(),
            justification: "{}".into(),
            candidate_roles: vec!["a".into()],
            assignee: None,
            lease_until: None,
            priority: Priority::High,
            state: TaskState::Escalated,
            on_expiry: OnExpiry::Proceed,
            escalate_to: vec![],
            excluded_actors: vec![],
            created_at: 300,
            due_at: Some(-1),
            revision: 0,
            decision: None,
            outcomes: Vec::new(),
            remind_before: Vec::new(),
            escalation: Vec::new(),
            steps_done: 0,
        },
        ever_escalated: true,
    };
    assert_eq!(
        encode_row(&row).expect("encodes"),
        [
            1, b't', 1, b'r', 0, 1, b'k', 2, b'{', b'}', 1, 1, b'a', 0, 0, 2, 2, 2, 0, 0, 0xD8,
            0x04, 1, 1, 1
        ]
    );
    // A leased claim: the holder, then the lease end as a zigzag varint.
    let mut leased = row;
    leased.task.state = TaskState::Claimed;
    leased.task.assignee = Some("b".into());
    leased.task.lease_until = Some(5);
    assert_eq!(
        encode_row(&leased).expect("encodes"),
        [
            1, b't', 1, b'r', 0, 1, b'k', 2, b'{', b'}', 1, 1, b'a', 1, 1, b'b', 1, 10, 2, 1, 2, 0,
            0, 0xD8, 0x04, 1, 1, 1
        ]
    );
}

#[test]
fn a_keyspace_in_the_0_1_layout_is_refused_by_name_never_misread() {
    let mut kv = MemKv::new();
    kv.map.insert(schema::layout().into_bytes(), b"1".to_vec());
    match check_layout(&mut kv, true) {
        Err(StoreError::Corrupt(d)) => {
            assert!(d.contains("layout 1") && d.contains("0.1"), "{d}");
        }
        other => panic!("expected corrupt, got {other:?}"),
    }
    assert_eq!(kv.map.len(), 1, "the refusal wrote");
}

/// Layout 2 kept each counter in one key, which layout 3 would read as
/// zero: it must be refused, by name, before any counter is read.
#[test]
fn a_keyspace_in_the_layout_2_single_key_counters_is_refused_by_name() {
    let mut kv = MemKv::new();
    kv.map.insert(schema::layout().into_bytes(), b"2".to_vec());
    kv.map.insert(
        Key::new().str("count").str(schema::OPEN_TASKS).into_bytes(),
        5u64.to_be_bytes().to_vec(),
    );
    let before = kv.map.clone();
    for answer in [
        check_layout(&mut kv, true),
        read_counter(&mut kv, schema::OPEN_TASKS).map(drop),
        indexed_rows(
            &mut kv,
            &[],
            "an index",
            Along {
                layout: true,
                leased_shards: false,
            },
        )
        .map(drop),
    ] {
        match answer {
            Err(StoreError::Corrupt(d)) => {
                assert!(
                    d.contains("layout 2") && d.contains("single-key counters"),
                    "{d}"
                );
                assert!(
                    d.contains(&format!("only layouts 3 to {}", schema::LAYOUT_VERSION)),
                    "{d}"
                );
            }
            other => panic!("expected corrupt, got {other:?}"),
        }
    }
    assert!(kv.map == before, "the refusal wrote");
}

#[test]
fn a_counter_is_the_sum_of_its_shards_read_with_the_layout_in_one_batch() {
    let mut kv = MemKv::new();
    check_layout(&mut kv, true).expect("a fresh keyspace");
    let sh = Shards::SHARED;
    add_to_counter(&mut kv, schema::OPEN_TASKS, 0, sh, 3).expect("adds");
    add_to_counter(&mut kv, schema::OPEN_TASKS, 17, sh, 2).expect("adds");
    add_to_counter(&mut kv, schema::OPEN_TASKS, 63, sh, 1).expect("adds");
    add_to_counter(&mut kv, schema::OPEN_TASKS, 17, sh, -1).expect("subtracts");
    // Spread by writer, a shard may go below zero.
    add_to_counter(&mut kv, schema::OPEN_TASKS, 40, sh, -2).expect("subtracts");
    // Another counter's shards are not this one's.
    add_to_counter(&mut kv, schema::LEASED_CLAIMS, 5, sh, 9).expect("adds");
    kv.calls = Default::default();
    assert_eq!(read_counter(&mut kv, schema::OPEN_TASKS), Ok(3));
    assert_eq!(kv.calls.get_manys, 1, "{:?}", kv.calls);
    assert_eq!(kv.calls.round_trips(), 1, "{:?}", kv.calls);
    assert_eq!(kv.calls.batched_keys, 65, "{:?}", kv.calls);
    assert_eq!(read_shard(&mut kv, schema::OPEN_TASKS, 17, sh), Ok(1));
    assert_eq!(read_shard(&mut kv, schema::OPEN_TASKS, 40, sh), Ok(-2));
    assert_eq!(read_counter(&mut kv, schema::LEASED_CLAIMS), Ok(9));
    assert_eq!(read_counter(&mut kv, schema::ARMED_TIMERS), Ok(0));
}

#[test]
fn a_counter_whose_shards_sum_below_zero_is_corrupt() {
    let mut kv = MemKv::new();
    check_layout(&mut kv, true).expect("a fresh keyspace");
    add_to_counter(&mut kv, schema::OPEN_TASKS, 3, Shards::SHARED, 1).expect("adds");
    add_to_counter(&mut kv, schema::OPEN_TASKS, 4, Shards::SHARED, -2).expect("moves");
    match read_counter(&mut kv, schema::OPEN_TASKS) {
        Err(StoreError::Corrupt(d)) => assert!(d.contains("sum to -1"), "{d}"),
        other => panic!("expected corrupt, got {other:?}"),
    }
}

#[test]
fn spread_by_row_a_shard_never_goes_below_zero_even_when_the_sum_could() {
    let mut kv = MemKv::new();
    kv.map
        .insert(schema::layout().into_bytes(), b"4/64".to_vec());
    let sh = Shards::by_row(64).expect("64 shards");
    add_to_counter(&mut kv, schema::OPEN_TASKS, 1, sh, 4).expect("adds");
    let before = kv.map.clone();
    match add_to_counter(&mut kv, schema::OPEN_TASKS, 2, sh, -1) {
        Err(StoreError::Corrupt(d)) => assert!(d.contains("shard 2"), "{d}"),
        other => panic!("expected corrupt, got {other:?}"),
    }
    let mut deltas = [0i64; schema::MAX_SHARDS as usize];
    deltas[1] = -1;
    deltas[2] = -1;
    assert!(matches!(
        add_to_shards(&mut kv, schema::OPEN_TASKS, sh, &deltas),
        Err(StoreError::Corrupt(_))
    ));
    kv.map = before;
    deltas[2] = 0;
    add_to_shards(&mut kv, schema::OPEN_TASKS, sh, &deltas).expect("moves");
    assert_eq!(read_counter(&mut kv, schema::OPEN_TASKS), Ok(3));
    // A negative shard where shards are spread by row is damage.
    kv.map.insert(
        schema::counter_shard(schema::OPEN_TASKS, 9).into_bytes(),
        (-1i64).to_be_bytes().to_vec(),
    );
    match read_counter(&mut kv, schema::OPEN_TASKS) {
        Err(StoreError::Corrupt(d)) => assert!(d.contains("shard 9"), "{d}"),
        other => panic!("expected corrupt, got {other:?}"),
    }
}

#[test]
fn a_shard_of_the_wrong_width_is_corrupt_never_zero() {
    for width in [0, 1, 7, 9] {
        let mut kv = MemKv::new();
        kv.map.insert(
            schema::counter_shard(schema::ARMED_TIMERS, 40).into_bytes(),
            vec![0; width],
        );
        for answer in [
            read_counter(&mut kv, schema::ARMED_TIMERS).map(drop),
            read_shard(&mut kv, schema::ARMED_TIMERS, 40, Shards::SHARED).map(drop),
        ] {
            match answer {
                Err(StoreError::Corrupt(d)) => {
                    assert!(d.contains("armed-timers") && d.contains("shard 40"), "{d}");
                }
                other => panic!("width {width}: expected corrupt, got {other:?}"),
            }
        }
        assert!(add_to_counter(&mut kv, schema::ARMED_TIMERS, 40, Shards::SHARED, 1).is_err());
    }
}

/// A timer's feed entry written from a borrowed change has the bytes of
/// the [`FeedRow`] an earlier build wrote, and reads back as it.
#[test]
fn a_timer_feed_entry_written_borrowed_is_the_stored_feed_row() {
    use crate::model::{Change, TimerChange, TimerEvent};
    let change = TimerChange {
        run: "r".into(),
        effect: "wake".into(),
        at: 7,
        verb: "claim-due".into(),
        what: TimerEvent::Claimed,
        fire_at: 5,
        lease_until: Some(9),
    };
    for prev in [None, Some(Position { slot: 3, seq: 41 })] {
        let borrowed = encode_row(&record::TimerFeedRow {
            prev,
            change: &change,
        })
        .expect("encodes");
        let row = FeedRow {
            prev,
            change: Change::Timer(change.clone()),
        };
        assert_eq!(borrowed, encode_row(&row).expect("encodes"));
        assert_eq!(decode_feed_row(&borrowed).expect("decodes"), row);
    }
}

/// Recording a page of timer changes together leaves the keyspace one
/// record per change would: the same entries, logs and head.
#[test]
fn a_page_of_timer_changes_recorded_together_is_one_record_each() {
    use crate::model::TimerEvent;
    let mut rows: Vec<TimerRow> = (0..5)
        .map(|i| TimerRow {
            timer: Timer {
                run: format!("run-{}", i % 2),
                case: None,
                effect: format!("wake-{i}"),
                step: 1,
                phase: Phase::Forward,
                fire_at: i,
            },
            lease_until: Some(100 + i),
        })
        .collect();
    let mut together = MemKv::new();
    let mut each = MemKv::new();
    for kv in [&mut together, &mut each] {
        kv.now = 50;
        kv.call(|kv| {
            check_layout(kv, true)?;
            for row in &rows {
                write_timer(kv, "arm", TimerEvent::Armed, None, row)?;
            }
            Ok::<_, StoreError>(())
        })
        .expect("arms");
    }
    let record = |together: &mut MemKv, each: &mut MemKv, rows: &[TimerRow]| {
        together
            .call(|kv| record_timers(kv, "claim-due", TimerEvent::Claimed, rows))
            .expect("records");
        each.call(|kv| {
            for row in rows {
                record_timers(
                    kv,
                    "claim-due",
                    TimerEvent::Claimed,
                    core::slice::from_ref(row),
                )?;
            }
            Ok::<_, StoreError>(())
        })
        .expect("records");
        assert_eq!(together.map, each.map);
    };
    record(&mut together, &mut each, &rows);
    assert!(together.map.len() > rows.len() * 4);
    // A page naming one timer twice: its second change follows its first.
    rows.push(rows[1].clone());
    record(&mut together, &mut each, &rows);
}
