//! Point reads: what `get` and `get_many` answer for keys that are there,
//! keys that are not (right beside ones that are), and the largest key and
//! value. It owns these checks' keys and expectations; it must never accept
//! a read that answers another key's value, or answers out of the order
//! asked.

use std::collections::BTreeMap;

use crate::config::Limits;
use crate::storage::backend::{Backend, Mode};
use crate::testkit::report::Failure;
use crate::testkit::steps::{begin, ensure, failed, put, scan_all, show, tenant, write};

/// A fresh tenant answers nothing to every kind of read.
pub fn empty_store_reads_nothing<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "empty_store_reads_nothing";
    let b = make();
    let t = tenant("");
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(C, &b, &t, mode)?;
        let got = txn.get(b"k").map_err(failed(C, "get"))?;
        ensure(C, got.is_none(), || {
            format!("get of an absent key answered {got:?}")
        })?;
        let many = txn
            .get_many(&[b"a".to_vec(), b"b".to_vec()])
            .map_err(failed(C, "get-many"))?;
        ensure(C, many == vec![None, None], || {
            format!("get-many of absent keys answered {many:?}")
        })?;
        let none = txn.get_many(&[]).map_err(failed(C, "get-many"))?;
        ensure(C, none.is_empty(), || {
            "get-many of no keys answered some".into()
        })?;
        for reverse in [false, true] {
            let all = scan_all(C, txn.as_mut(), reverse)?;
            ensure(C, all.is_empty(), || {
                format!("a fresh tenant's scan answered {} entries", all.len())
            })?;
        }
    }
    Ok(())
}

/// What was put is read back, by every kind of read, in the order asked;
/// a put replaces. A `get_many` as long as the sandbox lets a call ask
/// answers every key, not only a first batch of them.
pub fn puts_read_back<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "puts_read_back";
    let b = make();
    let t = tenant("");
    write(
        C,
        &b,
        &t,
        vec![put(b"a", b"1"), put(b"b", b""), put(b"c", &[0, 255, 0])],
    )?;
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(C, &b, &t, mode)?;
        for (k, v) in [(&b"a"[..], &b"1"[..]), (b"b", b""), (b"c", &[0, 255, 0])] {
            let got = txn.get(k).map_err(failed(C, "get"))?;
            ensure(C, got.as_deref() == Some(v), || {
                format!("{mode:?}: get {k:?} answered {got:?}, not {v:?}")
            })?;
        }
        let asked = [
            b"c".to_vec(),
            b"zz".to_vec(),
            b"a".to_vec(),
            b"a".to_vec(),
            b"b".to_vec(),
        ];
        let many = txn.get_many(&asked).map_err(failed(C, "get-many"))?;
        let want = vec![
            Some(vec![0, 255, 0]),
            None,
            Some(b"1".to_vec()),
            Some(b"1".to_vec()),
            Some(Vec::new()),
        ];
        ensure(C, many == want, || {
            format!("{mode:?}: get-many answered {many:?}, not {want:?} in the order asked")
        })?;
    }
    write(C, &b, &t, vec![put(b"a", b"2")])?;
    let mut txn = begin(C, &b, &t, Mode::Read)?;
    let got = txn.get(b"a").map_err(failed(C, "get"))?;
    ensure(C, got.as_deref() == Some(&b"2"[..]), || {
        format!("a put did not replace the value: {got:?}")
    })?;
    drop(txn);
    largest_get_many(C, &b)
}

/// A `get_many` of as many keys as one call may ask, half of them present,
/// in no order, some repeated, answers each in its place.
fn largest_get_many<B: Backend>(c: &'static str, b: &B) -> Result<(), Failure> {
    let t = tenant("");
    let asked_len = Limits::default().scan_entries as usize;
    let present = asked_len / 2;
    let key = |i: usize| format!("g{i:05}").into_bytes();
    let value = |i: usize| (i as u32).to_be_bytes().to_vec();
    write(
        c,
        b,
        &t,
        (0..present).map(|i| put(&key(i), &value(i))).collect(),
    )?;
    // Odd multipliers walk every index once; every seventh key repeats the
    // one before it.
    let mut asked = Vec::with_capacity(asked_len);
    let mut want = Vec::with_capacity(asked_len);
    for j in 0..asked_len {
        let i = if j % 7 == 6 {
            (j - 1).wrapping_mul(2_654_435_761) % asked_len
        } else {
            j.wrapping_mul(2_654_435_761) % asked_len
        };
        asked.push(key(i));
        want.push((i < present).then(|| value(i)));
    }
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(c, b, &t, mode)?;
        let got = txn.get_many(&asked).map_err(failed(c, "get-many"))?;
        ensure(c, got.len() == want.len(), || {
            format!(
                "{mode:?}: a get-many of {} keys answered {} values",
                asked.len(),
                got.len()
            )
        })?;
        if let Some(at) = (0..want.len()).find(|&i| got[i] != want[i]) {
            return Err(Failure::new(
                c,
                format!(
                    "{mode:?}: a get-many of {} keys answered {:?} for key {} (place {at}), not {:?}",
                    asked.len(),
                    got[at],
                    show(&asked[at]),
                    want[at]
                ),
            ));
        }
    }
    Ok(())
}

/// Keys that are there, each beside absent keys that a read which matched
/// keys loosely would confuse with it.
fn present_keys() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        (b"ab".to_vec(), b"v-ab".to_vec()),
        (b"abd".to_vec(), b"v-abd".to_vec()),
        (b"ac\0".to_vec(), b"v-ac0".to_vec()),
        (b"m\x80".to_vec(), b"v-m80".to_vec()),
        (b"Mx".to_vec(), b"v-Mx".to_vec()),
        (vec![0xff], b"v-ff".to_vec()),
    ]
}

