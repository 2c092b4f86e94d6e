//! The bulk jobs: each row decodes and is stored under its own id; a job
//! has its `job-run` entry exactly while it has work left, and every such
//! entry names one; every chunk of recorded ids belongs to a job that has
//! still to take it, and every chunk a job has still to take is there.

use crate::jobs;
use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::StoreError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema;
use crate::store;

use super::walk::{Findings, decoded, text};

/// What a job row says of its other keys.
fn row_of<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<jobs::JobRow>, StoreError> {
    match kv.get(schema::job(id).as_bytes())? {
        None => Ok(None),
        Some(b) => match jobs::decode_row(id, &b) {
            Ok(r) => Ok(Some(r)),
            // The row's own walk reports it.
            Err(StoreError::Corrupt(_)) => Ok(None),
            Err(e) => Err(e),
        },
    }
}

pub(super) fn check_jobs<K: Kv + ?Sized>(kv: &mut K, f: &mut Findings) -> Result<(), StoreError> {
    let prefix = schema::jobs();
    store::walk(kv, &prefix, |kv, key, value| {
        let Some(elems) = decoded(f, "job", &key, &prefix) else {
            return Ok(!f.full());
        };
        let [Elem::Str(id)] = elems.as_slice() else {
            f.add("job", &text(&elems), "a job key has the wrong shape");
            return Ok(!f.full());
        };
        let row = match jobs::decode_row(id, &value) {
            Err(StoreError::Corrupt(d)) => {
                f.add("job", id, d);
                return Ok(!f.full());
            }
            Err(e) => return Err(e),
            Ok(r) => r,
        };
        let listed = kv.get(schema::job_run(id).as_bytes())?.is_some();
        if listed != row.runnable() {
            f.add(
                "job-run",
                id,
                format!(
                    "the job is {} with {} chunks left, yet its job-run entry is {}",
                    row.job.state.name(),
                    row.written - row.taken,
                    if listed { "there" } else { "missing" }
                ),
            );
        }
        for seq in row.taken..row.written {
            if kv.get(schema::job_item(id, seq).as_bytes())?.is_none() {
                f.add("job-item", id, format!("chunk {seq} is missing"));
            }
        }
        Ok(!f.full())
    })?;
    let runs = schema::job_runs();
    store::walk(kv, &runs, |kv, key, _| {
        let Some(elems) = decoded(f, "job-run", &key, &runs) else {
            return Ok(!f.full());
        };
        let [Elem::Str(id)] = elems.as_slice() else {
            f.add(
                "job-run",
                &text(&elems),
                "a job-run key has the wrong shape",
            );
            return Ok(!f.full());
        };
        if kv.get(schema::job(id).as_bytes())?.is_none() {
            f.add("job-run", id, "the entry names no job");
        }
        Ok(!f.full())
    })?;
    let items = schema::job_items_all();
    store::walk(kv, &items, |kv, key, _| {
        let Some(elems) = decoded(f, "job-item", &key, &items) else {
            return Ok(!f.full());
        };
        let [Elem::Str(id), Elem::Int(seq)] = elems.as_slice() else {
            f.add(
                "job-item",
                &text(&elems),
                "a job-item key has the wrong shape",
            );
            return Ok(!f.full());
        };
        let wanted = row_of(kv, id)?
            .is_some_and(|r| u64::try_from(*seq).is_ok_and(|s| (r.taken..r.written).contains(&s)));
        if !wanted {
            f.add(
                "job-item",
                id,
                format!("chunk {seq} is not one its job has still to take"),
            );
        }
        Ok(!f.full())
    })
}
