//! Reading the tenant's feed for one caller: which entries it is given,
//! as which [`Event`](crate::change::Event) and at which position, and how
//! a page of a JSON read is cut. A service or operator is given every
//! change at the feed's own position. A reviewer is given only changes of
//! tasks it may see (`crate::access`), each at the view its reading stands
//! at once it has it (`crate::reviewer_view`), so its reading moves only
//! with what it is given; its JSON pages read on past others' changes
//! until one more of its own shows the page is not the last, the feed's
//! end is reached, or a few pages were read (then its `next` holds how far
//! it read). The event stream (`crate::sse`) takes the same
//! [`Reading::offer`] for each entry it reads.
//!
//! It owns the per-caller step over the feed and the cut of a JSON page;
//! it must never give a reviewer a change it may not see, a position of
//! the feed, or anything (an entry, a `next`, a `head`) that differs with
//! changes it may not see.

use std::time::Instant;

use leasehold_guest::changes::Cursor;
use leasehold_guest::schema::MAX_SHARDS;
use leasehold_host::{self as host, FeedRead, Verb};

use crate::access::may_see_change;
use crate::caller_positions::Positions;
use crate::change::Event;
use crate::extract::Caller;
use crate::problem::ApiError;
use crate::reviewer_view::{View, parse, slot_between};
use crate::shared_reads::PAGE;
use crate::state::AppState;

/// Pages of the feed one reviewer's JSON read goes through at most, looking
/// for changes it may see: few, so that a read costs about the same
/// whatever lies hidden behind its position. A read that reaches the bound
/// answers how far it went, and reading on from its `next` goes further.
const REVIEWER_PAGES: usize = 4;

/// One read of the feed, within the service's time for a request.
pub async fn read(
    state: &AppState,
    tenant: &host::Tenant,
    after: Option<String>,
    limit: u32,
) -> Result<FeedRead, ApiError> {
    let deadline = Instant::now() + state.options.request_timeout;
    state
        .call(Verb::Feed, tenant.clone(), deadline, move |x| {
            x.feed(after.as_deref(), limit)
        })
        .await
}

/// The feed's head: where a stream without a position starts.
pub async fn head(state: &AppState, tenant: &host::Tenant) -> Result<String, ApiError> {
    let read = read(state, tenant, None, 1).await?;
    Ok(match read {
        FeedRead::Page(p) => p.head,
        FeedRead::Gone(head) => head,
    })
}

/// Where the feed's oldest kept entry begins: the position a reading
/// without one starts from. The feed says it outright only when it is
/// empty; else the first entry's slot is the one whose number, one lower,
/// still reads that entry first (any other slot, one lower, is behind
/// what is kept).
pub async fn floor(state: &AppState, tenant: &host::Tenant) -> Result<Cursor, ApiError> {
    let first = read(state, tenant, None, 1).await?;
    let page = match first {
        FeedRead::Page(p) => p,
        FeedRead::Gone(_) => {
            return Err(ApiError::Internal(
                "the feed answered gone to a read from its start".into(),
            ));
        }
    };
    let Some(entry) = page.entries.first() else {
        return parse(&page.next);
    };
    let after = parse(&entry.position)?;
    for s in (0..MAX_SHARDS).filter(|&s| after.get(s) > 0) {
        let mut seqs = after.seqs();
        seqs[usize::from(s)] -= 1;
        let Some(before) = Cursor::from_seqs(seqs) else {
            continue;
        };
        let probe = read(state, tenant, Some(before.encode()), 1).await?;
        if let FeedRead::Page(p) = probe
            && p.entries.first().map(|e| &e.position) == Some(&entry.position)
        {
            return Ok(before);
        }
    }
    Err(ApiError::Unavailable {
        kind: "busy",
        detail: "the feed was trimmed while a reading found its start: read again".into(),
    })
}

/// Where a reading resumes that its caller asked to resume after a
/// position it was given.
pub struct Resume {
    /// The feed's position it reads after; `None` when the changes after a
    /// reviewer's view are no longer kept (a mark's entry was trimmed).
    pub after: Option<Cursor>,
    /// A reviewer's view, as given.
    pub view: Option<View>,
}

