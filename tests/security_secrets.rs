//! Secrets (SPEC §9): API keys and bearer tokens never appear in responses, errors, logs or
//! spans. Every log line and span (with its fields, at trace level for every crate, in the human and the JSON
//! format) is captured into a buffer while a session exercises success and failure paths,
//! then the buffer and every answer are searched for the planted secrets.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::json;
use toolrouter::pb;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;

const KEY: &str = "sk-planted-valid-key-4d2e8b1f";
const WRONG: &str = "sk-planted-wrong-key-97c3a0e5";
const IN_FILE: &str = "sk-planted-in-key-file-1b6f";

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buffer {
    type Writer = Buffer;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn assert_clean(what: &str, text: &str) {
    for secret in [KEY, WRONG, IN_FILE] {
        assert!(!text.contains(secret), "{what} contains the planted secret {secret:?}");
    }
}

#[tokio::test]
async fn planted_keys_appear_in_no_response_error_log_or_span() {
    let buf = Buffer::default();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("trace"))
        .with(tracing_subscriber::fmt::layer().with_ansi(false).with_span_events(FmtSpan::FULL).with_writer(buf.clone()))
        .with(tracing_subscriber::fmt::layer().json().with_span_events(FmtSpan::FULL).with_current_span(true).with_writer(buf.clone()));
    let _guard = tracing::subscriber::set_default(subscriber);

    let exec = spawn_executor(Behaviour::Echo).await;
    let file = KeyFile::new(&key_file_json(&[(KEY, "acme", json!({"user_id": "svc-acme"}))]));
    let s = TestServer::start_with(config_with_keys(&file)).await;
    let mut answers: Vec<String> = Vec::new();

    // Success paths: registry, discovery, an executed call, an approval.
    let mut def = crm_definition(&exec.endpoint());
    let mut refund = tool("refund", "Refund a payment.", json!({"type": "object"}));
    refund.requires_approval = true;
    function_of(&mut def.sources[0]).tools.push(refund);
    answers.push(format!("{:?}", s.create_as(KEY, "crm", def).await));
    let mut disc = s.discovery_as(KEY);
    answers.push(format!(
        "{:?}",
        disc.discover_tools(pb::DiscoverToolsRequest { agent: Some(agent_ref("crm")), query: "customer".into(), ..Default::default() }).await
    ));
    let call = |tool: &str| json!({"group": "crm", "tool": tool, "arguments": {"customer_id": 42}});
    answers.push(format!("{:?}", s.call_as(KEY, "crm", run_ctx("r1"), "c1", "call_tool", call("customer_name")).await));
    let deferred = s.call_as(KEY, "crm", run_ctx("r1"), "c2", "call_tool", call("refund")).await.unwrap();
    answers.push(format!("{deferred:?}"));
    let approve = pb::resolve_deferred_request::Resolution::Approve(pb::Approve::default());
    let id = deferred_of(&deferred).deferred_id;
    answers.push(format!(
        "{:?}",
        s.router_as(KEY).resolve_deferred(pb::ResolveDeferredRequest { deferred_id: id, resolution: Some(approve), ..Default::default() }).await
    ));
    answers.push(format!("{:?}", s.router_as(KEY).list_deferred(pb::ListDeferredRequest { agent_id: "crm".into(), ..Default::default() }).await));

    // Failure paths: a wrong key, the right key under another scheme, a token in place of the
    // agent name, errors with the right key.
    answers.push(format!("{:?}", s.registry_as(WRONG).list_agents(pb::ListAgentsRequest::default()).await));
    let mut basic = tonic::Request::new(pb::ListAgentsRequest::default());
    basic.metadata_mut().insert("authorization", format!("Basic {KEY}").parse().unwrap());
    answers.push(format!("{:?}", s.registry().list_agents(basic).await));
    answers.push(format!("{:?}", s.call_as(WRONG, "crm", run_ctx("r1"), "c3", "call_tool", call("customer_name")).await));
    answers.push(format!("{:?}", s.registry_as(KEY).get_agent_version(pb::GetAgentVersionRequest { agent_id: "nobody".into(), version: 0 }).await));
    answers.push(format!(
        "{:?}",
        s.call_as(KEY, "crm", run_ctx("r1"), "c4", "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": "x"}}))
            .await
    ));

    // A key file with a key pasted into the wrong field is rejected (and logged), then fixed.
    file.replace(&format!(r#"[{{"tenant": "acme", "sha256": "{IN_FILE}"}}]"#));
    for _ in 0..250 {
        if buf.text().contains("API key file rejected") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(buf.text().contains("API key file rejected"), "the rejection was logged");
    answers.push(format!("{:?}", s.server.auth));

    let logs = buf.text();
    assert!(logs.contains("toolrouter.v1.Router/HandleToolCall"), "spans were captured");
    assert!(logs.contains("execute_tool"), "execution spans were captured");
    assert_clean("the logs and spans", &logs);
    for a in &answers {
        assert_clean("an answer", a);
    }
    let metadata = format!("{:?}", exec.exec.last_metadata.lock().unwrap());
    assert_clean("the executor's metadata", &metadata);
    assert!(!metadata.contains("authorization"), "{metadata}");
}
