//! Per-user OAuth consent for MCP sources (issue 17), end to end: the real server in process,
//! and a real OAuth-protected MCP server with its authorization server (tests/mcp/oauth_server.py,
//! built with the official MCP Python SDK) on loopback. The user's browser is a reqwest client:
//! the fixture's /authorize logs in the user named by `login_hint` and redirects at once to
//! toolrouter's /oauth/callback. Without the SDK these tests print a skip line and pass.

mod common;

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use common::*;
use serde_json::{Value, json};
use tonic::Code;
use tonic_types::StatusExt;
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::pb::handle_tool_call_response::Outcome;

const AGENT: &str = "assistant";
const SOURCE: &str = "calendar-mcp";

// ----- the fixture -----

fn python_oauth_sdk() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import mcp.server.auth, uvicorn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("SKIP: python3 cannot import mcp.server.auth; run `python3 -m pip install 'mcp>=2,<3'`");
    }
    ok
}

/// tests/mcp/oauth_server.py, killed when dropped.
struct Fixture {
    child: Child,
    /// The MCP server's URL (`http://127.0.0.1:<port>/mcp`).
    mcp: String,
    /// The authorization server's issuer (another port).
    issuer: String,
    /// The admin endpoints' base (`.../admin`).
    admin: String,
    http: reqwest::Client,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Fixture {
    /// Starts the fixture with these options; `None` (after a SKIP line) without the SDK.
    fn start(args: &[&str]) -> Option<Fixture> {
        if !python_oauth_sdk() {
            return None;
        }
        let root = env!("CARGO_MANIFEST_DIR");
        let mut child = Command::new("python3")
            .arg(format!("{root}/tests/mcp/oauth_server.py"))
            .args(args)
            .current_dir(root)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 tests/mcp/oauth_server.py");
        let stdout = child.stdout.take().expect("stdout");
        let http = reqwest::Client::builder().no_proxy().build().expect("HTTP client");
        // Owned from here: killed on any panic below.
        let mut fx = Fixture { child, mcp: String::new(), issuer: String::new(), admin: String::new(), http };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("the fixture's READY line");
        let ready: Value =
            serde_json::from_str(line.trim().strip_prefix("READY ").unwrap_or_else(|| panic!("not READY: {line:?}"))).expect("READY JSON");
        fx.mcp = ready["mcp"].as_str().expect("mcp").to_string();
        fx.issuer = ready["issuer"].as_str().expect("issuer").to_string();
        fx.admin = ready["admin"].as_str().expect("admin").to_string();
        Some(fx)
    }

    /// `host:port` of the MCP server.
    fn mcp_host(&self) -> String {
        let u = url::Url::parse(&self.mcp).expect("MCP URL");
        format!("{}:{}", u.host_str().expect("host"), u.port().expect("port"))
    }

    async fn stats(&self) -> Value {
        self.http.get(format!("{}/stats", self.admin)).send().await.expect("GET stats").json().await.expect("stats JSON")
    }

    async fn admin(&self, path: &str, body: Value) -> Value {
        let r = self.http.post(format!("{}/{path}", self.admin)).json(&body).send().await.expect("admin POST");
        assert!(r.status().is_success(), "admin {path}: {}", r.status());
        r.json().await.expect("admin JSON")
    }

    /// How many `tools/call` requests the MCP server served for `user` (with their token).
    async fn tool_calls(&self, user: &str) -> u64 {
        self.stats().await["mcp_methods"][user]["tools/call"].as_u64().unwrap_or(0)
    }
}

// ----- the browser -----

/// The user opens the consent link: the fixture logs them in and redirects to toolrouter's
/// callback, whose page ends the trip. (status, body) of that page.
async fn consent_in_browser(consent_url: &str, user: &str) -> (u16, String) {
    let browser = reqwest::Client::builder().no_proxy().build().expect("browser");
    let r = browser.get(format!("{consent_url}&login_hint={user}")).send().await.expect("the browser step");
    let status = r.status().as_u16();
    (status, r.text().await.expect("the page"))
}

/// The user opens the consent link, but the browser stops at the authorization server's
/// redirect: the callback URL it would have gone to.
async fn callback_url(consent_url: &str, user: &str) -> url::Url {
    let browser = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build().expect("browser");
    let r = browser.get(format!("{consent_url}&login_hint={user}")).send().await.expect("authorize");
    assert_eq!(r.status().as_u16(), 302, "the fixture redirects at once");
    url::Url::parse(r.headers()["location"].to_str().expect("ASCII location")).expect("a callback URL")
}

/// A GET of a callback URL (no redirects): (status, body).
async fn open(url: &str) -> (u16, String) {
    let browser = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build().expect("browser");
    let r = browser.get(url).send().await.expect("GET");
    let status = r.status().as_u16();
    (status, r.text().await.expect("the page"))
}

fn param(u: &url::Url, name: &str) -> Option<String> {
    u.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

// ----- toolrouter -----

/// A temp dir holding a token key file (one base64 32-byte key); the config uses it.
fn with_token_key(mut cfg: ServerConfig) -> (ServerConfig, TempDir) {
    let dir = TempDir::new("oauth-keys");
    let path = dir.0.join("token-keys");
    let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>());
    std::fs::write(&path, format!("{key}\n")).expect("write the key file");
    cfg.oauth.key_file = Some(path);
    (cfg, dir)
}

fn oauth_source(url: &str) -> pb::ToolSource {
    pb::ToolSource {
        id: SOURCE.into(),
        kind: Some(pb::tool_source::Kind::Mcp(pb::McpSource { url: url.into(), oauth: Some(pb::McpOAuth::default()), ..Default::default() })),
        ..Default::default()
    }
}

/// Group `cal` holding the fixture's MCP server as an OAuth source.
fn definition(url: &str) -> pb::AgentDefinition {
    pb::AgentDefinition {
        sources: vec![oauth_source(url)],
        groups: [("cal".to_string(), group("The user's calendar", &[SOURCE]))].into(),
        ..Default::default()
    }
}

fn run_of(user: &str) -> pb::RunContext {
    run_as(&format!("run-{user}"), Some(user), pb::Caller::Model)
}

fn calendar_call(day: &str) -> String {
    json!({"group": "cal", "tool": "calendar", "arguments": {"day": day}}).to_string()
}

/// The fixture, and toolrouter (with a token key) serving the agent.
struct Env {
    s: TestServer,
    fx: Fixture,
    _keys: TempDir,
    ids: AtomicUsize,
}

impl Env {
    async fn start(fixture_args: &[&str]) -> Option<Env> {
        Self::start_with(fixture_args, |_, cfg| cfg).await
    }

