//! A job's keys: its row `("job", id)`, its chunks of recorded task ids
//! `("job-item", id, seq)`, and its entry `("job-run", id)` while it has work
//! left, which every write of the row keeps in step. This module reads and
//! writes those keys only, and decides no rule of a job.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::StoreError;
use crate::schema;
use crate::store;

use super::model::JobRow;

fn decode_exact<T: serde::de::DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, StoreError> {
    match postcard::take_from_bytes(bytes) {
        Ok((v, [])) => Ok(v),
        Ok((_, left)) => Err(StoreError::Corrupt(format!(
            "{what}: {} bytes left over after it",
            left.len()
        ))),
        Err(e) => Err(StoreError::Corrupt(format!("{what}: {e}"))),
    }
}

/// A job row's bytes, checked to be stored under its own id.
pub fn decode(id: &str, bytes: &[u8]) -> Result<JobRow, StoreError> {
    let row: JobRow = decode_exact(&format!("job {id}"), bytes)?;
    if row.job.id != id {
        return Err(StoreError::Corrupt(format!(
            "job {id}: the job is stored under another id ({})",
            row.job.id
        )));
    }
    if row.taken > row.written {
        return Err(StoreError::Corrupt(format!(
            "job {id}: it has taken chunk {} of {} written",
            row.taken, row.written
        )));
    }
    Ok(row)
}

pub fn load<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<JobRow>, StoreError> {
    kv.get(schema::job(id).as_bytes())?
        .map(|b| decode(id, &b))
        .transpose()
}

/// Writes the row, and its `job-run` entry exactly while it has work left.
/// `was_runnable`: whether the stored row had one.
pub fn save<K: Kv + ?Sized>(
    kv: &mut K,
    row: &JobRow,
    was_runnable: bool,
) -> Result<(), StoreError> {
    kv.set(
        schema::job(&row.job.id).as_bytes(),
        &store::encode_row(row)?,
    )?;
    let run = schema::job_run(&row.job.id);
    match (was_runnable, row.runnable()) {
        (false, true) => kv.set(run.as_bytes(), &[])?,
        (true, false) => kv.delete(run.as_bytes())?,
        _ => {}
    }
    Ok(())
}

/// The ids of chunk `seq`; a chunk the row says is there and is not is
/// damage.
pub fn chunk<K: Kv + ?Sized>(kv: &mut K, id: &str, seq: u64) -> Result<Vec<String>, StoreError> {
    let what = format!("job {id} chunk {seq}");
    let bytes = kv
        .get(schema::job_item(id, seq).as_bytes())?
        .ok_or_else(|| StoreError::Corrupt(format!("{what}: missing")))?;
    let ids: Vec<String> = decode_exact(&what, &bytes)?;
    if ids.is_empty() {
        return Err(StoreError::Corrupt(format!("{what}: empty")));
    }
    Ok(ids)
}

pub fn put_chunk<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    seq: u64,
    ids: &[String],
) -> Result<(), StoreError> {
    kv.set(
        schema::job_item(id, seq).as_bytes(),
        &store::encode_row(&ids)?,
    )?;
    Ok(())
}

pub fn drop_chunk<K: Kv + ?Sized>(kv: &mut K, id: &str, seq: u64) -> Result<(), StoreError> {
    kv.delete(schema::job_item(id, seq).as_bytes())?;
    Ok(())
}

/// Jobs in id order after `after`, at most `limit`.
pub fn list<K: Kv + ?Sized>(
    kv: &mut K,
    limit: u32,
    after: Option<&str>,
) -> Result<Vec<JobRow>, StoreError> {
    let prefix = schema::jobs();
    let start = match after {
        Some(a) => schema::job(a).successor(),
        None => prefix.as_bytes().to_vec(),
    };
    let mut out = Vec::new();
    for (k, v) in kv.scan(&start, Some(&prefix.prefix_end()), limit, false)? {
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Str(id)] => out.push(decode(id, &v)?),
            _ => return Err(store::bad_entry("job")),
        }
    }
    Ok(out)
}

/// The ids of jobs with work left, in id order, at most `limit`.
pub fn runnable<K: Kv + ?Sized>(kv: &mut K, limit: u32) -> Result<Vec<String>, StoreError> {
    let prefix = schema::job_runs();
    let mut out = Vec::new();
    for (k, _) in kv.scan(prefix.as_bytes(), Some(&prefix.prefix_end()), limit, false)? {
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Str(id)] => out.push(id.clone()),
            _ => return Err(store::bad_entry("job-run")),
        }
    }
    Ok(out)
}
