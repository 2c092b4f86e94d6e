//! What a handler takes from a request: the authorized caller, the path, the
//! query and the JSON body, each failing as a problem that names what was
//! wrong. It must never let a body or query choose the tenant or the scope:
//! those come from the credential alone.

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Request, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use leasehold_host::{Tenant, Verb};
use serde::de::DeserializeOwned;

use crate::auth::{Principal, Scope};
use crate::problem::ApiError;
use crate::routes::{self, Route};
use crate::state::{AppState, budget};

/// What authorization found out about a request, for its handler.
#[derive(Clone)]
struct Authorized {
    principal: Principal,
    /// The `Authorization` header as sent, for what checks the credential
    /// again later (a stream, a long-poll).
    authorization: Option<String>,
    tenant: Tenant,
    route: &'static Route,
    arrived: Instant,
}

/// Authorizes every API request before its handler runs: the bearer
/// credential names the principal, and the route table (the handlers' own
/// declarations) says whether its scope may call the route. Requests that
/// are not API routes (operations, not-found, wrong method) pass through.
pub async fn authorize(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let arrived = Instant::now();
    let path = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
        .unwrap_or_default();
    let Some(route) = routes::find(state.routes, req.method(), &path) else {
        return next.run(req).await;
    };
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    let principal = match state.credentials.current().authenticate(header.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            tracing::info!(reason = %e, "credential refused");
            return ApiError::Unauthorized("a valid bearer credential is required".to_owned())
                .into_response();
        }
    };
    // A credential that names an unusable tenant is a bad credential.
    let tenant = match state.engine.tenant(&principal.tenant) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "credential names an unusable tenant");
            return ApiError::Unauthorized("the credential names an unusable tenant".to_owned())
                .into_response();
        }
    };
    // Only now may the body be read: a stranger's never is.
    crate::drain::settle(&req);
    if !route.allows(principal.scope) {
        return ApiError::forbidden(format!(
            "a {} credential may not call {}",
            principal.scope, route.verb
        ))
        .into_response();
    }
    if let Some(s) = &state.sweeper {
        s.track(tenant.name());
    }
    let authorization = header;
    req.extensions_mut().insert(Authorized {
        principal,
        authorization,
        tenant,
        route,
        arrived,
    });
    next.run(req).await
}

/// The authenticated caller, already allowed to call this route, and the
/// handle on its own tenant.
pub struct Caller {
    pub principal: Principal,
    authorization: Option<String>,
    pub tenant: Tenant,
    route: &'static Route,
    arrived: Instant,
    state: AppState,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let a = parts
            .extensions
            .get::<Authorized>()
            .cloned()
            .ok_or_else(|| {
                ApiError::Internal(
                    format!("{} {} was not authorized", parts.method, parts.uri.path()).into(),
                )
            })?;
        Ok(Caller {
            principal: a.principal,
            authorization: a.authorization,
            tenant: a.tenant,
            route: a.route,
            arrived: a.arrived,
            state: state.clone(),
        })
    }
}

impl Caller {
    /// Runs one engine call of `verb` on the caller's tenant, within the
    /// request's time. A call about one task goes through
    /// `Caller::task` (`crate::access`) instead, which alone can name it.
    pub async fn call<T, F>(&self, verb: Verb, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Tenant) -> Result<T, leasehold_host::Error> + Send + 'static,
    {
        self.state
            .call(verb, self.tenant.clone(), self.deadline(), f)
            .await
    }

    /// The `Authorization` header the caller sent.
    pub fn authorization(&self) -> Option<&str> {
        self.authorization.as_deref()
    }

    /// The request's deadline for its call: its route's verb's time from
    /// when it arrived (a request's time, for an operation of no verb).
    pub fn deadline(&self) -> Instant {
        let options = &self.state.options;
        let time = Verb::named(&self.route.verb)
            .map_or(options.request_timeout, |verb| budget(options, verb));
        self.arrived + time
    }

    /// Runs one engine call with its own deadline (a long-poll's later
    /// tries, each with a request's time of its own).
    pub async fn call_at<T, F>(&self, deadline: Instant, verb: Verb, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Tenant) -> Result<T, leasehold_host::Error> + Send + 'static,
    {
        self.state
            .call(verb, self.tenant.clone(), deadline, f)
            .await
    }

    /// The service's shared state, for what outlives the request (a
    /// stream).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The actor a verb acts as: the caller itself unless an operator names
    /// another. A reviewer naming anyone else is refused.
    pub fn actor(&self, named: Option<String>) -> Result<String, ApiError> {
        match named {
            None => Ok(self.principal.actor.clone()),
            Some(a) if a == self.principal.actor => Ok(a),
            Some(a) if self.principal.scope == Scope::Operator => Ok(a),
            Some(a) => Err(ApiError::ActingAsAnother(format!(
                "this credential acts as {}, not as {a}",
                self.principal.actor
            ))),
        }
    }