    /// Starts the fixture, then toolrouter with the config `adjust` makes (given the fixture).
    async fn start_with(fixture_args: &[&str], adjust: impl FnOnce(&Fixture, ServerConfig) -> ServerConfig) -> Option<Env> {
        let fx = Fixture::start(fixture_args)?;
        let (cfg, keys) = with_token_key(ServerConfig::for_tests());
        let s = TestServer::start_with(adjust(&fx, cfg)).await;
        s.create(AGENT, definition(&fx.mcp)).await;
        Some(Env { s, fx, _keys: keys, ids: AtomicUsize::new(0) })
    }

    fn next_id(&self) -> String {
        format!("call-{}", self.ids.fetch_add(1, Ordering::SeqCst))
    }

    /// `call_tool` of the calendar (a new tool call id) by `user` in their run.
    async fn call(&self, user: &str, day: &str) -> Outcome {
        self.s.handle_raw(AGENT, run_of(user), &self.next_id(), "call_tool", &calendar_call(day)).await.expect("handled")
    }

    /// A call that must ask for consent: its record.
    async fn consent_asked(&self, user: &str) -> pb::DeferredCall {
        let d = deferred_of(&self.call(user, "monday").await);
        assert_eq!(d.kind, pb::DeferredKind::Consent as i32, "{d:?}");
        assert!(!d.consent_url.is_empty(), "{d:?}");
        d
    }

    /// A call that must answer the calendar directly.
    async fn calendar_answers(&self, user: &str, day: &str) {
        let outcome = self.call(user, day).await;
        let (content, is_error) = result_of(&outcome);
        assert!(!is_error, "{user}: {content}");
        assert!(content.to_string().contains(&format!("{user}: 3 meetings on {day}")), "{user}: {content}");
    }

    /// `user` consents to a fresh consent record: the callback page says access was granted.
    async fn consent(&self, user: &str) -> pb::DeferredCall {
        let d = self.consent_asked(user).await;
        let (status, page) = consent_in_browser(&d.consent_url, user).await;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("Access granted"), "{page}");
        d
    }

    async fn record(&self, user: &str, deferred_id: &str) -> pb::DeferredRecord {
        let listed = self
            .s
            .router()
            .list_deferred(pb::ListDeferredRequest { agent_id: AGENT.into(), run_id: format!("run-{user}"), ..Default::default() })
            .await
            .expect("list deferred")
            .into_inner();
        listed.records.into_iter().find(|r| r.call.as_ref().is_some_and(|c| c.deferred_id == deferred_id)).expect("the record is listed")
    }

    async fn records(&self, user: &str) -> Vec<pb::DeferredRecord> {
        self.s
            .router()
            .list_deferred(pb::ListDeferredRequest { agent_id: AGENT.into(), run_id: format!("run-{user}"), ..Default::default() })
            .await
            .expect("list deferred")
            .into_inner()
            .records
    }

    /// The tools discovery lists in group `cal` for `user`.
    async fn listed(&self, user: &str) -> Vec<String> {
        let args = json!({"query": "calendar meetings report user", "group": "cal", "limit": 20}).to_string();
        let outcome = self.s.handle_raw(AGENT, run_of(user), &self.next_id(), "discover_tools", &args).await.expect("handled");
        let (found, is_error) = result_of(&outcome);
        assert!(!is_error, "{found}");
        let mut names: Vec<String> =
            found["tools"].as_array().map(|t| t.iter().filter_map(|t| t["name"].as_str().map(String::from)).collect()).unwrap_or_default();
        names.sort();
        names
    }

    async fn revoke(&self, user: &str, source: &str) -> Result<u32, tonic::Status> {
        self.s
            .router()
            .revoke_tokens(pb::RevokeTokensRequest { user_id: user.into(), source_id: source.into() })
            .await
            .map(|r| r.into_inner().revoked)
    }
}

