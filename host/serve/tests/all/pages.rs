//! The inbox's pages and assets over real HTTP: each is tagged by its own
//! contents, whatever profile the server was built in, and revalidates
//! only against that tag.

use crate::harness::{Service, stores, test_options};

const FILES: &[&str] = &[
    "/",
    "/operator",
    "/assets/common.js",
    "/assets/inbox.js",
    "/assets/operator.js",
    "/assets/subscriptions.js",
    "/assets/views.js",
    "/assets/jobs.js",
    "/assets/style.css",
    "/assets/icon.svg",
];

fn get(svc: &Service, path: &str, if_none_match: Option<&str>) -> reqwest::blocking::Response {
    let mut req = svc.client.get(svc.url(path));
    if let Some(tag) = if_none_match {
        req = req.header("if-none-match", tag);
    }
    req.send().expect("the server answers")
}

#[test]
fn every_file_has_a_strong_tag_of_its_own_and_revalidates_only_against_it() {
    let svc = Service::start(stores().remove(0), test_options());
    let mut seen: Vec<(&str, String, Vec<u8>)> = Vec::new();
    for path in FILES {
        let res = get(&svc, path, None);
        assert_eq!(res.status(), 200, "{path}");
        let tag = res.headers()["etag"].to_str().expect("text").to_owned();
        let body = res.bytes().expect("a body").to_vec();
        let inner = tag
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{path}: a strong, quoted tag: {tag:?}"));
        assert!(!inner.is_empty(), "{path}: an empty tag");
        for (other, other_tag, other_body) in &seen {
            if *other_body != body {
                assert_ne!(&tag, other_tag, "{path} and {other} differ but share a tag");
            }
        }
        for wrong in ["\"\"", "\"0\"", "*-not-a-tag", ""] {
            assert_eq!(
                get(&svc, path, Some(wrong)).status(),
                200,
                "{path} with If-None-Match: {wrong:?}"
            );
        }
        let again = get(&svc, path, Some(&tag));
        assert_eq!(again.status(), 304, "{path} with its own tag");
        assert_eq!(again.headers()["etag"], tag.as_str(), "{path}");
        seen.push((path, tag, body));
    }
}