    /// The roles a verb acts with: the caller's own unless an operator names
    /// others. A reviewer may name only a subset of its own.
    pub fn roles(&self, named: Option<Vec<String>>) -> Result<Vec<String>, ApiError> {
        match named {
            None => Ok(self.principal.roles.clone()),
            Some(r) if self.principal.scope == Scope::Operator => Ok(r),
            Some(r) if r.iter().all(|x| self.principal.roles.contains(x)) => Ok(r),
            Some(_) => Err(ApiError::ActingAsAnother(
                "a reviewer acts only with its own roles".to_owned(),
            )),
        }
    }

    /// The instant a verb runs at: the service's clock. A given one (for
    /// replay and tests) is taken only from a service or operator
    /// credential, and only when the server allows clock overrides.
    pub fn now(&self, given: Option<i64>) -> Result<i64, ApiError> {
        match given {
            None => Ok(self.state.now_ms()),
            Some(_) if !self.state.options.allow_clock_override => Err(ApiError::forbidden(
                "this server takes the time from its own clock: `now` and `created_at` are \
                 refused unless it runs with --allow-clock-override",
            )),
            Some(t) if self.principal.scope != Scope::Reviewer => Ok(t),
            Some(_) => Err(ApiError::forbidden(
                "only service and operator credentials may give `now`",
            )),
        }
    }

    /// The rules' cursor inside a cursor this server sealed for `list` of
    /// the caller's tenant.
    pub fn open_cursor(
        &self,
        list: &str,
        sealed: Option<String>,
    ) -> Result<Option<String>, ApiError> {
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        self.state
            .cursors
            .open(self.tenant.name(), list, &sealed)
            .map(Some)
            .ok_or_else(|| {
                ApiError::invalid(
                    "after",
                    "the cursor is not one this service gave for this list (pass back `next` \
                     as it came; a cursor from a server with another --cursor-key does not open)",
                )
            })
    }

    /// A page's `next`, sealed for `list` of the caller's tenant.
    pub fn seal_cursor(
        &self,
        list: &str,
        next: Option<String>,
    ) -> Result<Option<String>, ApiError> {
        let Some(next) = next else {
            return Ok(None);
        };
        self.state
            .cursors
            .seal(self.tenant.name(), list, &next)
            .map(Some)
            .ok_or_else(|| ApiError::Internal("could not seal a cursor".into()))
    }
}

/// A path parameter, failing as a problem.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::Invalid {
            field: None,
            detail: r.body_text(),
        }
    }
}

/// The query string, decoded field by field so an error names its field.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        // No parameter of the API may be empty: `?after=` is a mistake, not
        // the first page.
        if let Some((name, _)) = form_urlencoded_parse(query).find(|(_, v)| v.is_empty()) {
            return Err(ApiError::Invalid {
                detail: format!("query parameter {name} is empty"),
                field: Some(name.into_owned()),
            });
        }
        let de = serde_html_form::Deserializer::new(form_urlencoded_parse(query));
        serde_path_to_error::deserialize(de)
            .map(Query)
            .map_err(|e| {
                let field = e.path().to_string();
                ApiError::Invalid {
                    detail: format!("query parameter {field}: {}", e.inner()),
                    field: (field != ".").then_some(field),
                }
            })
    }
}

fn form_urlencoded_parse(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
}

/// A JSON object as the body. An empty body (or `null`) reads as `{}`, so
/// actions whose fields are all optional need none.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let body = Body::read(req, state).await?;
        decode(body.object(NoBody::IsEmpty)?).map(Json)
    }
}

/// The body of an update (a `PATCH`): a JSON object whose fields are
/// `crate::update::Update`s. Unlike [`Json`], no body and a `null` body are
/// refused, not read as `{}`: an update says what it changes.
pub struct UpdateJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for UpdateJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let body = Body::read(req, state).await?;
        decode(body.object(NoBody::Refused)?).map(UpdateJson)
    }
}

/// What a missing or `null` body means to a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NoBody {
    /// `{}`: every field takes its default.
    IsEmpty,
    /// A mistake: the route needs a body.
    Refused,
}

/// A request's body as read, with whether it was declared as JSON.
struct Body {
    bytes: Bytes,
    json: bool,
}