fn fault_of(outcome: &Outcome) -> Value {
    let (content, is_error) = result_of(outcome);
    assert!(is_error, "expected a fault, got {content}");
    content
}

fn resolved(record: &pb::DeferredRecord) -> bool {
    record.state == pb::DeferredState::Resolved as i32
}

fn pending(record: &pb::DeferredRecord) -> bool {
    record.state == pb::DeferredState::Pending as i32
}

// ----- 1. the flow -----

#[tokio::test]
async fn a_user_without_a_token_is_asked_to_consent_and_their_consent_runs_the_call_once() {
    let Some(env) = Env::start(&[]).await else { return };
    let fx = &env.fx;

    // Before consent: listed empty, with a diagnostic saying why.
    let tools = env.s.model_tools(AGENT, run_of("ada")).await;
    assert!(tools.diagnostics.iter().any(|d| d.contains(SOURCE) && d.contains("consent")), "{:?}", tools.diagnostics);

    let d = env.consent_asked("ada").await;
    let url = url::Url::parse(&d.consent_url).expect("a consent URL");
    assert!(d.consent_url.starts_with(&format!("{}/authorize?", fx.issuer)), "{}", d.consent_url);
    assert!(param(&url, "state").is_some_and(|s| s.len() >= 32), "{url}");
    assert!(param(&url, "code_challenge").is_some_and(|c| c.len() == 43), "{url}");
    assert_eq!(param(&url, "code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(param(&url, "resource").as_deref(), Some(fx.mcp.as_str()));
    assert_eq!(param(&url, "response_type").as_deref(), Some("code"));
    assert_eq!(param(&url, "redirect_uri"), Some(format!("http://{}/oauth/callback", env.s.server.http_addr)));
    let target = d.target.as_ref().expect("a target");
    assert_eq!((target.group.as_str(), target.tool.as_str(), target.source_id.as_str()), ("cal", "calendar", SOURCE));
    assert!(pending(&env.record("ada", &d.deferred_id).await));
    // The MCP server saw no authorized request: the call was not sent.
    let stats = fx.stats().await;
    assert_eq!(stats["mcp_requests"], json!({}), "{stats}");
    assert_eq!(stats["mcp_unauthorized_bad_token"], 0, "{stats}");
    // Still listed empty (the diagnostic says why) until the user consents.
    let tools = env.s.model_tools(AGENT, run_of("ada")).await;
    assert!(tools.diagnostics.iter().any(|d| d.contains("consent")), "{:?}", tools.diagnostics);

    // The browser step: the callback exchanges the code and runs the recorded call.
    let (status, page) = consent_in_browser(&d.consent_url, "ada").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Access granted"), "{page}");
    let record = env.record("ada", &d.deferred_id).await;
    assert!(resolved(&record), "{record:?}");
    let result = record.result.as_ref().expect("the call's result");
    assert!(!result.is_error, "{result:?}");
    assert!(result.content_json.contains("ada: 3 meetings on monday"), "{result:?}");
    assert_eq!(fx.tool_calls("ada").await, 1, "run exactly once");
    let stats = fx.stats().await;
    assert_eq!((stats["authorizations"].as_u64(), stats["token_exchanges"].as_u64()), (Some(1), Some(1)), "{stats}");

    // A new call goes straight through; the record was not run again.
    env.calendar_answers("ada", "tuesday").await;
    assert_eq!(fx.tool_calls("ada").await, 2);
    assert_eq!(env.records("ada").await.len(), 1, "no new consent record");

    // Each user sees what the server lists for them: ada (an admin at the fixture) sees
    // admin_report, bob does not.
    let ada = env.listed("ada").await;
    assert!(ada.contains(&"cal__calendar".to_string()) && ada.contains(&"cal__admin_report".to_string()), "{ada:?}");
    assert!(env.s.model_tools(AGENT, run_of("ada")).await.diagnostics.is_empty());
    env.consent("bob").await;
    let bob = env.listed("bob").await;
    assert!(bob.contains(&"cal__calendar".to_string()) && !bob.contains(&"cal__admin_report".to_string()), "{bob:?}");
    env.calendar_answers("bob", "friday").await;
    // Bob's consent ran his own call, as himself.
    assert_eq!((fx.tool_calls("ada").await, fx.tool_calls("bob").await), (2, 2));
}

// ----- 2. refresh -----

#[tokio::test]
async fn a_short_lived_token_is_refreshed_and_calls_keep_working_without_a_new_authorization() {
    let Some(env) = Env::start(&["--access-ttl", "2"]).await else { return };
    env.consent("ada").await;
    for day in ["tuesday", "wednesday", "thursday"] {
        env.calendar_answers("ada", day).await;
    }
    // Past the access token's own lifetime too.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    env.calendar_answers("ada", "friday").await;
    let stats = env.fx.stats().await;
    assert!(stats["refreshes"].as_u64().unwrap_or(0) >= 1, "{stats}");
    assert_eq!(stats["authorizations"], 1, "no new authorization: {stats}");
    assert_eq!(stats["token_exchanges"], 1, "{stats}");
    assert_eq!(stats["mcp_unauthorized_bad_token"], 0, "never an expired token sent: {stats}");
    assert_eq!(env.fx.tool_calls("ada").await, 5);
}

#[tokio::test]
async fn concurrent_calls_with_a_token_due_for_refresh_all_work() {
    let Some(env) = Env::start(&["--access-ttl", "2"]).await else { return };
    env.consent("ada").await;
    let calls: Vec<pb::ToolCall> = ["mon", "tue", "wed", "thu"]
        .iter()
        .map(|day| pb::ToolCall { tool_call_id: env.next_id(), tool_name: "call_tool".into(), arguments_json: calendar_call(day) })
        .collect();
    let answered = env
        .s
        .router()
        .handle_tool_calls(pb::HandleToolCallsRequest { agent: Some(agent_ref(AGENT)), run: Some(run_of("ada")), calls, ..Default::default() })
        .await
        .expect("handled")
        .into_inner();
    for (outcome, day) in answered.outcomes.iter().zip(["mon", "tue", "wed", "thu"]) {
        let outcome = outcome.outcome.as_ref().expect("an outcome");
        let (content, is_error) = result_of(outcome);
        assert!(!is_error && content.to_string().contains(&format!("ada: 3 meetings on {day}")), "{content}");
    }
    let stats = env.fx.stats().await;
    assert_eq!(stats["authorizations"], 1, "no new authorization: {stats}");
    // The refreshed token is still there for the next call.
    env.calendar_answers("ada", "friday").await;
}

#[tokio::test]
async fn an_approval_gated_tool_asks_consent_first_and_consent_alone_never_runs_it() {
    let Some(env) = Env::start(&[]).await else { return };
    let mut def = definition(&env.fx.mcp);
    if let Some(pb::tool_source::Kind::Mcp(m)) = def.sources[0].kind.as_mut() {
        m.approval_required = vec!["calendar".into()];
    }
    env.s.create("gated", def).await;
    let arguments = calendar_call("monday");
    let call = |id: &'static str| env.s.handle_raw("gated", run_of("ada"), id, "call_tool", &arguments);
    // Consent first: no token yet, so no approval question either.
    let d = deferred_of(&call("g1").await.expect("handled"));
    assert_eq!(d.kind, pb::DeferredKind::Consent as i32, "{d:?}");
    // Consenting stores the token but does not run an approval-gated call.
    let (status, page) = consent_in_browser(&d.consent_url, "ada").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(env.fx.tool_calls("ada").await, 0, "consent alone never runs it");
    // The next call asks a person; approving it runs it once, with the user's token.
    let approval = deferred_of(&call("g2").await.expect("handled"));
    assert_eq!(approval.kind, pb::DeferredKind::Approval as i32, "{approval:?}");
    let approve = pb::resolve_deferred_request::Resolution::Approve(pb::Approve::default());
    let result = env.s.resolve(&approval.deferred_id, approve).await.expect("approved");
    assert!(!result.is_error && result.content_json.contains("ada: 3 meetings on monday"), "{result:?}");
    assert_eq!(env.fx.tool_calls("ada").await, 1);
}

// ----- 3. revoked at the server -----

#[tokio::test]
async fn a_token_revoked_at_the_server_leads_back_to_consent_not_to_an_error_loop() {
    let Some(env) = Env::start(&[]).await else { return };
    env.consent("ada").await;
    env.calendar_answers("ada", "tuesday").await;

    let revoked = env.fx.admin("revoke", json!({"user": "ada"})).await;
    assert!(revoked["access_tokens"].as_u64().unwrap_or(0) >= 1, "{revoked}");

    // The server refuses the token: the call was not run, and the user is asked again.
    let again = env.consent_asked("ada").await;
    assert_eq!(env.records("ada").await.iter().filter(|r| pending(r)).count(), 1, "one new consent record");
    // Asked again, not refused in a loop: the next call asks too (the token is gone).
    let third = env.consent_asked("ada").await;
    assert_ne!(again.deferred_id, third.deferred_id);
    assert_eq!(env.fx.tool_calls("ada").await, 2, "only the calls before the revocation ran (the consented one, then tuesday)");

    let (status, page) = consent_in_browser(&again.consent_url, "ada").await;
    assert_eq!(status, 200, "{page}");
    let record = env.record("ada", &again.deferred_id).await;
    assert!(resolved(&record) && record.result.as_ref().is_some_and(|r| !r.is_error), "{record:?}");
    env.calendar_answers("ada", "wednesday").await;
    assert_eq!(env.fx.tool_calls("ada").await, 4, "the second consent ran its record once, then wednesday");
}

// ----- 4. RevokeTokens -----

#[tokio::test]
async fn revoke_tokens_makes_the_users_next_call_ask_for_consent_and_leaves_other_users_alone() {
    let Some(env) = Env::start(&[]).await else { return };
    env.consent("ada").await;
    env.consent("bob").await;

    // One source.
    assert_eq!(env.revoke("ada", SOURCE).await.expect("revoke"), 1);
    env.consent_asked("ada").await;
    env.calendar_answers("bob", "monday").await;

    // Every source (source_id empty).
    env.consent("ada").await;
    env.calendar_answers("ada", "tuesday").await;
    assert_eq!(env.revoke("ada", "").await.expect("revoke"), 1);
    env.consent_asked("ada").await;
    env.calendar_answers("bob", "tuesday").await;
    // Nothing left to revoke.
    assert_eq!(env.revoke("ada", "").await.expect("revoke"), 0);

    let e = env.revoke("", SOURCE).await.expect_err("no user");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("user_id"), "{e:?}");
    env.calendar_answers("bob", "wednesday").await;
}

#[tokio::test]
async fn revoke_tokens_of_another_tenant_touches_nothing() {
    const ACME: &str = "tr_acme_0123456789abcdef";
    const GLOBEX: &str = "tr_globex_fedcba9876543210";
    let Some(fx) = Fixture::start(&[]) else { return };
    let keys = KeyFile::with_keys(&[(ACME, "acme"), (GLOBEX, "globex")]);
    let (cfg, _token_keys) = with_token_key(config_with_keys(&keys));
    let s = TestServer::start_with(cfg).await;
    s.create_as(ACME, AGENT, definition(&fx.mcp)).await;
    s.create_as(GLOBEX, AGENT, definition(&fx.mcp)).await;
    let call = |key: &'static str, id: &'static str| {
        let s = &s;
        async move {
            s.call_as(key, AGENT, run_of("ada"), id, "call_tool", serde_json::from_str(&calendar_call("monday")).unwrap()).await.expect("handled")
        }
    };

    let d = deferred_of(&call(ACME, "a1").await);
    assert_eq!(consent_in_browser(&d.consent_url, "ada").await.0, 200);
    assert!(!result_of(&call(ACME, "a2").await).1, "acme's ada has a token");
    // globex's ada is another user: she has no token, and revoking hers leaves acme's.
    assert_eq!(deferred_of(&call(GLOBEX, "g1").await).kind, pb::DeferredKind::Consent as i32);
    let revoked =
        s.router_as(GLOBEX).revoke_tokens(pb::RevokeTokensRequest { user_id: "ada".into(), source_id: String::new() }).await.expect("revoke");
    assert_eq!(revoked.into_inner().revoked, 0);
    let (content, is_error) = result_of(&call(ACME, "a3").await);
    assert!(!is_error && content.to_string().contains("ada: 3 meetings on monday"), "{content}");
}

// ----- 5. bad callbacks -----

#[tokio::test]
async fn a_forged_state_is_refused_and_changes_nothing() {
    let Some(env) = Env::start(&[]).await else { return };
    let d = env.consent_asked("ada").await;
    let forged = format!("http://{}/oauth/callback?code=abc&state={}", env.s.server.http_addr, "0".repeat(64));
    let (status, page) = open(&forged).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("unknown or was used already"), "{page}");
    let (status, _) = open(&format!("http://{}/oauth/callback?code=abc", env.s.server.http_addr)).await;
    assert_eq!(status, 400, "no state");
    assert!(pending(&env.record("ada", &d.deferred_id).await));
    assert_eq!(env.fx.stats().await["token_exchanges"], 0);
    // The real link still works afterwards.
    assert_eq!(consent_in_browser(&d.consent_url, "ada").await.0, 200);
    assert!(resolved(&env.record("ada", &d.deferred_id).await));
}

