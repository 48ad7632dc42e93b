//! MCP endpoint sessions (the endurance issue's item 3): a session is a run of its tenant,
//! kept in the store (any replica serves it), capped per replica and per tenant with a clear
//! JSON-RPC error, and costs little while idle (counted by a counting allocator).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use toolrouter::config::ServerConfig;

struct Counting;

static NET: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only an atomic counter
// is added to.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        NET.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        NET.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        NET.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The allocator counts the whole process: the tests of this binary run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

fn url(addr: std::net::SocketAddr, agent: &str) -> String {
    format!("http://{addr}/mcp/agents/{agent}")
}

/// POSTs a JSON-RPC message: (status, session id answered, JSON body).
async fn post(client: &reqwest::Client, url: &str, body: &str, session: Option<&str>) -> (u16, Option<String>, Value) {
    let mut req =
        client.post(url).header("content-type", "application/json").header("accept", "application/json, text/event-stream").body(body.to_string());
    if let Some(s) = session {
        req = req.header("mcp-session-id", s).header("mcp-protocol-version", "2025-06-18");
    }
    let r = req.send().await.expect("POST");
    let status = r.status().as_u16();
    let session = r.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    let text = r.text().await.unwrap_or_default();
    (status, session, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn call(tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": args}}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_mcp_session_costs_at_most_16_kib() {
    let _serial = SERIAL.lock().await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    let (client, url) = (reqwest::Client::new(), url(s.server.http_addr, "crm"));
    let open = |n: usize| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            for _ in 0..n {
                let (status, session, _) = post(&client, &url, INITIALIZE, None).await;
                assert_eq!(status, 200);
                assert!(session.is_some());
            }
        }
    };
    // Warm-up: caches, connection pools and the catalog come first.
    open(50).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = NET.load(Ordering::Relaxed);
    open(500).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let per_session = (NET.load(Ordering::Relaxed) - before) / 500;
    eprintln!("an idle MCP session: {per_session} bytes");
    assert!(per_session <= 16 * 1024, "{per_session} bytes per idle session");
}

#[tokio::test]
async fn sessions_count_against_the_tenants_run_limit_and_are_capped_with_a_clear_error() {
    let _serial = SERIAL.lock().await;
    let mut cfg = ServerConfig::for_tests();
    cfg.limits.max_runs_per_tenant = 2;
    cfg.mcp_endpoint.sessions.max_per_tenant = 5;
    let s = TestServer::start_with(cfg).await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    let (client, url) = (reqwest::Client::new(), url(s.server.http_addr, "crm"));
    let (_, first, _) = post(&client, &url, INITIALIZE, None).await;
    let (_, second, _) = post(&client, &url, INITIALIZE, None).await;
    assert!(first.is_some() && second.is_some());
    let (status, none, refused) = post(&client, &url, INITIALIZE, None).await;
    assert_eq!((status, none), (200, None));
    assert_eq!(refused["error"]["code"], -32029, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("live runs"), "{refused}");
    // Closing a session gives its run back.
    let closed = client.delete(&url).header("mcp-session-id", first.as_deref().unwrap()).send().await.unwrap();
    assert_eq!(closed.status().as_u16(), 204);
    let (_, third, _) = post(&client, &url, INITIALIZE, None).await;
    assert!(third.is_some(), "room again after DELETE");

    // The replica's own cap per tenant, below the run limit.
    let mut cfg = ServerConfig::for_tests();
    cfg.mcp_endpoint.sessions.max_per_tenant = 1;
    let s = TestServer::start_with(cfg).await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    let url = self::url(s.server.http_addr, "crm");
    assert!(post(&client, &url, INITIALIZE, None).await.1.is_some());
    let (_, none, refused) = post(&client, &url, INITIALIZE, None).await;
    assert!(none.is_none());
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("MCP sessions"), "{refused}");
}

#[tokio::test]
async fn a_session_opened_on_one_replica_is_served_by_another_and_survives_the_first_stopping() {
    let _serial = SERIAL.lock().await;
    let exec = spawn_executor(Behaviour::Echo).await;
    let dir = std::env::temp_dir().join(format!("toolrouter-mcp-sessions-{}-{}", std::process::id(), rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = format!("sqlite://{}", dir.join("store.db").display());
    let replica = || {
        let mut cfg = ServerConfig::for_tests();
        cfg.store = store.clone();
        cfg
    };
    let a = TestServer::start_with(replica()).await;
    let b = TestServer::start_with(replica()).await;
    a.create("crm", crm_definition(&exec.endpoint())).await;
    let client = reqwest::Client::new();
    let (_, session, _) = post(&client, &url(a.server.http_addr, "crm"), INITIALIZE, None).await;
    let session = session.expect("a session");
    let args = json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}});
    let TestServer { server, .. } = a;
    server.shutdown().await;
    // Every request on the other replica, with the first one gone.
    for _ in 0..3 {
        let (status, _, answer) = post(&client, &url(b.server.http_addr, "crm"), &call("call_tool", args.clone()), Some(&session)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["result"]["content"][0]["text"], "Ada", "{answer}");
    }
    // An unknown session is 404: the client initializes again.
    let (status, _, _) = post(&client, &url(b.server.http_addr, "crm"), &call("call_tool", args), Some("0123456789abcdef0123456789abcdef")).await;
    assert_eq!(status, 404);
    let _ = std::fs::remove_dir_all(&dir);
}
