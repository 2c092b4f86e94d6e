//! The tenant-keys lines written and read back: the documented shape, a
//! round trip, each damage refused naming its line, entries over the
//! engine's limits refused, and keyed files read only with their key.

use super::*;

fn key(byte: u8) -> DigestKey {
    DigestKey::from_file_bytes(vec![byte; 32]).expect("a key")
}

fn export_with(
    tenant: &str,
    entries: &[(&[u8], &[u8])],
    key: Option<&DigestKey>,
) -> (Vec<u8>, Digest) {
    let mut out = Vec::new();
    let mut w = Writer::begin(&mut out, tenant, key).expect("first line");
    for (k, v) in entries {
        w.entry(k, v).expect("entry");
    }
    let digest = w.finish().expect("last line");
    (out, digest)
}

fn export(tenant: &str, entries: &[(&[u8], &[u8])]) -> (Vec<u8>, Digest) {
    export_with(tenant, entries, None)
}

fn read_with(
    bytes: &[u8],
    key: Option<&DigestKey>,
) -> Result<(String, Vec<Entry>, Digest), KeysError> {
    let mut r = Reader::new(bytes, key)?;
    let mut entries = Vec::new();
    while let Some(e) = r.next_entry()? {
        entries.push(e);
    }
    Ok((r.tenant().to_owned(), entries, r.digest().clone()))
}

fn bad_line_with(bytes: &[u8], key: Option<&DigestKey>) -> (u64, String) {
    match read_with(bytes, key) {
        Err(KeysError::BadLine { line, why }) => (line, why),
        other => panic!("expected a bad line, got {other:?}"),
    }
}

fn bad_line(bytes: &[u8]) -> (u64, String) {
    bad_line_with(bytes, None)
}

#[test]
fn the_lines_are_the_documented_ones() {
    let (bytes, digest) = export("acme", &[(b"\x01", b"hi")]);
    let text = String::from_utf8(bytes).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        r#"{"format":"leasehold-tenant-keys","version":1,"tenant":"acme"}"#
    );
    assert_eq!(lines[1], r#"{"key":"01","value":"6869"}"#);
    assert_eq!(
        lines[2],
        format!(
            r#"{{"end":{{"keys":1,"bytes":3,"sha256":"{}"}}}}"#,
            digest.hex()
        )
    );
    assert_eq!(lines.len(), 3);
}

/// A keyed file says so on its first line, and its last line carries the
/// HMAC-SHA256 of every byte before it under the key.
#[test]
fn a_keyed_file_names_its_digest_and_seals_every_byte_before_its_last_line() {
    let k = key(9);
    let (bytes, _) = export_with("acme", &[(b"\x01", b"hi")], Some(&k));
    let text = String::from_utf8(bytes).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        r#"{"format":"leasehold-tenant-keys","version":2,"tenant":"acme","digest":"hmac-sha256"}"#
    );
    let mut seal = Seal::new(&k);
    seal.update(format!("{}\n{}\n", lines[0], lines[1]).as_bytes());
    assert_eq!(
        lines[2],
        format!(
            r#"{{"end":{{"keys":1,"bytes":3,"hmac_sha256":"{}"}}}}"#,
            seal.hex()
        )
    );
}

#[test]
fn what_is_written_reads_back_with_the_same_digest() {
    let entries: &[(&[u8], &[u8])] = &[(b"a", b""), (b"b\x00", b"\xff\xfe"), (b"c", b"x")];
    for k in [None, Some(key(1))] {
        let (bytes, digest) = export_with("t-1", entries, k.as_ref());
        let (tenant, read, again) = read_with(&bytes, k.as_ref()).expect("reads back");
        assert_eq!(tenant, "t-1");
        let read: Vec<(&[u8], &[u8])> = read
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        assert_eq!(read, entries);
        assert_eq!(again.hex(), digest.hex(), "the plain digest either way");
        assert_eq!(again.keys(), 3);
    }
}

