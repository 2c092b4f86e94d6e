//! The webhook subscriptions: each row decodes under its own id, holds the
//! rules it was written under, and a position inside the feed that a live
//! subscription has not lost to trimming (what a row must hold is
//! `subscriptions::row::findings`'s to say).

use crate::changes::cursor::Cursor;
use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::StoreError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema;
use crate::store;
use crate::subscriptions::row;

use super::walk::{Findings, decoded, text};

pub(super) fn check_subscriptions<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    bounds: Option<(&Cursor, &Cursor)>,
) -> Result<(), StoreError> {
    let prefix = schema::subscriptions();
    let mut count = 0usize;
    store::walk(kv, &prefix, |_, key, value| {
        let Some(elems) = decoded(f, "subscription", &key, &prefix) else {
            return Ok(!f.full());
        };
        match elems.as_slice() {
            [Elem::Str(id)] => {
                count += 1;
                if count == row::MAX_SUBSCRIPTIONS + 1 {
                    f.add(
                        "subscription",
                        id,
                        "the tenant holds more subscriptions than a tenant may",
                    );
                }
                match row::decode_listed(id, &value) {
                    Err(StoreError::Corrupt(d)) => f.add("subscription", id, d),
                    Err(e) => return Err(e),
                    Ok(sub) => {
                        for d in row::findings(&sub, bounds) {
                            f.add("subscription", id, d);
                        }
                    }
                }
            }
            _ => f.add(
                "subscription",
                &text(&elems),
                "a subscription key has the wrong shape",
            ),
        }
        Ok(!f.full())
    })
}
