//! The schedules: each row decodes under its own id, its spec still
//! checks, and the occurrence it names as armed next has its timer (what
//! each row must hold is `schedules::findings`'s to say).

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::StoreError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schedules;
use crate::schema;
use crate::store;

use super::walk::{Findings, decoded, text};

pub(super) fn check_schedules<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
) -> Result<(), StoreError> {
    let prefix = schema::schedules();
    store::walk(kv, &prefix, |kv, key, value| {
        let Some(elems) = decoded(f, "schedule", &key, &prefix) else {
            return Ok(!f.full());
        };
        match elems.as_slice() {
            [Elem::Str(id)] => {
                for d in schedules::findings(kv, id, &value)? {
                    f.add("schedule", id, d);
                }
            }
            _ => f.add(
                "schedule",
                &text(&elems),
                "a schedule key has the wrong shape",
            ),
        }
        Ok(!f.full())
    })
}
