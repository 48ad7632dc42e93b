//! The test harness itself: a panic in an in-process server or fake executor fails the test
//! that owns it, with the panic's message (tests/common/panics.rs), and only that test.

mod common;
#[path = "mcp/support.rs"]
mod support;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::panics::{RERAISED, payload_text};
use common::*;
use serde_json::json;
use support::{McpServer, mcp_tool};
use tonic::Code;
use toolrouter::pb;
use toolrouter::pb::tool_executor_client::ToolExecutorClient;

/// The message `f` panics with; fails if it does not panic.
fn panic_of(f: impl FnOnce()) -> String {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => panic!("expected a panic, none happened"),
        Err(payload) => payload_text(&*payload),
    }
}

fn call_crm(id: u64) -> serde_json::Value {
    json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": id}})
}

#[tokio::test]
async fn a_fake_executor_panic_is_answered_internal_and_re_raised_with_its_message_when_the_handle_drops() {
    let exec = spawn_executor(Behaviour::Panic("the handler blew up".into())).await;
    let mut client = ToolExecutorClient::connect(exec.endpoint()).await.expect("connect to the fake executor");
    let status =
        client.execute(pb::ExecuteRequest { tool: "customer_name".into(), arguments_json: "{}".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert!(status.message().contains("the handler blew up"), "{status:?}");

    let text = panic_of(|| drop(exec));
    let thread = std::thread::current().name().expect("libtest names test threads").to_string();
    assert!(text.starts_with(RERAISED), "{text}");
    assert!(text.contains("the fake executor on 127.0.0.1:") && text.contains("saw 1 panic(s)"), "{text}");
    assert!(text.contains(&format!("thread '{thread}' panicked at tests/common/mod.rs:")), "{text}");
    assert!(text.ends_with("the handler blew up"), "{text}");
}

/// Without the harness this test would pass: the router turns the failed call into an error
/// result, which is what the test asserts.
#[tokio::test]
#[should_panic(expected = "panicked in an in-process server of this test (the toolrouter server (TestServer) saw")]
async fn an_executor_panic_behind_the_router_fails_the_test_that_owns_it() {
    let exec = spawn_executor(Behaviour::Panic("the executor blew up mid-call".into())).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    assert!(is_error, "{content}");
    assert_eq!(exec.calls(), 1);
}

#[test]
fn the_message_the_should_panic_test_expects_is_the_re_raise_prefix() {
    assert_eq!(RERAISED, "panicked in an in-process server of this test");
}

#[tokio::test]
async fn a_panic_on_any_thread_of_the_tests_runtime_is_re_raised_by_every_server_handle() {
    let s = TestServer::start().await;
    let mcp = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let exec = spawn_executor(Behaviour::Echo).await;
    let joined = tokio::spawn(async { panic!("a task of this test panicked") }).await;
    assert!(joined.expect_err("the task panicked").is_panic());
    let joined = tokio::task::spawn_blocking(|| panic!("a blocking task of this test panicked")).await;
    assert!(joined.expect_err("the blocking task panicked").is_panic());

    for (what, text) in [
        ("the toolrouter server (TestServer)", panic_of(|| drop(s))),
        ("the fake MCP server on", panic_of(|| drop(mcp))),
        ("the fake executor on", panic_of(|| drop(exec))),
    ] {
        assert!(text.contains(what) && text.contains("saw 2 panic(s)"), "{text}");
        assert!(text.contains("a task of this test panicked") && text.contains("a blocking task of this test panicked"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_multi_thread_runtime_a_panic_on_a_worker_thread_is_re_raised() {
    let exec = spawn_executor(Behaviour::Panic("a worker's handler blew up".into())).await;
    let mut client = ToolExecutorClient::connect(exec.endpoint()).await.expect("connect to the fake executor");
    let status = client.execute(pb::ExecuteRequest { tool: "t".into(), arguments_json: "{}".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    let text = panic_of(|| drop(exec));
    assert!(text.contains("a worker's handler blew up"), "{text}");
}

#[tokio::test]
async fn servers_without_panics_drop_cleanly_after_serving_calls() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let mcp = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let s = TestServer::start().await;
    let mut def = crm_definition(&exec.endpoint());
    def.sources.push(pb::ToolSource {
        id: "docs".into(),
        kind: Some(pb::tool_source::Kind::Mcp(pb::McpSource { url: mcp.url(), ..Default::default() })),
        ..Default::default()
    });
    def.groups.get_mut("crm").expect("the crm group").source_ids.push("docs".into());
    s.create("crm", def).await;
    assert_eq!(s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await, (json!("Ada"), false));
    let (content, is_error) = s.call_result("crm", "r1", "c2", "call_tool", json!({"group": "crm", "tool": "lookup", "arguments": {}})).await;
    assert!(!is_error, "{content}");
    assert_eq!((exec.calls(), mcp.calls().len()), (1, 1), "both servers served a call");

    assert!(catch_unwind(AssertUnwindSafe(|| drop((s, mcp, exec)))).is_ok(), "no panic to re-raise");
}

#[tokio::test]
async fn a_panic_in_another_tests_runtime_is_not_re_raised_here() {
    let exec = spawn_executor(Behaviour::Echo).await;
    // Another test: its own thread and runtime, whose server task panics.
    std::thread::Builder::new()
        .name("another test".into())
        .spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
            let joined = rt.block_on(async { tokio::spawn(async { panic!("another test's server panicked") }).await });
            assert!(joined.expect_err("the task panicked").is_panic());
        })
        .expect("spawn")
        .join()
        .expect("the other test's thread ends normally");
    assert!(catch_unwind(AssertUnwindSafe(|| drop(exec))).is_ok(), "another test's panic is not this test's");
}

#[tokio::test]
async fn a_test_that_is_failing_already_keeps_its_own_message_instead_of_aborting() {
    let exec = spawn_executor(Behaviour::Panic("the handler blew up".into())).await;
    let mut client = ToolExecutorClient::connect(exec.endpoint()).await.expect("connect to the fake executor");
    assert!(client.execute(pb::ExecuteRequest::default()).await.is_err());
    // The handle is dropped while this panic unwinds: it prints what it saw, a second panic
    // would abort the whole test binary.
    let text = panic_of(move || {
        let _exec = exec;
        panic!("the test's own assertion failed");
    });
    assert_eq!(text, "the test's own assertion failed");
}
