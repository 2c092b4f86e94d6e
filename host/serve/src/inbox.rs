//! The reviewer's inbox (`/`) and the operator's page (`/operator`): plain
//! HTML, CSS and JavaScript files from `host/serve/assets`, embedded in the
//! binary and served with their assets under `/assets/`. It owns those
//! routes and their headers: a strict Content-Security-Policy (scripts,
//! styles and connections from this origin only, nothing inline, no
//! framing, no form posting anywhere), `nosniff`, and revalidation by ETag.
//! It must never carry, check or read a credential (the pages ask the user
//! for one and call the API like any other client), and never fetch
//! anything at run time.

use std::sync::OnceLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use crate::problem::ApiError;

/// The policy every page and asset is served under. `form-action 'none'`
/// means that a sign-in form can never be submitted as a navigation, so a
/// token can never end up in a URL even if the script failed to load.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; font-src 'none'; \
     object-src 'none'; media-src 'none'; frame-src 'none'; worker-src 'none'; \
     manifest-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file: where it is served, as what, and its ETag.
struct Asset {
    name: &'static str,
    body: &'static [u8],
    mime: &'static str,
    /// Worked out from `body` on first use. Held by the file itself, so
    /// that no lookup by name or address can miss it: a release build may
    /// merge or copy constants, so addresses tell nothing.
    tag: OnceLock<String>,
}

impl Asset {
    const fn new(name: &'static str, body: &'static [u8], mime: &'static str) -> Self {
        Asset {
            name,
            body,
            mime,
            tag: OnceLock::new(),
        }
    }

    fn etag(&self) -> &str {
        self.tag.get_or_init(|| tag_of(self.body))
    }
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// The pages, by path.
static PAGES: [Asset; 2] = [
    Asset::new("/", include_bytes!("../assets/inbox.html"), HTML),
    Asset::new("/operator", include_bytes!("../assets/operator.html"), HTML),
];

/// The files under `/assets/`, by name.
static ASSETS: [Asset; 8] = [
    Asset::new("common.js", include_bytes!("../assets/common.js"), JS),
    Asset::new("inbox.js", include_bytes!("../assets/inbox.js"), JS),
    Asset::new("operator.js", include_bytes!("../assets/operator.js"), JS),
    Asset::new(
        "subscriptions.js",
        include_bytes!("../assets/subscriptions.js"),
        JS,
    ),
    Asset::new("views.js", include_bytes!("../assets/views.js"), JS),
    Asset::new("jobs.js", include_bytes!("../assets/jobs.js"), JS),
    Asset::new("style.css", include_bytes!("../assets/style.css"), CSS),
    Asset::new("icon.svg", include_bytes!("../assets/icon.svg"), SVG),
];

/// A strong ETag for `body`: a quoted prefix of its SHA-256, so a new
/// binary with changed files is never answered from a stale cache, while
/// an unchanged file keeps its tag across builds.
fn tag_of(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// The headers every page and asset carries, also on a 304 or a 404.
fn harden(headers: &mut HeaderMap) {
    let fixed = [
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (
            header::HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        ),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            HeaderValue::from_static("same-origin"),
        ),
        // Cached, but asked about on every use: a new binary's files are
        // picked up at once, and an unchanged file costs a 304.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    for (name, value) in fixed {
        headers.insert(name, value);
    }
}

fn serve(asset: &'static Asset, request: &HeaderMap) -> Response {
    let tag = asset.etag();
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            // If-None-Match compares weakly: `W/"x"` matches `"x"`.
            v.split(',')
                .map(str::trim)
                .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == tag)
        });
    let mut res = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut res = asset.body.into_response();
        res.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.mime));
        res
    };
    let headers = res.headers_mut();
    harden(headers);
    if let Ok(v) = HeaderValue::from_str(tag) {
        headers.insert(header::ETAG, v);
    }
    res
}