/// Where a reading resumes after `given`, a position `positions`' caller
/// was given (`field` names where it came from): the feed's own position
/// for a service or operator, checked for its shape; the position a
/// reviewer's view stands for, found through `entry-place`.
pub async fn resume(
    state: &AppState,
    tenant: &host::Tenant,
    positions: &Positions,
    field: &str,
    given: &str,
) -> Result<Resume, ApiError> {
    if !positions.viewer() {
        return Ok(Resume {
            after: Some(parse(&positions.take(field, given)?)?),
            view: None,
        });
    }
    let view = positions.take_view(field, given)?;
    Ok(Resume {
        after: crate::reviewer_view::resolve(state, tenant, &view).await?,
        view: Some(view),
    })
}

/// Whether `change` is of `run` (every change, when no run is asked for):
/// a task's change of one of its tasks, or a change of one of its timers.
/// A task change an older build recorded names no run and is of none.
pub fn of_run(run: Option<&str>, change: &host::Change) -> bool {
    let Some(run) = run else {
        return true;
    };
    match change {
        host::Change::Task(t) => t.run.as_deref() == Some(run),
        host::Change::Timer(t) => t.run == run,
    }
}

/// One caller's reading of the feed: its positions, and a reviewer's view.
pub struct Reading {
    positions: Positions,
    /// A reviewer's view, which stands for where it has read to; none for
    /// a service or operator, who is shown the feed's positions.
    view: Option<View>,
    /// Only the changes of this run, when one is asked for.
    run: Option<String>,
}

/// An entry a caller may see, as it is given: the event, and the view its
/// reading moves to once it is given.
pub struct Offer {
    event: Event,
    view: Option<View>,
}

impl Offer {
    /// The event, as the caller is given it.
    pub fn event(&self) -> &Event {
        &self.event
    }
}

impl Reading {
    /// A service's or operator's reading (`view` none), or a reviewer's
    /// from `view`.
    pub fn new(positions: Positions, view: Option<View>) -> Self {
        Reading {
            positions,
            view,
            run: None,
        }
    }

    /// This reading, given only the changes of `run` (all, for `None`).
    pub fn of_run(mut self, run: Option<String>) -> Self {
        self.run = run;
        self
    }

    /// A reviewer's view, where it stands.
    pub fn view(&self) -> Option<&View> {
        self.view.as_ref()
    }

    /// A reviewer's reading begins again at `at`, the feed's head (its old
    /// view's changes are gone).
    pub fn restart_at(&mut self, at: &Cursor) {
        if self.view.is_some() {
            self.view = Some(View::starting(at, true));
        }
    }

    /// `entry`, read after the feed's position `before`, as this caller is
    /// given it; `None` when it may not see it. The reading moves only when
    /// the offer is [`give`](Self::give)n.
    pub fn offer(
        &self,
        before: &Cursor,
        entry: &host::FeedEntry,
    ) -> Result<Option<Offer>, ApiError> {
        if !may_see_change(self.positions.principal(), &entry.change)
            || !of_run(self.run.as_deref(), &entry.change)
        {
            return Ok(None);
        }
        let Some(view) = &self.view else {
            let shown = self.positions.show(&entry.position)?;
            return Ok(Some(Offer {
                event: Event::shown(entry, shown),
                view: None,
            }));
        };
        let host::Change::Task(t) = &entry.change else {
            return Err(ApiError::Internal(
                "a reviewer was about to be given a timer's change".into(),
            ));
        };
        let after = parse(&entry.position)?;
        let slot = slot_between(before, &after).ok_or_else(|| {
            ApiError::Internal("the feed moved more than one slot for one entry".into())
        })?;
        let mut view = view.clone();
        view.seen(slot, &t.id, t.entry.seq, after);
        Ok(Some(Offer {
            event: Event::shown(entry, self.positions.show_view(&view)?),
            view: Some(view),
        }))
    }

    /// Records that `offer` was given; answers its event.
    pub fn give(&mut self, offer: Offer) -> Event {
        if offer.view.is_some() {
            self.view = offer.view;
        }
        offer.event
    }

    /// Where a reader resumes, as this caller is shown it: its view, or
    /// (for a service or operator) `feed_position`.
    pub fn shown(&self, feed_position: &str) -> Result<String, ApiError> {
        match &self.view {
            Some(v) => self.positions.show_view(v),
            None => self.positions.show(feed_position),
        }
    }
}

