//! The `search` interface: a search's page, a count, building a keyspace's
//! search entries, and the tenant's saved views, one method per verb. The
//! component picks the index and walks it; this module only checks what it
//! answers. A page is held to its limit, to tasks that match its filter and
//! its viewer, each once, in its sort's order; a count to being exact
//! exactly when it has no `next`; a view to the name asked about; a listing
//! to name order within its limit. It never filters, sorts or trims an
//! answer into shape: what the contract rules out is a sandbox failure.

use leasehold_guest::model::Task;
use leasehold_guest::search::model::reversed;
use leasehold_guest::search::{
    CountAnswer, IndexProgress, SavedView, SearchPage, SearchQuery, TaskFilter, Viewer, order_key,
};

use crate::bindings::wit_search;
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, at_most, distinct, malformed, store};

/// A view answered under another name than asked is no answer.
fn same_view(v: wit_search::SavedView, name: &str, verb: &str) -> Result<SavedView, Error> {
    if v.name != name {
        return Err(malformed(format!(
            "{verb} asked for view {name:?}, answered view {:?}",
            v.name
        )));
    }
    Ok(v.into())
}

/// A page must be what its query could produce: within its limit, each
/// task once, every one matching the filter and visible to the viewer, in
/// the sort's total order (so a walk by `next` neither repeats nor skips).
fn checked_page(p: wit_search::SearchPage, q: &SearchQuery) -> Result<SearchPage, Error> {
    let page = SearchPage::from(p);
    let tasks = at_most(page.tasks, q.limit, "search")?;
    distinct(&tasks, "search")?;
    let outside = |t: &Task| !q.filter.matches(t) || q.viewer.as_ref().is_some_and(|v| !v.sees(t));
    if let Some(t) = tasks.iter().find(|t| outside(t)) {
        return Err(malformed(format!(
            "search answered task {}, which its filter or viewer rules out",
            t.id
        )));
    }
    let backwards = reversed(q.sort);
    let in_order = tasks.windows(2).all(|w| {
        let (a, b) = (order_key(q.sort, &w[0]), order_key(q.sort, &w[1]));
        if backwards { a > b } else { a < b }
    });
    if !in_order {
        return Err(malformed(format!(
            "search answered its page out of its {} order",
            q.sort.key.name()
        )));
    }
    Ok(SearchPage { tasks, ..page })
}

impl Tenant {
    /// One page of the tasks that match `query.filter` (and that
    /// `query.viewer`, when given, may see), in `query.sort`'s order, at
    /// most `query.limit` (1–1000); `next` goes on from where it stopped.
    /// A keyspace whose search entries are still being built (laid out
    /// before search) answers `Storage` until
    /// [`build_search_index`](Tenant::build_search_index) has finished.
    pub fn search(&self, query: &SearchQuery) -> Result<SearchPage, Error> {
        let wire: wit_search::SearchQuery = wit_search::SearchQuery {
            filter: query.filter.clone().into(),
            sort: query.sort.into(),
            limit: query.limit,
            after: query.after.clone(),
            viewer: query.viewer.clone().map(Into::into),
        };
        self.call(
            Verb::Search,
            |x, s| x.call(s, (&wire,)),
            |a: StoreAnswer<wit_search::SearchPage>| checked_page(store(a)?, query),
        )
    }

    /// How many tasks match `filter` (that `viewer` may see, when given),
    /// from the cursor `after` on. Not `exact`: add the counts of the calls
    /// that follow `next`.
    pub fn count(
        &self,
        filter: &TaskFilter,
        viewer: Option<&Viewer>,
        after: Option<&str>,
    ) -> Result<CountAnswer, Error> {
        let filter: wit_search::TaskFilter = filter.clone().into();
        let viewer: Option<wit_search::Viewer> = viewer.cloned().map(Into::into);
        self.call(
            Verb::Count,
            |x, s| x.call(s, (&filter, viewer.as_ref(), after)),
            |a: StoreAnswer<wit_search::CountAnswer>| {
                let c = CountAnswer::from(store(a)?);
                if c.exact == c.next.is_some() {
                    return Err(malformed(format!(
                        "count answered exact {} with next {:?}",
                        c.exact, c.next
                    )));
                }
                Ok(c)
            },
        )
    }

    /// Gives the next tasks (at most `limit`, 1–10000) of a keyspace laid
    /// out before search their search entries and counts; `built` once none
    /// is left. A host's sweeper calls it until then.
    pub fn build_search_index(&self, limit: u32) -> Result<IndexProgress, Error> {
        self.call(
            Verb::BuildSearchIndex,
            |x, s| x.call(s, (limit,)),
            |a: StoreAnswer<wit_search::IndexProgress>| {
                let p = IndexProgress::from(store(a)?);
                if p.indexed > limit {
                    return Err(malformed(format!(
                        "build-search-index answered {} tasks indexed for a limit of {limit}",
                        p.indexed
                    )));
                }
                Ok(p)
            },
        )
    }

    /// Makes a view (`expected` `None`: `invalid`, naming `name`, if one of
    /// that name exists) or changes one at revision `expected` (`not-found`
    /// if there is none, `stale` at another). Answers it with its new
    /// revision; the `revision` and `at` given are not kept (the component
    /// records the revision it moved to and its call's time).
    pub fn put_view(&self, view: &SavedView, expected: Option<u64>) -> Result<SavedView, Error> {
        let wire: wit_search::SavedView = view.clone().into();
        self.call(
            Verb::PutView,
            |x, s| x.call(s, (&wire, expected)),
            |a: StoreAnswer<wit_search::SavedView>| {
                let put = same_view(store(a)?, &view.name, "put-view")?;
                // 1 when made, one more with each change.
                let revision = expected.map_or(Some(1), |e| e.checked_add(1));
                if Some(put.revision) != revision {
                    return Err(malformed(format!(
                        "put-view of {:?} at {expected:?} answered revision {}",
                        view.name, put.revision
                    )));
                }
                Ok(put)
            },
        )
    }

    /// A view, if one has that name.
    pub fn get_view(&self, name: &str) -> Result<Option<SavedView>, Error> {
        self.call(
            Verb::GetView,
            |x, s| x.call(s, (name,)),
            |a: StoreAnswer<Option<wit_search::SavedView>>| {
                store(a)?
                    .map(|v| same_view(v, name, "get-view"))
                    .transpose()
            },
        )
    }

    /// Views in name order (bytewise), after `after`, at most `limit`
    /// (1–1000).
    pub fn list_views(&self, limit: u32, after: Option<&str>) -> Result<Vec<SavedView>, Error> {
        self.call(
            Verb::ListViews,
            |x, s| x.call(s, (limit, after)),
            |a: StoreAnswer<Vec<wit_search::SavedView>>| {
                let list: Vec<SavedView> = at_most(store(a)?, limit, "list-views")?
                    .into_iter()
                    .map(Into::into)
                    .collect();
                if list.windows(2).any(|w| w[0].name >= w[1].name)
                    || after.is_some_and(|a| list.first().is_some_and(|v| v.name.as_str() <= a))
                {
                    return Err(malformed("list-views answered out of order".to_owned()));
                }
                Ok(list)
            },
        )
    }

    /// Removes a view (only at revision `expected`, when given: else
    /// `stale`); answers whether there was one.
    pub fn delete_view(&self, name: &str, expected: Option<u64>) -> Result<bool, Error> {
        self.call(
            Verb::DeleteView,
            |x, s| x.call(s, (name, expected)),
            |a: StoreAnswer<bool>| store(a),
        )
    }
}
