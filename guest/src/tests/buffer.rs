//! The call's write buffer: reads see the call's own writes, in `get`,
//! `get-many`, `scan` and `scan-many`, deletes hide stored keys, and a call that fails
//! leaves nothing to commit.

use super::*;
use crate::kv::{Buffered, Kv, ScanRequest, Write, buffered};

fn stored(pairs: &[(&str, &str)]) -> MemKv {
    let mut kv = MemKv::new();
    for (k, v) in pairs {
        kv.map.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }
    kv
}

fn text(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(String, String)> {
    entries
        .into_iter()
        .map(|(k, v)| {
            (
                String::from_utf8(k).expect("utf-8"),
                String::from_utf8(v).expect("utf-8"),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn range(start: &str, end: &str, limit: u32) -> ScanRequest {
    ScanRequest {
        start: start.as_bytes().to_vec(),
        end: Some(end.as_bytes().to_vec()),
        limit,
        reverse: false,
    }
}

/// Ranges the call has not written in go to the store in one batched scan;
/// a range it wrote in is merged with its writes as `scan` merges them, and
/// every answer comes back in the order asked.
#[test]
fn scan_many_merges_written_ranges_and_batches_the_rest() {
    let mut src = stored(&[
        ("a1", "1"),
        ("a2", "2"),
        ("b1", "3"),
        ("c1", "4"),
        ("c2", "5"),
    ]);
    let mut kv = Buffered::new(&mut src);
    kv.delete(b"b1").expect("buffered");
    kv.set(b"b0", b"new").expect("buffered");
    let asked = [
        range("a", "b", 10),
        range("b", "c", 10),
        range("c", "d", 1),
        range("e", "f", 5),
    ];
    let got: Vec<_> = kv
        .scan_many(&asked)
        .expect("scan-many")
        .into_iter()
        .map(text)
        .collect();
    assert_eq!(
        got,
        vec![
            pairs(&[("a1", "1"), ("a2", "2")]),
            pairs(&[("b0", "new")]),
            pairs(&[("c1", "4")]),
            pairs(&[]),
        ]
    );
    drop(kv);
    // The three untouched ranges in one crossing, the written one on its own.
    assert_eq!((src.calls.scan_manys, src.calls.batched_ranges), (1, 3));
    assert_eq!(src.calls.scans, 4);
    assert_eq!(src.calls.round_trips(), 2);
}

#[test]
fn get_reads_the_calls_own_writes_and_deletes_hide_stored_keys() {
    let mut src = stored(&[("a", "1"), ("b", "2")]);
    let mut kv = Buffered::new(&mut src);
    kv.set(b"a", b"new").expect("buffered");
    kv.delete(b"b").expect("buffered");
    kv.set(b"c", b"3").expect("buffered");
    assert_eq!(kv.get(b"a").expect("get"), Some(b"new".to_vec()));
    assert_eq!(kv.get(b"b").expect("get"), None);
    assert_eq!(kv.get(b"c").expect("get"), Some(b"3".to_vec()));
    assert_eq!(kv.get(b"d").expect("get"), None);
}

#[test]
fn get_many_reads_the_calls_own_writes_and_asks_the_store_only_for_the_rest() {
    let mut src = stored(&[("a", "1"), ("b", "2"), ("d", "4")]);
    let mut kv = Buffered::new(&mut src);
    kv.set(b"a", b"new").expect("buffered");
    kv.delete(b"b").expect("buffered");
    let keys: Vec<Vec<u8>> = ["a", "b", "c", "d"]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    let got = kv.get_many(&keys).expect("get-many");
    assert_eq!(
        got,
        vec![Some(b"new".to_vec()), None, None, Some(b"4".to_vec())]
    );
    drop(kv);
    assert_eq!(src.calls.get_manys, 1);
    assert_eq!(src.calls.batched_keys, 2, "c and d only");
}

#[test]
fn get_many_answers_a_repeated_key_in_each_place_it_was_asked() {
    let mut src = stored(&[("a", "1")]);
    let mut kv = Buffered::new(&mut src);
    let keys: Vec<Vec<u8>> = ["a", "z", "a"]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    let got = kv.get_many(&keys).expect("get-many");
    assert_eq!(got, vec![Some(b"1".to_vec()), None, Some(b"1".to_vec())]);
}

#[test]
fn get_many_kept_keeps_its_answers_for_the_reads_after_it_and_writes_still_win() {
    let mut src = stored(&[("a", "1"), ("b", "2")]);
    let mut kv = Buffered::new(&mut src);
    kv.set(b"b", b"new").expect("buffered");
    let keys: Vec<Vec<u8>> = ["a", "b", "z"]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    let got = kv.get_many_kept(&keys).expect("get-many");
    assert_eq!(got, vec![Some(b"1".to_vec()), Some(b"new".to_vec()), None]);
    assert_eq!(kv.get(b"a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(kv.get(b"z").expect("get"), None);
    kv.set(b"a", b"2").expect("buffered");
    assert_eq!(kv.get(b"a").expect("get"), Some(b"2".to_vec()));
    drop(kv);
    assert_eq!(src.calls.get_manys, 1, "one batch, nothing after");
    assert_eq!(src.calls.batched_keys, 2, "a and z: b was written");
    assert_eq!(src.calls.gets, 2);
}

#[test]
fn prefetched_keys_are_read_once_and_writes_still_win() {
    let mut src = stored(&[("a", "1")]);
    let mut kv = Buffered::new(&mut src);
    kv.prefetch(&[b"a".to_vec(), b"z".to_vec()])
        .expect("prefetch");
    assert_eq!(kv.get(b"a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(kv.get(b"z").expect("get"), None);
    kv.set(b"a", b"2").expect("buffered");
    assert_eq!(kv.get(b"a").expect("get"), Some(b"2".to_vec()));
    drop(kv);
    assert_eq!(
        src.calls.gets, 2,
        "one batched read of two keys, nothing after"
    );
    assert_eq!(src.calls.get_manys, 1);
}

#[test]
fn scan_merges_the_calls_writes_in_order_in_both_directions() {
    let mut src = stored(&[("a", "1"), ("b", "2"), ("c", "3"), ("e", "5")]);
    let mut kv = Buffered::new(&mut src);
    kv.delete(b"b").expect("buffered");
    kv.set(b"c", b"new").expect("buffered");
    kv.set(b"d", b"4").expect("buffered");
    kv.set(b"z", b"outside").expect("buffered");
    let forward = text(kv.scan(b"a", Some(b"f"), 10, false).expect("scan"));
    assert_eq!(
        forward,
        pairs(&[("a", "1"), ("c", "new"), ("d", "4"), ("e", "5")])
    );
    let reverse = text(kv.scan(b"a", Some(b"f"), 10, true).expect("scan"));
    assert_eq!(
        reverse,
        pairs(&[("e", "5"), ("d", "4"), ("c", "new"), ("a", "1")])
    );
    let open_end = text(kv.scan(b"d", None, 10, false).expect("scan"));
    assert_eq!(open_end, pairs(&[("d", "4"), ("e", "5"), ("z", "outside")]));
}

#[test]
fn a_scan_reads_on_past_keys_the_call_deleted_to_fill_its_limit() {
    let mut src = MemKv::new();
    for i in 0..20u8 {
        src.map.insert(vec![b'k', i], vec![i]);
    }
    let mut kv = Buffered::new(&mut src);
    for i in 0..10u8 {
        kv.delete(&[b'k', i]).expect("buffered");
    }
    let got = kv.scan(b"k", Some(b"l"), 5, false).expect("scan");
    assert_eq!(
        got.iter().map(|(k, _)| k[1]).collect::<Vec<_>>(),
        vec![10, 11, 12, 13, 14]
    );
    let got = kv.scan(b"k", Some(b"l"), 5, true).expect("scan");
    assert_eq!(
        got.iter().map(|(k, _)| k[1]).collect::<Vec<_>>(),
        vec![19, 18, 17, 16, 15]
    );
    let everything = kv.scan(b"k", Some(b"l"), 100, false).expect("scan");
    assert_eq!(everything.len(), 10);
}

#[test]
fn a_scan_stops_at_its_limit_when_the_calls_writes_come_first() {
    let mut src = stored(&[("c", "3"), ("d", "4")]);
    let mut kv = Buffered::new(&mut src);
    kv.set(b"a", b"1").expect("buffered");
    kv.set(b"b", b"2").expect("buffered");
    assert_eq!(
        text(kv.scan(b"a", None, 3, false).expect("scan")),
        pairs(&[("a", "1"), ("b", "2"), ("c", "3")])
    );
}

#[test]
fn a_call_that_fails_hands_over_an_empty_batch_and_one_that_succeeds_its_writes() {
    let mut src = stored(&[("a", "1")]);
    let (answer, batch) = buffered(&mut src, |kv| {
        kv.set(b"b", b"2")?;
        kv.delete(b"a")?;
        Err::<(), _>(crate::kv::KvError::Storage("refused after writing".into()))
    });
    assert!(answer.is_err());
    assert!(batch.is_empty(), "a failed call handed over {batch:?}");
    let (answer, batch) = buffered(&mut src, |kv| {
        kv.set(b"b", b"2")?;
        kv.set(b"b", b"3")?;
        kv.delete(b"a")?;
        Ok::<_, crate::kv::KvError>(())
    });
    assert!(answer.is_ok());
    assert_eq!(
        batch,
        vec![
            Write::Delete(b"a".to_vec()),
            Write::Put(b"b".to_vec(), b"3".to_vec()),
        ],
        "one write per key, the last one"
    );
}

/// Through the buffer, a verb that writes and then refuses commits nothing;
/// the same sequence run straight on the store would have left its writes.
#[test]
fn a_verb_that_writes_then_fails_commits_nothing_through_the_buffer() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").due(50));
    let before = kv.map.clone();
    // The escalation writes the row and moves its indexes; the invalid read
    // after it fails the call.
    let answer = kv.call(|kv| {
        crate::tasks::escalate(kv, "t", None).map_err(|_| StoreError::Storage("x".into()))?;
        crate::tasks::get(kv, "")
    });
    assert!(matches!(answer, Err(StoreError::Invalid(_))), "{answer:?}");
    assert_eq!(kv.map, before, "the failed call's writes were applied");
}

/// Random writes and reads through the buffer agree with the same writes
/// made straight on a copy of the store.
#[test]
fn the_buffer_reads_exactly_what_writing_through_would_have_stored() {
    use proptest::prelude::*;
    let op = (0u8..3, 0u8..12, 0u8..4);
    proptest!(ProptestConfig::with_cases(300), |(
        start in proptest::collection::vec((0u8..12, 0u8..4), 0..10),
        ops in proptest::collection::vec(op, 0..30),
    )| {
        let mut src = MemKv::new();
        for (k, v) in &start {
            src.map.insert(vec![*k], vec![*v]);
        }
        let mut direct = src.clone();
        let mut kv = Buffered::new(&mut src);
        for (what, k, v) in ops {
            match what {
                0 => {
                    kv.set(&[k], &[v]).expect("buffered");
                    direct.set(&[k], &[v]).expect("direct");
                }
                1 => {
                    kv.delete(&[k]).expect("buffered");
                    direct.delete(&[k]).expect("direct");
                }
                _ => {
                    let limit = u32::from(v) + 1;
                    for reverse in [false, true] {
                        let a = kv.scan(&[k / 2], Some(&[k / 2 + 6]), limit, reverse).expect("scan");
                        let b = direct.scan(&[k / 2], Some(&[k / 2 + 6]), limit, reverse).expect("scan");
                        prop_assert_eq!(a, b);
                    }
                    prop_assert_eq!(kv.get(&[k]).expect("get"), direct.get(&[k]).expect("get"));
                }
            }
        }
        let batch = kv.into_batch();
        src.apply(batch);
        prop_assert_eq!(src.map, direct.map);
    });
}
