//! A real server on loopback over a real store, the credentials the tests
//! use, a blocking HTTP client, and the checks every test shares: that an
//! answer matches the OpenAPI document, and what the store holds.
//!
//! Each test body runs once per backend: always on a redb file, and on a
//! fresh PostgreSQL schema when `LEASEHOLD_TEST_PG` names a database (as
//! tests/run arranges; with `LEASEHOLD_REQUIRE_PG` a missing one fails).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use leasehold_host::EngineBuilder;
use leasehold_serve::{
    ClaimNames, Config, Credentials, JwtConfig, JwtVerifier, Options, Principal, Scope, Server,
    TokenTable, new_token,
};
use leasehold_tests::pg::Schema;
use reqwest::blocking::Client;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

pub const ISSUER: &str = "https://idp.test";
pub const AUDIENCE: &str = "leasehold";

/// Where a test's data lives.
pub enum Store {
    Redb {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres(Schema),
}

impl Store {
    pub fn db(&self) -> String {
        match self {
            Store::Redb { path, .. } => path.to_string_lossy().into_owned(),
            Store::Postgres(s) => s.url.clone(),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Store::Redb { .. } => "redb",
            Store::Postgres(_) => "postgres",
        }
    }

    /// Every stored key and value of every tenant. On redb no server may
    /// have the file open.
    pub fn raw(&self) -> Raw {
        match self {
            Store::Redb { path, .. } => leasehold_tests::raw_contents(path)
                .into_iter()
                .map(|(k, v)| {
                    let len = usize::from(k[0]);
                    let tenant = String::from_utf8_lossy(&k[1..=len]).into_owned();
                    ((tenant, k[len + 1..].to_vec()), v)
                })
                .collect(),
            Store::Postgres(schema) => schema
                .client()
                .query("SELECT tenant, key, value FROM leasehold_kv", &[])
                .expect("raw read")
                .iter()
                .map(|r| ((r.get(0), r.get(1)), r.get(2)))
                .collect(),
        }
    }
}

pub fn redb_store() -> Store {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("serve.redb");
    Store::Redb { _dir: dir, path }
}

/// The stores each test runs on.
pub fn stores() -> Vec<Store> {
    let mut all = vec![redb_store()];
    if let Some(schema) = Schema::fresh() {
        all.push(Store::Postgres(schema));
    }
    all
}

/// The options the tests' servers run with: the defaults, with clock
/// overrides allowed so that tests can replay time (the tests of the switch
/// itself turn it off).
/// The server's sweeper is off: tests give tasks due times long past and
/// look at them as they were opened. The tests of keeping time turn it on.
pub fn test_options() -> Options {
    Options {
        allow_clock_override: true,
        sweep: false,
        admin_tenant: Some(leasehold_serve::backup::TenantName::new("acme").expect("a tenant")),
        ..Options::default()
    }
}

/// Runs `body` once on each backend, on a fresh store and server.
pub fn each_backend(body: impl Fn(&mut Service)) {
    each_backend_with(test_options(), body);
}

/// [`each_backend`], with the server's options.
pub fn each_backend_with(options: Options, body: impl Fn(&mut Service)) {
    for store in stores() {
        eprintln!("-- on {}", store.name());
        let mut svc = Service::start(store, options.clone());
        body(&mut svc);
    }
}

/// The signing keys the identity provider of the tests holds.
pub struct Idp {
    pub rsa_private: Vec<u8>,
    pub ec_private: Vec<u8>,
    /// Both public keys as a JWKS document.
    pub jwks_path: PathBuf,
    _dir: tempfile::TempDir,
}

fn openssl(args: &[&str]) -> Vec<u8> {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Keys made once per test process with the openssl command.
pub fn idp() -> &'static Idp {
    static IDP: OnceLock<Idp> = OnceLock::new();
    IDP.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let rsa = dir.path().join("rsa.pem");
        let ec = dir.path().join("ec.pem");
        let rsa_s = rsa.to_string_lossy().into_owned();
        let ec_s = ec.to_string_lossy().into_owned();
        openssl(&[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            &rsa_s,
        ]);
        openssl(&[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &ec_s,
        ]);
        // The public halves as a JWKS: n and e of the RSA key, x and y of
        // the P-256 point, base64url without padding.
        let modulus = String::from_utf8(openssl(&["rsa", "-in", &rsa_s, "-noout", "-modulus"]))
            .expect("text");
        let n_hex = modulus.trim().trim_start_matches("Modulus=");
        let ec_der = openssl(&["pkey", "-in", &ec_s, "-pubout", "-outform", "DER"]);
        // An uncompressed P-256 point is the last 65 bytes: 0x04 ‖ x ‖ y.
        let point = &ec_der[ec_der.len() - 65..];
        assert_eq!(point[0], 4, "an uncompressed point");
        let jwks = json!({ "keys": [
            { "kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256",
              "n": b64url(&from_hex(n_hex)), "e": "AQAB" },
            { "kty": "EC", "kid": "ec-1", "use": "sig", "alg": "ES256", "crv": "P-256",
              "x": b64url(&point[1..33]), "y": b64url(&point[33..]) },
        ]});
        let jwks_path = dir.path().join("jwks.json");
        std::fs::write(&jwks_path, jwks.to_string()).expect("write jwks");
        Idp {
            rsa_private: std::fs::read(&rsa).expect("rsa key"),
            ec_private: std::fs::read(&ec).expect("ec key"),
            jwks_path,
            _dir: dir,
        }
    })
}