#[tokio::test]
async fn a_replayed_callback_is_refused_and_the_call_runs_once() {
    let Some(env) = Env::start(&[]).await else { return };
    let d = env.consent_asked("ada").await;
    let callback = callback_url(&d.consent_url, "ada").await;
    assert_eq!(
        format!("http://{}/oauth/callback", env.s.server.http_addr),
        format!("{}{}", callback.origin().ascii_serialization(), callback.path())
    );
    let (status, page) = open(callback.as_str()).await;
    assert_eq!(status, 200, "{page}");
    let (status, page) = open(callback.as_str()).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("unknown or was used already"), "{page}");
    let record = env.record("ada", &d.deferred_id).await;
    assert!(resolved(&record) && record.result.as_ref().is_some_and(|r| r.content_json.contains("ada: 3 meetings on monday")), "{record:?}");
    assert_eq!(env.fx.tool_calls("ada").await, 1);
    assert_eq!(env.fx.stats().await["token_exchanges"], 1, "the code was exchanged once");
}

#[tokio::test]
async fn a_callback_after_the_consent_expired_is_gone_and_resolves_nothing() {
    let Some(env) = Env::start_with(&[], |_, mut cfg| {
        cfg.oauth.consent_ttl = Duration::from_secs(1);
        cfg
    })
    .await
    else {
        return;
    };
    let d = env.consent_asked("ada").await;
    let callback = callback_url(&d.consent_url, "ada").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, page) = open(callback.as_str()).await;
    assert_eq!(status, 410, "{page}");
    assert!(page.contains("expired"), "{page}");
    let record = env.record("ada", &d.deferred_id).await;
    assert!(!resolved(&record) && record.result.is_none(), "{record:?}");
    assert_eq!(env.fx.stats().await["token_exchanges"], 0);
    assert_eq!(env.fx.tool_calls("ada").await, 0);
    // No token was stored: the next call asks again.
    env.consent_asked("ada").await;
}

