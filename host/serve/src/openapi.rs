//! The OpenAPI 3.1 document: the handlers' annotations (gathered by the
//! router as it registers them) plus the parts that belong to no one route,
//! the bearer scheme and the problem schema. It must never be written by
//! hand: every path in it comes from a registered handler.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::problem::Problem;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Leasehold",
        description = "Human-task worklist and durable timers. Every request carries a bearer \
                       credential that names its tenant, actor, roles and scope. Errors are \
                       RFC 9457 problem documents with a stable `type`.",
    ),
    // A task's timeline, which its fields reference by name.
    components(schemas(
        Problem,
        crate::timeline::EscalationStep,
        crate::timeline::StepAction,
        crate::timeline::TaskStep,
        crate::change::WebhookPayload
    )),
    modifiers(&BearerScheme),
    tags(
        (name = "tasks", description = "Open, read, claim, change, assign, delegate, note and settle tasks; what an actor holds. A task's revision is its `ETag`; every change takes `If-Match` (the revision the caller was shown) and answers 412 `stale` when the task has changed since"),
        (name = "kinds", description = "Per-kind definitions of the outcomes a decision may have"),
        (name = "queue", description = "A reviewer's queue"),
        (name = "sweeps", description = "Overdue tasks and lapsed leases"),
        (name = "runs", description = "Sealing and withdrawing runs"),
        (name = "timers", description = "Durable timers"),
        (name = "schedules", description = "Recurring schedules (cron or interval, in an IANA time zone) whose occurrences are timers of a run, and the time-zone database they are computed from"),
        (name = "subscriptions", description = "Webhook subscriptions: the tenant's changes pushed to an endpoint, signed in the Standard Webhooks wire format (the `WebhookPayload` schema is the body of each delivery), at least once and in order per task or timer; operators only. A subscription's revision is its `ETag`; a change takes `If-Match`"),
        (name = "search", description = "Finding tasks: a typed filter and a sort, paged by sealed cursors, and counts. A reviewer sees only what it holds or may take; a service or operator sees the tenant"),
        (name = "views", description = "Saved views: a tenant's named, shared searches, read by everyone in the tenant and made, changed and removed by operators. A view's revision is its `ETag`; a change takes `If-Match`"),
        (name = "stats", description = "The tenant's counters"),
        (name = "admin", description = "The consistency check"),
        (name = "changes", description = "A task's history and the tenant's feed of changes"),
        (name = "service", description = "The caller, as its credential names it"),
    )
)]
pub struct ApiDoc;

struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// What the derive cannot say, said in the document after it is
/// assembled, so that it is exactly as strict as the handlers: every path
/// parameter is required (OpenAPI demands it, and the derive does not
/// always say so); `Last-Event-ID` takes only an event's id; the stream
/// is described event by event, a change's data as the `Event` schema a
/// JSON read's entries are; a trim names `before`, `keep` or both, not
/// null (`limit` alone trims nothing); and a schedule's recurrence and
/// catch-up take no field but their variant's.
pub(crate) fn refine(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::{AllOfBuilder, AnyOfBuilder, ObjectBuilder, Schema};
    use utoipa::openapi::{RefOr, Required};
    // Query parameters a route cannot do without: utoipa drops `required`
    // from a parameter whose schema is given by hand (`schema_with`), as it
    // does for path parameters, so the document says so here.
    const REQUIRED_QUERY: [(&str, &str); 2] =
        [("/v1/timers/due", "from"), ("/v1/timers/due", "to")];
    for (path, item) in doc.paths.paths.iter_mut() {
        let ops = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        let params = ops
            .into_iter()
            .flatten()
            .filter_map(|op| op.parameters.as_mut())
            .chain(item.parameters.as_mut())
            .flatten();
        for p in params {
            if p.parameter_in == ParameterIn::Path
                || (p.parameter_in == ParameterIn::Query
                    && REQUIRED_QUERY.contains(&(path.as_str(), p.name.as_str())))
            {
                p.required = Required::True;
            }
            if p.parameter_in == ParameterIn::Header && p.name.eq_ignore_ascii_case("last-event-id")
            {
                p.schema = Some(RefOr::T(Schema::Object(crate::schema::event_id())));
            }
        }
    }
    // The stream's media type is described event by event.
    let stream = doc
        .paths
        .paths
        .get_mut("/v1/events")
        .and_then(|item| item.get.as_mut())
        .and_then(|op| op.responses.responses.get_mut("200"))
        .and_then(|r| match r {
            RefOr::T(r) => r.content.get_mut("text/event-stream"),
            RefOr::Ref(_) => None,
        });
    if let Some(content) = stream {
        content.schema = Some(RefOr::T(Schema::Object(crate::schema::stream_event(
            &<crate::change::Event as utoipa::ToSchema>::name(),
        ))));
    }
    crate::revision::document(doc);
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    // A change names at least one field. (Said here: utoipa's derive
    // writes its `min_properties` as `maxProperties`.)
    for name in ["TaskPatch", "SubscriptionPatch"] {
        if let Some(RefOr::T(Schema::Object(patch))) = components.schemas.get_mut(name) {
            patch.min_properties = Some(1);
            patch.max_properties = None;
        }
    }
    // A variant of a schedule's recurrence or catch-up, or of a job's
    // action, takes no field but its own, as the service reads it
    // (utoipa's derive says so of a struct that denies unknown fields, not
    // of an enum's variants).
    for name in ["Recurrence", "CatchUp", "JobAction"] {
        if let Some(RefOr::T(Schema::OneOf(one))) = components.schemas.get_mut(name) {
            for variant in &mut one.items {
                if let RefOr::T(Schema::Object(o)) = variant {
                    o.additional_properties = Some(Box::new(
                        utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
                    ));
                }
            }
        }
    }
    if let Some(trim) = components.schemas.remove("TrimRequest") {
        // Present and not null: a null says "not given".
        let either = AnyOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .property("before", crate::schema::instant())
                    .required("before"),
            )
            .item(
                ObjectBuilder::new()
                    .property("keep", crate::schema::seq())
                    .required("keep"),
            );
        let strict = AllOfBuilder::new()
            .item(trim)
            .item(either)
            .description(Some(
                "What to trim: `before`, `keep`, or both; `limit` bounds one call's work",
            ));
        components.schemas.insert(
            "TrimRequest".to_owned(),
            RefOr::T(Schema::AllOf(strict.build())),
        );
    }
}