/// Absent keys, each right beside a present one.
fn absent_keys() -> Vec<Vec<u8>> {
    vec![
        // A proper prefix of a present key ("ab"), and of two ("a").
        b"a".to_vec(),
        // A present key is a prefix of these.
        b"ab\0".to_vec(),
        b"abda".to_vec(),
        b"ac\0\0".to_vec(),
        // One byte apart from a present key, sharing all but the last byte.
        b"abc".to_vec(),
        b"abe".to_vec(),
        b"m\x7f".to_vec(),
        b"m\x81".to_vec(),
        vec![0xfe],
        // A present key without its trailing zero byte.
        b"ac".to_vec(),
        b"m".to_vec(),
        // A present key in other letter case (a collation that ignores it).
        b"mx".to_vec(),
        b"MX".to_vec(),
        // Past the last key, and before the first.
        vec![0xff, 0x00],
        vec![0xff, 0xff],
        vec![0x00],
    ]
}

/// A read of an absent key answers nothing, however close it lies to a
/// present one: sharing all but its last byte, one byte apart, a prefix of
/// a present key, extending one, or differing from one only in letter case
/// or in bytes that are not text. `get_many` of such keys mixed with
/// present ones, in no order and repeated, answers each in its place.
pub fn absent_keys_read_as_absent<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "absent_keys_read_as_absent";
    let b = make();
    let t = tenant("");
    let present = present_keys();
    let absent = absent_keys();
    write(C, &b, &t, present.iter().map(|(k, v)| put(k, v)).collect())?;
    let model: BTreeMap<Vec<u8>, Vec<u8>> = present.iter().cloned().collect();
    // Absent and present keys interleaved, and the whole list again
    // reversed, so each key is asked twice in other company.
    let mut asked: Vec<Vec<u8>> = Vec::new();
    for (i, k) in absent.iter().enumerate() {
        asked.push(k.clone());
        if let Some((p, _)) = present.get(i % present.len()) {
            asked.push(p.clone());
        }
    }
    let again: Vec<Vec<u8>> = asked.iter().rev().cloned().collect();
    asked.extend(again);
    let want: Vec<Option<Vec<u8>>> = asked.iter().map(|k| model.get(k).cloned()).collect();
    for mode in [Mode::Read, Mode::Write] {
        let mut txn = begin(C, &b, &t, mode)?;
        for k in &absent {
            let got = txn.get(k).map_err(failed(C, "get"))?;
            ensure(C, got.is_none(), || {
                format!(
                    "{mode:?}: get of absent key {} answered {:?}",
                    show(k),
                    got.as_deref().map(show)
                )
            })?;
        }
        for (k, v) in &present {
            let got = txn.get(k).map_err(failed(C, "get"))?;
            ensure(C, got.as_ref() == Some(v), || {
                format!(
                    "{mode:?}: get of {} answered {:?}, not {}",
                    show(k),
                    got.as_deref().map(show),
                    show(v)
                )
            })?;
        }
        let only_absent = txn.get_many(&absent).map_err(failed(C, "get-many"))?;
        ensure(C, only_absent.iter().all(Option::is_none), || {
            let wrong: Vec<String> = absent
                .iter()
                .zip(&only_absent)
                .filter_map(|(k, v)| v.as_ref().map(|v| format!("{} -> {}", show(k), show(v))))
                .collect();
            format!(
                "{mode:?}: get-many of absent keys answered values for {}",
                wrong.join(", ")
            )
        })?;
        let got = txn.get_many(&asked).map_err(failed(C, "get-many"))?;
        ensure(C, got.len() == want.len(), || {
            format!(
                "{mode:?}: a get-many of {} keys answered {} values",
                asked.len(),
                got.len()
            )
        })?;
        if let Some(at) = (0..want.len()).find(|&i| got[i] != want[i]) {
            return Err(Failure::new(
                C,
                format!(
                    "{mode:?}: get-many answered {:?} for key {} (place {at} of {}), not {:?}",
                    got[at].as_deref().map(show),
                    show(&asked[at]),
                    asked.len(),
                    want[at].as_deref().map(show)
                ),
            ));
        }
    }
    Ok(())
}

/// The largest key and value the sandbox lets a call write are stored and
/// read back whole.
pub fn largest_key_and_value<B: Backend>(make: &dyn Fn() -> B) -> Result<(), Failure> {
    const C: &str = "largest_key_and_value";
    let b = make();
    let t = tenant("");
    let limits = Limits::default();
    let key: Vec<u8> = (0..limits.key_bytes).map(|i| (i % 251) as u8).collect();
    let value: Vec<u8> = (0..limits.value_bytes).map(|i| (i % 253) as u8).collect();
    write(C, &b, &t, vec![put(&key, &value), put(b"small", b"v")])?;
    let mut txn = begin(C, &b, &t, Mode::Read)?;
    let got = txn.get(&key).map_err(failed(C, "get"))?;
    ensure(C, got.as_ref() == Some(&value), || {
        format!(
            "a {}-byte key's {}-byte value came back as {:?} bytes",
            key.len(),
            value.len(),
            got.as_ref().map(Vec::len)
        )
    })?;
    let many = txn
        .get_many(std::slice::from_ref(&key))
        .map_err(failed(C, "get-many"))?;
    ensure(
        C,
        many.first().and_then(Option::as_ref) == Some(&value),
        || "get-many did not answer the largest value whole".into(),
    )?;
    let all = scan_all(C, txn.as_mut(), false)?;
    ensure(
        C,
        all.len() == 2 && all[0] == (key.clone(), value.clone()),
        || "a scan did not answer the largest key and value whole".into(),
    )
}
