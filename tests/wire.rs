//! Faults of the wire itself get the right codes (the endurance issue's item 9): a request
//! message that is not protobuf is INVALID_ARGUMENT, a passed deadline DEADLINE_EXCEEDED
//! every time, malformed JSON to the MCP endpoint a JSON-RPC parse error with HTTP 400, an
//! unknown agent at `initialize` a clear error that is not logged as a server fault, and
//! closing an MCP session 204.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use serde_json::{Value, json};

/// Every WARN or ERROR event of this test binary (one process-wide subscriber).
fn serious_logs() -> Arc<Mutex<Vec<String>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<String>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let writer = move || Capture(sink.clone());
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(false))
            .with(tracing_subscriber::filter::LevelFilter::WARN);
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        logs
    })
    .clone()
}

struct Capture(Arc<Mutex<Vec<String>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().push(String::from_utf8_lossy(buf).into_owned());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One raw gRPC request over HTTP/2: the response's `grpc-status`, from the headers (a
/// trailers-only answer) or the trailers.
async fn raw_grpc(addr: SocketAddr, path: &str, message: &[u8], timeout: Option<&str>) -> i32 {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(connection);
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(t) = timeout {
        req = req.header("grpc-timeout", t);
    }
    let (response, mut send) = client.send_request(req.body(()).unwrap(), false).expect("send");
    let mut frame = vec![0u8];
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(message);
    send.send_data(Bytes::from(frame), true).expect("body");
    let response = response.await.expect("response");
    let status = |h: &http::HeaderMap| h.get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    if let Some(code) = status(response.headers()) {
        return code;
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        chunk.expect("data");
    }
    let trailers = body.trailers().await.expect("trailers").expect("trailers sent");
    status(&trailers).expect("grpc-status in the trailers")
}

#[tokio::test]
async fn a_request_message_that_is_not_protobuf_is_invalid_argument() {
    let s = TestServer::start().await;
    let garbage = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x08];
    let code = raw_grpc(s.server.grpc_addr, "/toolrouter.v1.Router/HandleToolCall", &garbage, None).await;
    assert_eq!(code, tonic::Code::InvalidArgument as i32);
    let code = raw_grpc(s.server.grpc_addr, "/toolrouter.v1.AgentRegistry/CreateAgentVersion", &garbage, None).await;
    assert_eq!(code, tonic::Code::InvalidArgument as i32);
}

#[tokio::test]
async fn a_passed_deadline_is_deadline_exceeded_every_time() {
    let exec = spawn_executor(Behaviour::Sleep(Duration::from_secs(2))).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    let calls = (0..20).map(|i| {
        let call = toolrouter::pb::HandleToolCallRequest {
            agent: Some(agent_ref("crm")),
            run: Some(run_ctx("r1")),
            call: Some(toolrouter::pb::ToolCall {
                tool_call_id: format!("c{i}"),
                tool_name: "call_tool".into(),
                arguments_json: json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}}).to_string(),
            }),
            ..Default::default()
        };
        let message = prost::Message::encode_to_vec(&call);
        let addr = s.server.grpc_addr;
        tokio::spawn(async move { raw_grpc(addr, "/toolrouter.v1.Router/HandleToolCall", &message, Some("100m")).await })
    });
    for code in futures::future::join_all(calls).await {
        assert_eq!(code.expect("call"), tonic::Code::DeadlineExceeded as i32);
    }
}

fn mcp_url(s: &TestServer, agent: &str) -> String {
    format!("http://{}/mcp/agents/{agent}", s.server.http_addr)
}

async fn post(url: &str, body: &str, session: Option<&str>) -> (u16, String, http::HeaderMap) {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(id) = session {
        req = req.header("mcp-session-id", id);
    }
    let r = req.send().await.expect("POST");
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, r.text().await.expect("body"), headers)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

#[tokio::test]
async fn malformed_json_to_the_mcp_endpoint_is_a_parse_error_with_http_400() {
    let s = TestServer::start().await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    let (status, body, _) = post(&mcp_url(&s, "crm"), "{not json", None).await;
    assert_eq!(status, 400, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!((answer["jsonrpc"].as_str(), answer["error"]["code"].as_i64()), (Some("2.0"), Some(-32700)), "{answer}");
    let (status, body, _) = post(&mcp_url(&s, "crm"), r#"{"jsonrpc":"2.0","id":1,"result":"not a request"}"#.trim_end_matches('}'), None).await;
    assert_eq!(status, 400, "{body}");
    let (status, body, _) = post(&mcp_url(&s, "crm"), r#"{"hello":"world"}"#, None).await;
    assert_eq!(status, 400, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(answer["error"]["code"], -32600, "valid JSON, not a JSON-RPC message: {answer}");
}

#[tokio::test]
async fn initialize_for_an_unknown_agent_is_a_clear_error_and_no_server_fault_in_the_logs() {
    let logs = serious_logs();
    let s = TestServer::start().await;
    let (status, body, _) = post(&mcp_url(&s, "nobody"), INITIALIZE, None).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["id"], 1);
    assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("agent \"nobody\" not found"), "{answer}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let logs = logs.lock().unwrap();
    assert!(!logs.iter().any(|l| l.contains("ERROR")), "{logs:?}");
}

#[tokio::test]
async fn closing_an_mcp_session_answers_204() {
    let s = TestServer::start().await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    let (status, body, headers) = post(&mcp_url(&s, "crm"), INITIALIZE, None).await;
    assert_eq!(status, 200, "{body}");
    let session = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("a session").to_string();
    let closed = reqwest::Client::new().delete(mcp_url(&s, "crm")).header("mcp-session-id", &session).send().await.expect("DELETE");
    assert_eq!(closed.status().as_u16(), 204);
}