impl Body {
    async fn read(req: Request, state: &AppState) -> Result<Body, ApiError> {
        let declared = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_lowercase()
            });
        let bytes = Bytes::from_request(req, state).await.map_err(|e| match e {
            BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => {
                ApiError::BodyTooLarge {
                    limit: state.options.body_limit,
                }
            }
            BytesRejection::FailedToBufferBody(FailedToBufferBody::UnknownBodyError(e))
                if timed_out(&e) || crate::body_rate::too_slow(&e) =>
            {
                ApiError::BodyTimeout
            }
            other => ApiError::MalformedBody(other.body_text()),
        })?;
        let json = match declared.as_deref() {
            Some("application/json") => true,
            Some(other) => other.ends_with("+json"),
            None => false,
        };
        Ok(Body { bytes, json })
    }

    /// The JSON object the body holds, `{}` for none or `null` when
    /// `no_body` allows it; else why not.
    fn object(&self, no_body: NoBody) -> Result<&[u8], ApiError> {
        let refused = || ApiError::Invalid {
            field: None,
            detail: "an update says what it changes: send a JSON object naming its fields \
                     (null clears a field; a field left out is kept)"
                .to_owned(),
        };
        if self.bytes.is_empty() {
            return match no_body {
                NoBody::IsEmpty => Ok(b"{}"),
                NoBody::Refused => Err(refused()),
            };
        }
        if !self.json {
            return Err(ApiError::UnsupportedMediaType(
                "send the body as Content-Type: application/json".to_owned(),
            ));
        }
        // Every body is one JSON object; `null` is no body at all, as for a
        // route whose body is optional.
        let text = self.bytes.trim_ascii();
        if text == b"null" {
            return match no_body {
                NoBody::IsEmpty => Ok(b"{}"),
                NoBody::Refused => Err(refused()),
            };
        }
        if text.first() != Some(&b'{') {
            return match serde_json::from_slice::<serde::de::IgnoredAny>(&self.bytes) {
                Ok(_) => Err(ApiError::Invalid {
                    field: None,
                    detail: "the body must be a JSON object".to_owned(),
                }),
                Err(e) => Err(ApiError::MalformedBody(format!(
                    "the body is not JSON: {e}"
                ))),
            };
        }
        Ok(&self.bytes)
    }
}

/// Whether a body failed because its time ran out.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(e);
    while let Some(e) = at {
        if e.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        at = e.source();
    }
    false
}

/// Decodes JSON, naming the field at fault.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::MalformedBody(format!("the body is not JSON: {inner}"))
        } else {
            ApiError::Invalid {
                detail: if path == "." {
                    format!("the body: {inner}")
                } else {
                    format!("{path}: {inner}")
                },
                field: (path != ".").then_some(path),
            }
        }
    })?;
    de.end()
        .map_err(|e| ApiError::MalformedBody(format!("the body is not one JSON value: {e}")))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update::Update;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Patch {
        #[serde(default)]
        due_at: Update<i64>,
    }

    fn body(text: &str) -> Body {
        Body {
            bytes: Bytes::from(text.to_owned()),
            json: true,
        }
    }

    fn read(text: &str, no_body: NoBody) -> Result<Patch, ApiError> {
        decode(body(text).object(no_body)?)
    }

    /// An update's body never reads a `null` or missing body as `{}`; an
    /// action's body does, so that one whose fields are all optional needs
    /// none.
    #[test]
    fn an_update_refuses_no_body_where_an_action_reads_it_as_empty() {
        for none in ["", "null", " null\n"] {
            assert!(
                matches!(
                    read(none, NoBody::Refused),
                    Err(ApiError::Invalid { field: None, .. })
                ),
                "{none:?}"
            );
            assert_eq!(
                read(none, NoBody::IsEmpty).expect("as {}").due_at,
                Update::Keep
            );
        }
        assert_eq!(
            read(r#"{"due_at": null}"#, NoBody::Refused)
                .expect("an update")
                .due_at,
            Update::Clear
        );
        assert_eq!(
            read(r#"{"due_at": 7}"#, NoBody::Refused)
                .expect("an update")
                .due_at,
            Update::Set(7)
        );
        assert_eq!(
            read("{}", NoBody::Refused).expect("an update").due_at,
            Update::Keep,
            "an object that names nothing changes nothing, and says so itself"
        );
        for not_object in ["[1]", "7", "\"x\""] {
            assert!(matches!(
                read(not_object, NoBody::Refused),
                Err(ApiError::Invalid { .. })
            ));
        }
    }

    /// Through the extractors themselves, as a route would read a body.
    #[test]
    fn the_extractors_read_a_null_body_as_each_route_needs() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let engine = leasehold_host::Engine::in_memory().expect("a memory engine");
            let state = AppState::new(
                engine,
                crate::auth::LiveCredentials::new(crate::auth::Credentials {
                    tokens: crate::auth::TokenTable::default(),
                    jwt: None,
                }),
                crate::cursor::CursorKey::random().expect("a key"),
                crate::state::Options::default(),
                &[],
            );
            let req = |text: &'static str| {
                axum::http::Request::builder()
                    .method("PATCH")
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(axum::body::Body::from(text))
                    .expect("a request")
            };
            for none in ["", "null"] {
                let update = UpdateJson::<Patch>::from_request(req(none), &state).await;
                assert!(matches!(update, Err(ApiError::Invalid { .. })), "{none:?}");
                let Json(action) = Json::<Patch>::from_request(req(none), &state)
                    .await
                    .expect("an action's body may be left out");
                assert_eq!(action.due_at, Update::Keep);
            }
            let UpdateJson(patch) =
                UpdateJson::<Patch>::from_request(req(r#"{"due_at": null}"#), &state)
                    .await
                    .expect("an update");
            assert_eq!(patch.due_at, Update::Clear);
        });
    }

    #[test]
    fn a_body_not_declared_as_json_is_refused_alike() {
        let b = Body {
            bytes: Bytes::from_static(b"{}"),
            json: false,
        };
        for no_body in [NoBody::IsEmpty, NoBody::Refused] {
            assert!(matches!(
                b.object(no_body),
                Err(ApiError::UnsupportedMediaType(_))
            ));
        }
    }
}