fn from_hex(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
        .collect()
}

fn b64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// A JWT signed by the tests' identity provider.
pub fn jwt(alg: &str, claims: &Value) -> String {
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    let idp = idp();
    let (algorithm, key, kid) = match alg {
        "RS256" => (
            Algorithm::RS256,
            EncodingKey::from_rsa_pem(&idp.rsa_private).expect("rsa key"),
            "rsa-1",
        ),
        "ES256" => (
            Algorithm::ES256,
            EncodingKey::from_ec_pem(&idp.ec_private).expect("ec key"),
            "ec-1",
        ),
        other => panic!("no key for {other}"),
    };
    let mut header = Header::new(algorithm);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &key).expect("signs")
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Standard claims for `tenant`/`actor`, valid for an hour.
pub fn claims(tenant: &str, actor: &str, scope: &str, roles: &[&str]) -> Value {
    json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": actor, "tenant": tenant,
        "scope": scope, "roles": roles,
        "iat": unix_now(), "nbf": unix_now() - 10, "exp": unix_now() + 3600,
    })
}

/// One answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    pub fn problem_type(&self) -> &str {
        self.body["type"]
            .as_str()
            .and_then(|t| t.strip_prefix(leasehold_serve::TYPE_PREFIX))
            .unwrap_or("")
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// Asserts a problem answer of this status and type.
    #[track_caller]
    pub fn expect_problem(&self, status: u16, kind: &str) -> &Self {
        assert_eq!(self.status, status, "{self:#?}");
        assert_eq!(self.content_type(), "application/problem+json", "{self:#?}");
        assert_eq!(self.problem_type(), kind, "{self:#?}");
        assert_eq!(self.body["status"], status, "{self:#?}");
        assert!(self.body["detail"].is_string(), "{self:#?}");
        self
    }

    #[track_caller]
    pub fn expect_ok(&self) -> &Value {
        assert!((200..300).contains(&self.status), "{self:#?}");
        &self.body
    }
}

/// The tokens every service of the tests accepts.
pub struct Tokens {
    pub by_name: BTreeMap<&'static str, String>,
}

impl Tokens {
    pub fn get(&self, name: &str) -> &str {
        self.by_name
            .get(name)
            .unwrap_or_else(|| panic!("no token {name}"))
    }
}

/// Who the test tokens are: name, tenant, actor, scope, roles.
pub const PEOPLE: &[(&str, &str, &str, Scope, &[&str])] = &[
    ("olga", "acme", "olga", Scope::Operator, &["finance"]),
    ("sam", "acme", "sam", Scope::Service, &[]),
    ("alice", "acme", "alice", Scope::Reviewer, &["finance"]),
    ("bob", "acme", "bob", Scope::Reviewer, &["finance"]),
    ("carol", "acme", "carol", Scope::Reviewer, &["legal"]),
    ("gina", "globex", "gina", Scope::Operator, &["finance"]),
    ("gus", "globex", "gus", Scope::Reviewer, &["finance"]),
];