#[tokio::test]
async fn a_code_issued_for_another_users_consent_fails_the_pkce_check_and_stores_nothing() {
    let Some(env) = Env::start(&[]).await else { return };
    let ada = env.consent_asked("ada").await;
    let bob = env.consent_asked("bob").await;
    let ada_callback = callback_url(&ada.consent_url, "ada").await;
    let bob_callback = callback_url(&bob.consent_url, "bob").await;
    // Bob's code with ada's state: the verifier is ada's consent's.
    let mut crossed = ada_callback.clone();
    crossed
        .query_pairs_mut()
        .clear()
        .append_pair("code", &param(&bob_callback, "code").unwrap())
        .append_pair("state", &param(&ada_callback, "state").unwrap());
    let (status, page) = open(crossed.as_str()).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("could not be completed"), "{page}");
    assert!(!page.contains(&param(&bob_callback, "code").unwrap()), "the code is not echoed");
    let stats = env.fx.stats().await;
    assert_eq!(stats["token_exchanges"], 0, "{stats}");
    assert_eq!(stats["token_errors"]["invalid_grant"], 1, "the authorization server refused the code (PKCE): {stats}");
    assert!(pending(&env.record("ada", &ada.deferred_id).await));
    assert!(pending(&env.record("bob", &bob.deferred_id).await));
    // Neither has a token.
    env.consent_asked("ada").await;
    env.consent_asked("bob").await;
    assert_eq!((env.fx.tool_calls("ada").await, env.fx.tool_calls("bob").await), (0, 0));
}