fn page(path: &str) -> &'static Asset {
    PAGES.iter().find(|a| a.name == path).unwrap_or(&PAGES[0])
}

async fn asset(Path(name): Path<String>, request: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => serve(a, &request),
        None => {
            let mut res = ApiError::NotFound("no such asset".to_owned()).into_response();
            harden(res.headers_mut());
            res
        }
    }
}

/// The pages' routes. They take no credential: a page is the same for
/// everyone, and asks for a token itself.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|h: HeaderMap| async move { serve(page("/"), &h) }))
        .route(
            "/operator",
            get(|h: HeaderMap| async move { serve(page("/operator"), &h) }),
        )
        .route("/assets/{name}", get(asset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    async fn fetch(method: &str, uri: &str, etag: Option<&str>) -> Response {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(t) = etag {
            req = req.header(header::IF_NONE_MATCH, t);
        }
        router::<()>()
            .oneshot(req.body(Body::empty()).expect("a request"))
            .await
            .expect("an answer")
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(f)
    }

    fn text(a: &Asset) -> &'static str {
        std::str::from_utf8(a.body).expect("UTF-8")
    }

    #[test]
    fn every_page_and_asset_is_served_hardened_with_its_type() {
        block_on(async {
            let all = PAGES.iter().map(|p| (p.name.to_owned(), p.mime)).chain(
                ASSETS
                    .iter()
                    .map(|a| (format!("/assets/{}", a.name), a.mime)),
            );
            for (uri, mime) in all {
                for method in ["GET", "HEAD"] {
                    let res = fetch(method, &uri, None).await;
                    assert_eq!(res.status(), 200, "{method} {uri}");
                    let h = res.headers();
                    assert_eq!(h[header::CONTENT_TYPE], mime, "{uri}");
                    assert_eq!(
                        h[header::CONTENT_SECURITY_POLICY],
                        CONTENT_SECURITY_POLICY,
                        "{uri}"
                    );
                    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{uri}");
                    assert_eq!(h[header::CACHE_CONTROL], "no-cache", "{uri}");
                    assert!(h.contains_key(header::ETAG), "{uri}");
                }
            }
        });
    }

    #[test]
    fn the_policy_allows_nothing_inline_and_no_other_origin() {
        let csp = CONTENT_SECURITY_POLICY;
        assert!(!csp.contains("unsafe"), "{csp}");
        assert!(!csp.contains("http"), "{csp}");
        assert!(!csp.contains("data:"), "{csp}");
        assert!(!csp.contains('*'), "{csp}");
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "frame-ancestors 'none'",
            "form-action 'none'",
        ] {
            assert!(csp.contains(directive), "{directive}");
        }
    }

    #[test]
    fn an_unchanged_file_is_answered_304_and_a_changed_one_200() {
        block_on(async {
            let first = fetch("GET", "/assets/inbox.js", None).await;
            let tag = first.headers()[header::ETAG]
                .to_str()
                .expect("text")
                .to_owned();
            let again = fetch("GET", "/assets/inbox.js", Some(&tag)).await;
            assert_eq!(again.status(), 304);
            assert_eq!(
                again.headers()[header::CONTENT_SECURITY_POLICY],
                CONTENT_SECURITY_POLICY
            );
            let other = fetch("GET", "/assets/inbox.js", Some("\"0000\"")).await;
            assert_eq!(other.status(), 200);
            let page_tag = fetch("GET", "/", None).await.headers()[header::ETAG].clone();
            assert_ne!(page_tag, tag, "each file has its own tag");
        });
    }

    #[test]
    fn a_tag_is_a_quoted_strong_hash_of_the_contents() {
        let a = tag_of(b"one");
        assert_eq!(a, tag_of(b"one"), "the same contents, the same tag");
        assert_ne!(a, tag_of(b"two"));
        assert_ne!(a, tag_of(b""));
        assert!(!a.starts_with("W/"), "{a}");
        let inner = a
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .expect("quoted");
        assert_eq!(inner.len(), 24, "{a}");
        assert!(inner.bytes().all(|b| b.is_ascii_hexdigit()), "{a}");
    }

    /// Every file's tag is its own contents' (so no two differing files
    /// share one, and none is empty), in whatever profile this is built.
    #[test]
    fn every_file_is_tagged_by_its_contents() {
        let files: Vec<&Asset> = PAGES.iter().chain(&ASSETS).collect();
        for (i, a) in files.iter().enumerate() {
            assert_eq!(a.etag(), tag_of(a.body), "{}", a.name);
            assert!(a.etag().len() > 2, "{}", a.name);
            for b in &files[..i] {
                if a.body != b.body {
                    assert_ne!(a.etag(), b.etag(), "{} and {}", a.name, b.name);
                }
            }
        }
    }

    #[test]
    fn only_the_files_own_tag_is_answered_304() {
        block_on(async {
            let tag = fetch("GET", "/assets/style.css", None).await.headers()[header::ETAG]
                .to_str()
                .expect("text")
                .to_owned();
            for (given, status) in [
                ("\"\"", 200),
                ("\"0\"", 200),
                ("", 200),
                (tag.as_str(), 304),
                (format!("W/{tag}").as_str(), 304),
                (format!("\"0\", {tag}").as_str(), 304),
            ] {
                let res = fetch("GET", "/assets/style.css", Some(given)).await;
                assert_eq!(res.status(), status, "If-None-Match: {given}");
            }
        });
    }

    #[test]
    fn an_unknown_asset_is_a_hardened_404() {
        block_on(async {
            for uri in ["/assets/nope.js", "/assets/..%2Fcommon.js", "/assets/"] {
                let res = fetch("GET", uri, None).await;
                assert_eq!(res.status(), 404, "{uri}");
                if uri != "/assets/" {
                    assert_eq!(
                        res.headers()[header::CONTENT_SECURITY_POLICY],
                        CONTENT_SECURITY_POLICY
                    );
                }
            }
        });
    }

    /// The policy forbids inline script and style; a page that used them
    /// would break in the browser, so the files are held to it here too.
    #[test]
    fn pages_hold_no_inline_script_or_style_and_name_only_served_assets() {
        for p in &PAGES {
            let html = text(p);
            let lower = html.to_ascii_lowercase();
            assert!(!lower.contains("<style"), "{}: a <style> element", p.name);
            assert!(!lower.contains(" style="), "{}: a style attribute", p.name);
            assert!(!lower.contains("javascript:"), "{}", p.name);
            for attr in [
                " onclick=",
                " onload=",
                " onerror=",
                " onsubmit=",
                " oninput=",
            ] {
                assert!(!lower.contains(attr), "{}: an inline handler", p.name);
            }
            for (i, _) in lower.match_indices("<script") {
                let tag = &lower[i..i + lower[i..].find('>').expect("a closed tag")];
                assert!(tag.contains(" src=\"/assets/"), "{}: {tag}", p.name);
            }
            for (i, _) in html.match_indices("/assets/") {
                let rest = &html[i + "/assets/".len()..];
                let name = &rest[..rest.find('"').expect("a quoted path")];
                assert!(
                    ASSETS.iter().any(|a| a.name == name),
                    "{} names /assets/{name}, which is not served",
                    p.name
                );
            }
            assert!(
                !lower.contains("http://") && !lower.contains("https://"),
                "{}",
                p.name
            );
        }
    }

    /// The scripts never put anything in a URL but a task id, and never
    /// render text as HTML.
    #[test]
    fn scripts_never_write_html_from_strings() {
        for a in ASSETS.iter().filter(|a| a.mime == JS) {
            let js = text(a);
            for bad in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
                "localStorage",
            ] {
                assert!(!js.contains(bad), "{} uses {bad}", a.name);
            }
        }
    }
}