/// One page of a JSON read of the feed, as its caller is shown it.
pub struct Page {
    pub entries: Vec<Event>,
    pub next: String,
    pub head: String,
    /// The changes after `after` are no longer kept.
    pub gone: bool,
}

/// One page of the feed for `c`, after `after` (a position it was given),
/// of at most `limit` changes it may see, only those of `run` when one is
/// asked for (then a service's or operator's page may hold fewer, or
/// none, and read on from `next`).
pub async fn page(
    c: &Caller,
    after: Option<String>,
    limit: u32,
    run: Option<String>,
) -> Result<Page, ApiError> {
    let positions = Positions::new(&c.state().cursors, &c.principal);
    if !positions.viewer() {
        let after = match after {
            Some(a) => Some(positions.take("after", &a)?),
            None => None,
        };
        let read = c
            .call(Verb::Feed, move |x| x.feed(after.as_deref(), limit))
            .await?;
        return Ok(match read {
            FeedRead::Page(p) => Page {
                entries: p
                    .entries
                    .into_iter()
                    .filter(|e| of_run(run.as_deref(), &e.change))
                    .map(Into::into)
                    .collect(),
                next: p.next,
                head: p.head,
                gone: false,
            },
            FeedRead::Gone(head) => Page {
                entries: Vec::new(),
                next: head.clone(),
                head,
                gone: true,
            },
        });
    }
    reviewer_page(c, positions, after, limit, run).await
}

/// A reviewer's page: read on past changes it may not see until one more
/// of its own shows the page is not the last, or the feed's end is reached,
/// so that neither the entries, `next` nor `head` say anything of others'
/// changes: the view moves only with what it is given.
async fn reviewer_page(
    c: &Caller,
    positions: Positions,
    after: Option<String>,
    limit: u32,
    run: Option<String>,
) -> Result<Page, ApiError> {
    // A reviewer's pages are read here, so its `limit` is checked here,
    // by the rule the verb applies.
    if !(1..=leasehold_guest::validate::MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            format!(
                "limit must be between 1 and {}",
                leasehold_guest::validate::MAX_LIMIT
            ),
        ));
    }
    let state = c.state();
    let gone = |positions: &Positions, head: &str| -> Result<Page, ApiError> {
        let view = View::starting(&parse(head)?, true);
        let shown = positions.show_view(&view)?;
        Ok(Page {
            entries: Vec::new(),
            next: shown.clone(),
            head: shown,
            gone: true,
        })
    };
    let (view, mut at) = match after {
        Some(a) => match resume(state, &c.tenant, &positions, "after", &a).await? {
            Resume {
                after: Some(at),
                view: Some(view),
            } => (view, at),
            _ => return gone(&positions, &head(state, &c.tenant).await?),
        },
        None => {
            let at = floor(state, &c.tenant).await?;
            (View::starting(&at, false), at)
        }
    };
    let mut reading = Reading::new(positions, Some(view)).of_run(run);
    let mut entries = Vec::new();
    let mut more = false;
    let mut ended = false;
    'pages: for _ in 0..REVIEWER_PAGES {
        let from = at.encode();
        let read = c
            .call(Verb::Feed, move |x| x.feed(Some(&from), PAGE))
            .await?;
        let p = match read {
            FeedRead::Page(p) => p,
            FeedRead::Gone(head) => return gone(&reading.positions, &head),
        };
        for e in &p.entries {
            if let Some(offer) = reading.offer(&at, e)? {
                if entries.len() as u32 >= limit {
                    more = true;
                    break 'pages;
                }
                entries.push(reading.give(offer));
            }
            at = parse(&e.position)?;
        }
        at = parse(&p.next)?;
        if p.next == p.head {
            ended = true;
            break;
        }
    }
    let mut view = reading.view.take().unwrap_or_default();
    // Read to the end, `head` is `next`; with more to read, another
    // spelling of the same view. A read that stopped at its budget holds
    // how far it went, so that reading on goes further.
    if !more && !ended {
        view = view.reached(at);
    }
    let next = reading.positions.show_view(&view)?;
    let head = if ended {
        next.clone()
    } else {
        reading.positions.show_view(&view.ahead())?
    };
    Ok(Page {
        entries,
        next,
        head,
        gone: false,
    })
}