#[tokio::test]
async fn a_user_who_refuses_at_the_authorization_server_gets_the_record_denied() {
    let Some(env) = Env::start(&["--refuse-user", "carol"]).await else { return };
    let d = env.consent_asked("carol").await;
    let (status, page) = consent_in_browser(&d.consent_url, "carol").await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("Access not granted") && page.contains("access_denied"), "{page}");
    let record = env.record("carol", &d.deferred_id).await;
    assert!(resolved(&record), "{record:?}");
    assert_eq!(record.resolution, "denied");
    let result = record.result.as_ref().expect("a result");
    assert!(result.is_error && result.content_json.contains("denied"), "{result:?}");
    let stats = env.fx.stats().await;
    assert_eq!((stats["authorizations_refused"].as_u64(), stats["token_exchanges"].as_u64()), (Some(1), Some(0)), "{stats}");
    // Nothing stored: the next call asks again.
    env.consent_asked("carol").await;
}

// ----- 6. outbound policy -----

#[tokio::test]
async fn an_authorization_server_the_outbound_allowlist_forbids_is_a_clear_fault_and_nothing_is_stored() {
    let Some(env) = Env::start_with(&[], |fx, mut cfg| {
        cfg.outbound.allow = vec![fx.mcp_host()];
        cfg
    })
    .await
    else {
        return;
    };
    let issuer_host = env.fx.issuer.trim_start_matches("http://").to_string();
    let fault = fault_of(&env.call("ada", "monday").await);
    let message = fault["message"].as_str().unwrap_or_default();
    assert!(message.contains("outbound policy") && message.contains("refused"), "{fault}");
    assert!(message.contains(&issuer_host), "names the refused host: {fault}");
    assert!(env.records("ada").await.is_empty(), "no consent record");
    let stats = env.fx.stats().await;
    assert_eq!((stats["registrations"].as_u64(), stats["mcp_requests"].clone()), (Some(0), json!({})), "{stats}");
}

// ----- 7. the MCP endpoint -----

#[tokio::test]
async fn the_mcp_endpoint_answers_consent_required_with_the_consent_url() {
    use rmcp::ServiceExt;
    use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    const KEY: &str = "tr_acme_0123456789abcdef";
    let Some(fx) = Fixture::start(&[]) else { return };
    // MCP requests carry no RunContext: the user is the credential's user_id claim.
    let keys = KeyFile::new(&key_file_json(&[(KEY, "acme", json!({"user_id": "ada"}))]));
    let (cfg, _token_keys) = with_token_key(config_with_keys(&keys));
    let s = TestServer::start_with(cfg).await;
    s.create_as(KEY, AGENT, definition(&fx.mcp)).await;

    let url = format!("http://{}/mcp/agents/{AGENT}", s.server.http_addr);
    let transport = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(url).auth_header(KEY));
    let client =
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("test-client", "1")).serve(transport).await.expect("initialize");
    let Value::Object(args) = serde_json::from_str(&calendar_call("monday")).unwrap() else { unreachable!() };
    let call = || client.call_tool(CallToolRequestParams::new("call_tool").with_arguments(args.clone()));
    let e = match call().await {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected CONSENT_REQUIRED, got {other:?}"),
    };
    assert_eq!(e.code.0, -32007, "{e:?}");
    assert_eq!(e.message, "CONSENT_REQUIRED");
    let data = e.data.expect("data");
    let consent_url = data["consent_url"].as_str().expect("consent_url");
    assert!(consent_url.starts_with(&format!("{}/authorize?", fx.issuer)), "{data}");
    assert!(data["deferred_id"].as_str().is_some_and(|id| !id.is_empty()), "{data}");
    assert_eq!(fx.tool_calls("ada").await, 0);

    // Consent, then the same call answers (as ada: the credential's user).
    let (status, page) = consent_in_browser(consent_url, "ada").await;
    assert_eq!(status, 200, "{page}");
    let r = call().await.expect("tools/call after consent");
    assert!(!r.is_error.unwrap_or(false), "{r:?}");
    assert!(format!("{r:?}").contains("ada: 3 meetings on monday"), "{r:?}");
    assert_eq!(fx.tool_calls("ada").await, 2, "the consent ran the recorded call, then the new call");
}

// ----- 8. no key file -----