pub fn tokens() -> (Tokens, TokenTable) {
    let mut table = TokenTable::default();
    let mut by_name = BTreeMap::new();
    for (name, tenant, actor, scope, roles) in PEOPLE {
        let token = new_token().expect("random");
        table.insert(
            &token,
            Principal {
                tenant: (*tenant).to_owned(),
                actor: (*actor).to_owned(),
                roles: roles.iter().map(|r| (*r).to_owned()).collect(),
                scope: *scope,
            },
        );
        by_name.insert(*name, token);
    }
    (Tokens { by_name }, table)
}

/// Every stored key (tenant, guest key) and its value.
pub type Raw = BTreeMap<(String, Vec<u8>), Vec<u8>>;

/// The check answers of each tenant, and the raw keyspace.
pub type Snapshot = (Vec<Value>, Raw);

/// A second server over a [`Service`]'s store.
pub struct Twin {
    pub url: String,
    _server: Server,
}

/// A server on loopback over `store`, and a client for it.
pub struct Service {
    pub store: Store,
    pub tokens: Tokens,
    table: TokenTable,
    options: Options,
    builder: EngineBuilder,
    /// The key page cursors and positions are sealed under; a fresh random
    /// one each start when none.
    key: Option<[u8; 32]>,
    server: Option<Server>,
    base: String,
    ops: Option<String>,
    pub client: Client,
    openapi: Value,
}

impl Service {
    pub fn start(store: Store, options: Options) -> Service {
        Service::start_with(store, options, leasehold_host::Engine::builder())
    }

    /// A server whose engine `builder` makes (another component, other
    /// limits).
    pub fn start_with(store: Store, options: Options, builder: EngineBuilder) -> Service {
        leasehold_tests::keep_compiled();
        Service::start_keyed(store, options, builder, None)
    }

    /// [`start_with`](Self::start_with), sealing under `key` (two servers
    /// with one key, as behind a balancer).
    pub fn start_keyed(
        store: Store,
        options: Options,
        builder: EngineBuilder,
        key: Option<[u8; 32]>,
    ) -> Service {
        let (tokens, table) = tokens();
        let client = Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        let mut svc = Service {
            store,
            tokens,
            table,
            options,
            builder,
            key,
            server: None,
            base: String::new(),
            ops: None,
            client,
            openapi: Value::Null,
        };
        svc.restart();
        svc.openapi = svc.call("GET", "/v1/openapi.json", None, None).body;
        svc
    }

    /// Starts the server again (after [`stop`](Self::stop)), on a new port.
    pub fn restart(&mut self) {
        assert!(self.server.is_none(), "already running");
        let jwt = JwtVerifier::load(
            &idp().jwks_path,
            JwtConfig {
                issuer: ISSUER.to_owned(),
                audience: AUDIENCE.to_owned(),
                claims: ClaimNames::default(),
            },
        )
        .expect("the JWKS loads");
        let server = Server::start(Config {
            db: self.store.db(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            credentials: Credentials {
                tokens: self.table.clone(),
                jwt: Some(jwt),
            },
            options: self.options.clone(),
            engine: self.builder.clone(),
            tls: None,
            reload: None,
            cursor_key: self.key.map(leasehold_serve::CursorKey::from_bytes),
            handle_signals: false,
        })
        .expect("the server starts");
        self.base = format!("http://{}", server.addr());
        self.ops = server.ops_addr().map(|a| format!("http://{a}"));
        self.server = Some(server);
    }

    /// Runs the server with `options` from its next [`restart`](Self::restart).
    pub fn set_options(&mut self, options: Options) {
        self.options = options;
    }

    /// A second server over the same store, with the same credentials and
    /// options (PostgreSQL: two hosts on one database).
    pub fn twin(&self) -> Twin {
        let server = Server::start(Config {
            db: self.store.db(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            credentials: Credentials {
                tokens: self.table.clone(),
                jwt: None,
            },
            options: self.options.clone(),
            engine: self.builder.clone(),
            tls: None,
            reload: None,
            cursor_key: self.key.map(leasehold_serve::CursorKey::from_bytes),
            handle_signals: false,
        })
        .expect("the second server starts");
        Twin {
            url: format!("http://{}", server.addr()),
            _server: server,
        }
    }

    /// Stops the server: requests in flight finish, the store closes.
    pub fn stop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().expect("the server stops cleanly");
        }
    }

