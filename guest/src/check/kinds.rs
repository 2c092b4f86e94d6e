//! The kind definitions: each decodes, is stored under its own name, and
//! declares outcome rules `define-kind` would accept (so a damaged schema
//! is found here, not by the settle that first needs it).

use crate::keys::Elem;
use crate::kinds;
use crate::kv::Kv;
use crate::model::StoreError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema;
use crate::store;
use crate::validate;

use super::walk::{Findings, decoded, text};

pub(super) fn check_kinds<K: Kv + ?Sized>(kv: &mut K, f: &mut Findings) -> Result<(), StoreError> {
    let prefix = schema::kinds();
    store::walk(kv, &prefix, |_, key, value| {
        let Some(elems) = decoded(f, "kind", &key, &prefix) else {
            return Ok(!f.full());
        };
        let [Elem::Str(name)] = elems.as_slice() else {
            f.add("kind", &text(&elems), "a kind key has the wrong shape");
            return Ok(!f.full());
        };
        match kinds::decode(name, &value) {
            Err(StoreError::Corrupt(d)) => f.add("kind", name, d),
            Err(e) => return Err(e),
            Ok(def) => {
                if let Err(e) = validate::outcome_rules("outcomes", &def.outcomes) {
                    f.add(
                        "kind",
                        name,
                        format!("the definition is not one define-kind accepts: {e}"),
                    );
                }
            }
        }
        Ok(!f.full())
    })
}