#[tokio::test]
async fn without_a_token_key_file_an_oauth_source_is_unavailable_with_a_clear_fault() {
    let Some(fx) = Fixture::start(&[]) else { return };
    let s = TestServer::start().await;
    s.create(AGENT, definition(&fx.mcp)).await;
    let tools = s.model_tools(AGENT, run_of("ada")).await;
    assert!(tools.diagnostics.iter().any(|d| d.contains("token-encryption-key-file")), "{:?}", tools.diagnostics);
    let outcome = s.handle_raw(AGENT, run_of("ada"), "c1", "call_tool", &calendar_call("monday")).await.expect("handled, not a panic");
    let fault = fault_of(&outcome);
    assert_eq!(fault["error"], "tool_unavailable", "{fault}");
    assert!(fault["message"].as_str().unwrap_or_default().contains("token-encryption-key-file"), "{fault}");
    assert!(
        s.router()
            .list_deferred(pb::ListDeferredRequest { agent_id: AGENT.into(), ..Default::default() })
            .await
            .unwrap()
            .into_inner()
            .records
            .is_empty()
    );
    let stats = fx.stats().await;
    assert_eq!((stats["registrations"].as_u64(), stats["mcp_requests"].clone()), (Some(0), json!({})), "{stats}");
}

// ----- 7. pre-registered clients, the public URL, RFC 9207 -----

/// toolrouter (token key, the operator secret `cal_client` holding `secret`) and the agent,
/// whose source uses the pre-registered client `client_id` with that secret.
async fn with_client(fx: Fixture, client_id: &str, secret: &str) -> Env {
    let (mut cfg, keys) = with_token_key(ServerConfig::for_tests());
    let path = keys.0.join("cal-client-secret");
    std::fs::write(&path, format!("{secret}\n")).expect("write the client secret");
    // Authentication is off: a secret without tenant= is usable.
    cfg.secrets = toolrouter::upstream::Secrets::parse([format!("cal_client=file:{}", path.display()).as_str()]).expect("secret spec");
    let s = TestServer::start_with(cfg).await;
    let callback = format!("http://{}/oauth/callback", s.server.http_addr);
    let client = json!({
        "client_id": client_id, "client_secret": secret, "redirect_uris": [callback],
        "token_endpoint_auth_method": "client_secret_basic",
    });
    let registered = fx.admin("clients", client).await;
    assert_eq!(registered["token_endpoint_auth_method"], "client_secret_basic", "{registered}");
    let mut def = definition(&fx.mcp);
    let Some(pb::tool_source::Kind::Mcp(m)) = &mut def.sources[0].kind else { unreachable!() };
    m.oauth = Some(pb::McpOAuth { client_id: client_id.into(), client_secret: "cal_client".into(), ..Default::default() });
    s.create(AGENT, def).await;
    Env { s, fx, _keys: keys, ids: AtomicUsize::new(0) }
}

#[tokio::test]
async fn a_pre_registered_confidential_client_authenticates_with_client_secret_basic() {
    // No registration; the metadata lists client_secret_basic only.
    let Some(fx) = Fixture::start(&["--no-dcr", "--token-auth-methods", "client_secret_basic", "--access-ttl", "2"]) else { return };
    // ':' '/' '+' '%' exercise RFC 6749 §2.3.1's encoding before base64.
    let env = with_client(fx, "toolrouter:cal", "s3cr3t:a/b+c%d").await;
    let d = env.consent("ada").await;
    let url = url::Url::parse(&d.consent_url).expect("a consent URL");
    assert_eq!(param(&url, "client_id").as_deref(), Some("toolrouter:cal"));
    let record = env.record("ada", &d.deferred_id).await;
    assert!(resolved(&record) && record.result.as_ref().is_some_and(|r| r.content_json.contains("ada: 3 meetings on monday")), "{record:?}");
    // The 2 s access token is refreshed (within the refresh margin) with the same client
    // authentication.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    env.calendar_answers("ada", "tuesday").await;
    let stats = env.fx.stats().await;
    assert_eq!(stats["registrations"], 0, "{stats}");
    assert_eq!(stats["token_exchanges"], 1, "{stats}");
    assert!(stats["refreshes"].as_u64().unwrap_or(0) >= 1, "{stats}");
    assert_eq!(stats["token_errors"], json!({}), "{stats}");
    assert_eq!(env.fx.tool_calls("ada").await, 2);
}

#[tokio::test]
async fn a_confidential_client_with_the_wrong_secret_is_refused_and_nothing_is_stored() {
    let Some(fx) = Fixture::start(&["--no-dcr", "--token-auth-methods", "client_secret_basic"]) else { return };
    let env = with_client(fx, "toolrouter", "right").await;
    // The operator's secret changes at the server only.
    let callback = format!("http://{}/oauth/callback", env.s.server.http_addr);
    env.fx
        .admin(
            "clients",
            json!({"client_id": "toolrouter", "client_secret": "other", "redirect_uris": [callback], "token_endpoint_auth_method": "client_secret_basic"}),
        )
        .await;
    let d = env.consent_asked("ada").await;
    let (status, page) = consent_in_browser(&d.consent_url, "ada").await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("could not be completed") && page.contains("invalid_client") && !page.contains("right"), "{page}");
    let stats = env.fx.stats().await;
    assert_eq!((stats["token_exchanges"].as_u64(), stats["registrations"].as_u64()), (Some(0), Some(0)), "{stats}");
    assert_eq!(stats["token_errors"]["invalid_client"], 1, "{stats}");
    assert!(pending(&env.record("ada", &d.deferred_id).await));
    env.consent_asked("ada").await;
}