    /// The operations listener's base URL, when the options ask for one.
    pub fn ops_url(&self) -> Option<&str> {
        self.ops.as_deref()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// One request with an optional bearer token (by name in [`PEOPLE`], or
    /// raw when it is not a name) and JSON body.
    pub fn call(&self, method: &str, path: &str, who: Option<&str>, body: Option<Value>) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.client.request(method, self.url(path));
        if let Some(who) = who {
            let token = self
                .tokens
                .by_name
                .get(who)
                .map_or(who.to_owned(), Clone::clone);
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        reply(req.send().expect("the server answers"))
    }

    /// A request with a raw body and content type.
    pub fn raw_call(
        &self,
        method: &str,
        path: &str,
        who: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let req = self
            .client
            .request(method, self.url(path))
            .bearer_auth(self.tokens.get(who))
            .header("content-type", content_type)
            .body(body);
        reply(req.send().expect("the server answers"))
    }

    /// The served OpenAPI document.
    pub fn openapi(&self) -> &Value {
        &self.openapi
    }

    /// Asserts `reply` is what the OpenAPI document says `method path` (a
    /// route template) may answer: a declared status (or `default`), the
    /// declared content type, and a body its schema admits.
    #[track_caller]
    pub fn conforms(&self, method: &str, template: &str, reply: &Reply) {
        let op = &self.openapi["paths"][template][method.to_ascii_lowercase()];
        assert!(
            op.is_object(),
            "{method} {template} is not in the OpenAPI document"
        );
        let responses = &op["responses"];
        let declared = &responses[reply.status.to_string()];
        let response = if declared.is_object() {
            declared
        } else {
            &responses["default"]
        };
        assert!(
            response.is_object(),
            "{method} {template} answered {} which the document does not declare",
            reply.status
        );
        let content = &response["content"];
        if content.is_null() {
            assert!(
                reply.text.is_empty(),
                "{method} {template}: undeclared body {}",
                reply.text
            );
            return;
        }
        let ct = reply.content_type();
        let media = &content[ct];
        assert!(
            media.is_object(),
            "{method} {template}: content type {ct} is not declared for {}",
            reply.status
        );
        let schema = &media["schema"];
        if let Err(e) = validate(&self.openapi, schema, &reply.body, "$") {
            panic!(
                "{method} {template} answered {}: {e}\nbody: {:#}",
                reply.status, reply.body
            );
        }
    }

    /// The consistency check of each tenant, through the API.
    pub fn checks(&self) -> Vec<Value> {
        ["olga", "gina"]
            .iter()
            .map(|who| {
                self.call("GET", "/v1/check", Some(who), None)
                    .expect_ok()
                    .clone()
            })
            .collect()
    }

    /// What the store holds, the check answers included; the server is
    /// stopped to read a redb file, and started again.
    pub fn snapshot(&mut self) -> Snapshot {
        let checks = self.checks();
        self.stop();
        let raw = self.store.raw();
        self.restart();
        (checks, raw)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn reply(res: reqwest::blocking::Response) -> Reply {
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let text = res.text().expect("a body");
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        text,
    }
}

/// JSON Schema as utoipa writes it: `$ref`, `type` (one or a list),
/// `properties` and `required`, `items`, `oneOf`/`anyOf`/`allOf`, `enum`.
/// An object may hold no property the schema does not declare, so a field
/// added to an answer must be documented.
pub fn validate(doc: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.trim_start_matches("#/components/schemas/");
        return validate(doc, &doc["components"]["schemas"][name], v, at);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(list) = schema[key].as_array() {
            let ok = list
                .iter()
                .filter(|s| validate(doc, s, v, at).is_ok())
                .count();
            let fits = if key == "oneOf" { ok == 1 } else { ok >= 1 };
            if !fits {
                return Err(format!("{at}: {ok} of the {key} alternatives admit {v}"));
            }
        }
    }
    if let Some(list) = schema["allOf"].as_array() {
        for s in list {
            validate(doc, s, v, at)?;
        }
    }
    if let Some(list) = schema["enum"].as_array()
        && !list.contains(v)
    {
        return Err(format!("{at}: {v} is not one of {list:?}"));
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        let fits = types.iter().any(|t| match *t {
            "null" => v.is_null(),
            "boolean" => v.is_boolean(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "string" => v.is_string(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            _ => false,
        });
        if !fits {
            return Err(format!("{at}: {v} is not of type {types:?}"));
        }
    }
    if let (Some(obj), Some(props)) = (v.as_object(), schema["properties"].as_object()) {
        for name in schema["required"].as_array().into_iter().flatten() {
            let name = name.as_str().unwrap_or_default();
            if !obj.contains_key(name) {
                return Err(format!("{at}: required {name} is missing"));
            }
        }
        for (k, val) in obj {
            let Some(s) = props.get(k) else {
                return Err(format!("{at}: {k} is not in the schema"));
            };
            validate(doc, s, val, &format!("{at}.{k}"))?;
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), v.as_array()) {
        for (i, item) in list.iter().enumerate() {
            validate(doc, items, item, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// A task body for `open`.
pub fn new_task(id: &str) -> Value {
    json!({
        "id": id, "run": "run-1", "case": "case-1", "kind": "approve",
        "justification": {"amount": 1200, "why": "acme-secret"},
        "candidate_roles": ["finance"], "escalate_to": ["legal"],
        "priority": "normal", "on_expiry": "escalate", "created_at": 1000,
        "due_at": 5000,
    })
}

/// A timer body for `arm`.
pub fn new_timer(run: &str, effect: &str, fire_at: i64) -> Value {
    json!({ "run": run, "effect": effect, "step": 1, "phase": "forward", "fire_at": fire_at })
}

/// A throwaway certificate authority and a leaf for 127.0.0.1 signed by it,
/// made with the openssl CLI in `dir`: the leaf's chain, its key, and the
/// authority's certificate (PEM) for a client to trust.
pub fn tls_certificate(dir: &std::path::Path) -> (PathBuf, PathBuf, Vec<u8>) {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    // A throwaway CA, and a leaf for 127.0.0.1 signed by it.
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n",
    )
    .expect("write");
    for args in [
        vec![
            "req",
            "-x509",
            "-days",
            "1",
            "-subj",
            "/CN=test-ca",
            "-keyout",
            &path("ca.key"),
            "-out",
            &path("ca.pem"),
        ],
        vec![
            "req",
            "-subj",
            "/CN=localhost",
            "-keyout",
            &path("key.pem"),
            "-out",
            &path("leaf.csr"),
        ],
        vec![
            "x509",
            "-req",
            "-in",
            &path("leaf.csr"),
            "-CA",
            &path("ca.pem"),
            "-CAkey",
            &path("ca.key"),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &path("leaf.ext"),
            "-out",
            &path("cert.pem"),
        ],
    ] {
        let mut c = std::process::Command::new("openssl");
        c.args(&args);
        if args[0] == "req" {
            c.args(ec);
        }
        let status = c
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl runs");
        assert!(status.success(), "openssl {args:?}");
    }
    let pem = std::fs::read(dir.join("ca.pem")).expect("CA certificate");
    (cert, key, pem)
}

/// Calls, checks the answer against the document, and hands it back.
pub fn checked_call(
    svc: &Service,
    method: &str,
    template: &str,
    path: &str,
    who: &str,
    body: Option<Value>,
) -> Reply {
    let r = svc.call(method, path, Some(who), body);
    svc.conforms(method, template, &r);
    r
}

/// The history of a task, as the operator `olga` reads it.
pub fn history_entries(svc: &Service, id: &str) -> Vec<Value> {
    svc.call(
        "GET",
        &format!("/v1/tasks/{id}/history"),
        Some("olga"),
        None,
    )
    .expect_ok()["entries"]
        .as_array()
        .expect("entries")
        .clone()
}