#[test]
fn a_file_cut_short_or_changed_is_refused_naming_the_line() {
    let (bytes, _) = export("t", &[(b"a", b"1"), (b"b", b"2")]);
    let text = String::from_utf8(bytes).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();

    let cut = lines[..3].join("\n");
    let (line, why) = bad_line(cut.as_bytes());
    assert!(why.contains("cut short"), "{why}");
    assert_eq!(line, 3);

    let changed = text.replace(r#""value":"32""#, r#""value":"33""#);
    let (line, why) = bad_line(changed.as_bytes());
    assert!(why.contains("the last line says 2 keys"), "{why}");
    assert_eq!(line, 4);

    let swapped = [lines[0], lines[2], lines[1], lines[3]].join("\n");
    let (line, why) = bad_line(swapped.as_bytes());
    assert!(why.contains("rising order"), "{why}");
    assert_eq!(line, 3);

    let more = format!("{text}{}\n", lines[1]);
    assert!(bad_line(more.as_bytes()).1.contains("lines follow"));

    let not_hex = text.replace(r#""key":"61""#, r#""key":"6g""#);
    assert!(bad_line(not_hex.as_bytes()).1.contains("not hex"));

    assert!(bad_line(b"").1.contains("empty"));
    let other = text.replace("leasehold-tenant-keys", "something-else");
    let (line, why) = bad_line(other.as_bytes());
    assert!(why.contains("this build reads"), "{why}");
    assert_eq!(line, 1);

    let bad_tenant = text.replace(r#""tenant":"t""#, r#""tenant":"a b""#);
    assert!(bad_line(bad_tenant.as_bytes()).1.contains("tenant \"a b\""));
}

/// Entries no call could write are refused by the reader (naming the line)
/// and never written by the writer.
#[test]
fn entries_over_the_engines_limits_are_refused_both_ways() {
    let (max_key, max_value) = crate::tenant_keys::bounds::entry_bounds();
    let big = vec![7u8; max_value + 1];
    let long = vec![7u8; max_key + 1];
    let mut out = Vec::new();
    let mut w = Writer::begin(&mut out, "t", None).expect("first line");
    assert!(matches!(w.entry(b"k", &big), Err(KeysError::OverLimit(_))));
    assert!(matches!(w.entry(&long, b"v"), Err(KeysError::OverLimit(_))));

    // A file some other tool wrote, with a value one byte over the limit
    // after a good entry: refused at its line.
    let (good, _) = export("t", &[(b"a", b"1")]);
    let text = String::from_utf8(good).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    let over = format!(
        "{}\n{}\n{{\"key\":\"62\",\"value\":\"{}\"}}\n",
        lines[0],
        lines[1],
        hex(&big)
    );
    let (line, why) = bad_line(over.as_bytes());
    assert_eq!(line, 3);
    assert!(
        why.contains(&format!("a value of {} bytes", max_value + 1)),
        "{why}"
    );
    let over_key = format!(
        "{}\n{{\"key\":\"{}\",\"value\":\"\"}}\n",
        lines[0],
        hex(&long)
    );
    assert!(
        bad_line(over_key.as_bytes())
            .1
            .contains("a key of 4097 bytes")
    );
}

/// A keyed file is read only with its key; a plain one is refused when a
/// key is given (it cannot be authenticated); a wrong key, or any change
/// to a keyed file, is refused at its last line.
#[test]
fn a_keyed_file_reads_only_with_its_key() {
    let (right, wrong) = (key(1), key(2));
    let (bytes, _) = export_with("t", &[(b"a", b"1"), (b"b", b"2")], Some(&right));
    let (line, why) = bad_line_with(&bytes, None);
    assert_eq!(line, 1);
    assert!(why.contains("keyed"), "{why}");
    let (line, why) = bad_line_with(&bytes, Some(&wrong));
    assert_eq!(line, 4);
    assert!(why.contains("the key is not the one"), "{why}");
    let text = String::from_utf8(bytes.clone()).expect("utf-8");
    // The tenant it names is sealed too.
    let renamed = text.replace(r#""tenant":"t""#, r#""tenant":"u""#);
    assert_eq!(bad_line_with(renamed.as_bytes(), Some(&right)).0, 4);
    // So is every entry, even one whose plain digest would be fixed up.
    let changed = text.replace(r#""value":"32""#, r#""value":"33""#);
    assert_eq!(bad_line_with(changed.as_bytes(), Some(&right)).0, 4);
    read_with(&bytes, Some(&right)).expect("reads with its key");

    let (plain, _) = export("t", &[(b"a", b"1")]);
    let (line, why) = bad_line_with(&plain, Some(&right));
    assert_eq!(line, 1);
    assert!(why.contains("cannot be authenticated"), "{why}");

    // A keyed file whose last line was swapped for a plain one.
    let lines: Vec<&str> = text.lines().collect();
    let (_, plain_digest) = export("t", &[(b"a", b"1"), (b"b", b"2")]);
    let swapped = format!(
        "{}\n{}\n{}\n{{\"end\":{{\"keys\":2,\"bytes\":4,\"sha256\":\"{}\"}}}}\n",
        lines[0],
        lines[1],
        lines[2],
        plain_digest.hex()
    );
    assert!(
        bad_line_with(swapped.as_bytes(), Some(&right))
            .1
            .contains("no keyed")
    );
}

/// A backup holds sections back to back: each reads its own lines and
/// hands the rest on.
#[test]
fn sections_read_one_after_another() {
    let (mut bytes, first) = export("a", &[(b"k", b"v")]);
    let (second_bytes, second) = export("b", &[]);
    bytes.extend_from_slice(&second_bytes);
    bytes.extend_from_slice(b"{\"after\":true}\n");
    let mut r = Reader::section(LineReader::new(bytes.as_slice()), None).expect("first");
    assert_eq!(r.tenant(), "a");
    while r.next_entry().expect("entry").is_some() {}
    assert!(r.ended());
    assert_eq!(r.digest().hex(), first.hex());
    let mut r = Reader::section(r.into_rest(), None).expect("second");
    assert_eq!(r.tenant(), "b");
    assert!(r.next_entry().expect("end").is_none());
    assert_eq!(r.digest().hex(), second.hex());
    let mut rest = r.into_rest();
    assert_eq!(rest.line(), 5);
    let after = rest.next_line().expect("read").expect("a line");
    assert_eq!(after.text(), b"{\"after\":true}");
    let (bytes, _) = export("a", &[]);
    let mut lines = LineReader::new(bytes.as_slice());
    while lines.next_line().expect("read").is_some() {}
    match Reader::section(lines, None) {
        Err(KeysError::BadLine { line: 3, why }) => assert!(why.contains("cut short")),
        other => panic!("expected a cut file, got {:?}", other.err()),
    }
}