#[tokio::test]
async fn with_a_public_url_the_callback_is_reached_through_it() {
    // The HTTP port is chosen first, so the public URL can name it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("address").port();
    let Some(env) = Env::start_with(&[], |_, mut cfg| {
        cfg.http_addr = format!("127.0.0.1:{port}").parse().expect("address");
        cfg.oauth.public_url = Some(format!("http://localhost:{port}"));
        cfg
    })
    .await
    else {
        return;
    };
    assert_eq!(env.s.server.http_addr.port(), port);
    let d = env.consent_asked("ada").await;
    let url = url::Url::parse(&d.consent_url).expect("a consent URL");
    assert_eq!(param(&url, "redirect_uri"), Some(format!("http://localhost:{port}/oauth/callback")));
    let callback = callback_url(&d.consent_url, "ada").await;
    assert_eq!(callback.host_str(), Some("localhost"));
    let (status, page) = open(callback.as_str()).await;
    assert_eq!(status, 200, "{page}");
    assert!(resolved(&env.record("ada", &d.deferred_id).await));
    env.calendar_answers("ada", "tuesday").await;
    assert_eq!(env.fx.stats().await["registrations"], 1);
}

#[tokio::test]
async fn with_rfc_9207_the_callbacks_iss_must_be_the_issuer() {
    let Some(env) = Env::start(&["--iss-parameter"]).await else { return };
    let issuer = env.fx.issuer.clone();
    // Wrong, then missing: refused, nothing exchanged, the record still pending.
    for iss in [Some("http://127.0.0.1:1"), None] {
        let d = env.consent_asked("ada").await;
        let callback = callback_url(&d.consent_url, "ada").await;
        assert_eq!(param(&callback, "iss").as_deref(), Some(issuer.as_str()), "{callback}");
        let mut forged = callback.clone();
        let pairs: Vec<(String, String)> = callback.query_pairs().into_owned().filter(|(k, _)| k != "iss").collect();
        let mut q = forged.query_pairs_mut();
        q.clear().extend_pairs(pairs);
        if let Some(iss) = iss {
            q.append_pair("iss", iss);
        }
        drop(q);
        let (status, page) = open(forged.as_str()).await;
        assert_eq!(status, 400, "{iss:?}: {page}");
        assert!(page.contains("does not come from the authorization server"), "{page}");
        assert!(pending(&env.record("ada", &d.deferred_id).await));
        // The consent was used up: the genuine callback is refused too.
        let (status, _) = open(callback.as_str()).await;
        assert_eq!(status, 400);
    }
    assert_eq!(env.fx.stats().await["token_exchanges"], 0);
    assert_eq!(env.fx.tool_calls("ada").await, 0);
    // The genuine response carries the issuer: the flow completes.
    let d = env.consent("ada").await;
    assert!(resolved(&env.record("ada", &d.deferred_id).await));
    env.calendar_answers("ada", "tuesday").await;
}

// ----- registration -----

#[tokio::test]
async fn an_oauth_source_binding_authorization_or_a_secret_without_a_client_is_refused_at_registration() {
    let s = TestServer::start().await;
    let refused = |def: pb::AgentDefinition| {
        let s = &s;
        async move {
            let e = s
                .registry()
                .create_agent_version(pb::CreateAgentVersionRequest { agent_id: AGENT.into(), definition: Some(def), make_default: true })
                .await
                .expect_err("refused");
            assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
            e.get_details_bad_request().expect("BadRequest details").field_violations.into_iter().map(|v| v.field).collect::<Vec<_>>()
        }
    };
    let mut def = definition("http://127.0.0.1:9/mcp");
    let Some(pb::tool_source::Kind::Mcp(m)) = &mut def.sources[0].kind else { unreachable!() };
    m.headers.insert(
        "Authorization".into(),
        pb::HeaderBinding { value: Some(pb::header_binding::Value::From("identity.user_id".into())), prefix: "Bearer ".into() },
    );
    assert_eq!(refused(def).await, [r#"definition.sources[0].mcp.headers["Authorization"]"#]);

    let mut def = definition("http://127.0.0.1:9/mcp");
    let Some(pb::tool_source::Kind::Mcp(m)) = &mut def.sources[0].kind else { unreachable!() };
    m.oauth = Some(pb::McpOAuth { client_secret: "calendar-secret".into(), ..Default::default() });
    assert_eq!(refused(def).await, ["definition.sources[0].mcp.oauth.client_secret"]);

    // The same header on a source without oauth is fine.
    let mut def = definition("http://127.0.0.1:9/mcp");
    let Some(pb::tool_source::Kind::Mcp(m)) = &mut def.sources[0].kind else { unreachable!() };
    m.oauth = None;
    m.headers.insert(
        "Authorization".into(),
        pb::HeaderBinding { value: Some(pb::header_binding::Value::From("identity.user_id".into())), prefix: "Bearer ".into() },
    );
    s.create(AGENT, def).await;
}
