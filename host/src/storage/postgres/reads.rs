//! The read requests a call's transaction sends, kept so that one can be
//! sent again (the first read of a read-only call may be), and how the rows
//! of a `scan_many` statement are answered range by range. It owns the
//! statements' arguments and the rows' shape; it must never begin or end a
//! transaction.

use tokio_postgres::{Client, Row};

use crate::storage::backend::{Entry, entries_bytes, take_within};
use crate::storage::error::StorageError;
use crate::storage::postgres::conn::Statements;

/// One read request, kept so that it can be sent again.
pub(super) enum Read<'r> {
    Get(&'r str),
    GetMany(&'r [String]),
    Scan {
        which: usize,
        start: &'r [u8],
        end: Option<&'r [u8]>,
        limit: i64,
    },
    /// Forward ranges with an end, each row answered with its range's
    /// number (from 1).
    ScanMany {
        starts: Vec<&'r [u8]>,
        ends: Vec<&'r [u8]>,
        limits: Vec<i64>,
    },
}

impl Read<'_> {
    pub(super) async fn send(
        &self,
        c: &Client,
        s: &Statements,
        tenant: &str,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        match self {
            Read::Get(at) => c.query(&s.get, &[at]).await,
            Read::GetMany(at) => c.query(&s.get_many, &[at]).await,
            Read::Scan {
                which,
                start,
                end,
                limit,
            } => {
                c.query(&s.scan[*which], &[&tenant, start, end, limit])
                    .await
            }
            Read::ScanMany {
                starts,
                ends,
                limits,
            } => {
                c.query(&s.scan_many, &[&tenant, starts, ends, limits])
                    .await
            }
        }
    }
}

/// The rows of a [`Read::ScanMany`] of the ranges `live` (their places among
/// `asked` ranges), answered per range in key order, the entries of all of
/// them together within `max_bytes` as `Txn::scan_many` bounds them.
pub(super) fn answer_ranges(
    rows: Vec<Row>,
    live: &[usize],
    asked: usize,
    max_bytes: usize,
) -> Result<(Vec<Vec<Entry>>, bool), StorageError> {
    let mut grouped: Vec<Vec<Entry>> = vec![Vec::new(); live.len()];
    for r in rows {
        let n: i64 = r.get(0);
        let slot = usize::try_from(n - 1)
            .ok()
            .filter(|&s| s < live.len())
            .ok_or_else(|| StorageError::other("a scan's row came back numbered out of range"))?;
        grouped[slot].push((r.get(1), r.get(2)));
    }
    let mut out: Vec<Vec<Entry>> = vec![Vec::new(); asked];
    let mut left = max_bytes;
    for (i, mut entries) in live.iter().copied().zip(grouped) {
        // Each range's rows in key order, whatever order the join gave.
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let (kept, over) = take_within(entries.into_iter().map(Ok::<_, StorageError>), left)?;
        left -= entries_bytes(&kept).min(left);
        out[i] = kept;
        if over {
            return Ok((out, true));
        }
    }
    Ok((out, false))
}
