//! The `kinds` interface: a tenant's task kinds, each with the outcomes a
//! decision on a task of that kind may have (which need a reason, a JSON
//! Schema for each one's output).

use leasehold_guest::model::KindDefinition;

use crate::bindings::WitKindDefinition;
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, at_most, malformed, store};

/// A definition answered for another kind than asked is no answer.
fn same_kind(d: WitKindDefinition, kind: &str) -> Result<KindDefinition, Error> {
    if d.kind != kind {
        return Err(malformed(format!(
            "asked for kind {kind}, answered kind {}",
            d.kind
        )));
    }
    Ok(d.into())
}

impl Tenant {
    /// Creates or replaces a kind's definition, compiling each output
    /// schema now (one that is not valid, or uses a keyword outside the
    /// supported subset, is `invalid`, naming where). With `expected`, only
    /// over that revision (0: not yet defined), else `stale` with the
    /// current one. Answers the definition with its new revision.
    pub fn define_kind(
        &self,
        definition: &KindDefinition,
        expected: Option<u64>,
    ) -> Result<KindDefinition, Error> {
        let d = WitKindDefinition::from(definition.clone());
        self.call(
            Verb::DefineKind,
            |x, s| x.call(s, (&d, expected)),
            |a: StoreAnswer<WitKindDefinition>| same_kind(store(a)?, &definition.kind),
        )
    }

    /// A kind's definition, if it has one.
    pub fn get_kind(&self, kind: &str) -> Result<Option<KindDefinition>, Error> {
        self.call(
            Verb::GetKind,
            |x, s| x.call(s, (kind,)),
            |a: StoreAnswer<Option<WitKindDefinition>>| {
                store(a)?.map(|d| same_kind(d, kind)).transpose()
            },
        )
    }

    /// Defined kinds in name order, after `after`, at most `limit`.
    pub fn list_kinds(
        &self,
        limit: u32,
        after: Option<&str>,
    ) -> Result<Vec<KindDefinition>, Error> {
        self.call(
            Verb::ListKinds,
            |x, s| x.call(s, (limit, after)),
            |a: StoreAnswer<Vec<WitKindDefinition>>| {
                let list: Vec<KindDefinition> = at_most(store(a)?, limit, "list-kinds")?
                    .into_iter()
                    .map(Into::into)
                    .collect();
                if list.windows(2).any(|w| w[0].kind >= w[1].kind)
                    || after.is_some_and(|a| list.first().is_some_and(|d| d.kind.as_str() <= a))
                {
                    return Err(malformed("list-kinds answered out of order".to_owned()));
                }
                Ok(list)
            },
        )
    }

    /// Removes a kind's definition; answers whether there was one.
    pub fn remove_kind(&self, kind: &str) -> Result<bool, Error> {
        self.call(Verb::RemoveKind, |x, s| x.call(s, (kind,)), store::<bool>)
    }
}
