//! Hostile clients are cut off by limits (SPEC §10): request heads and first bytes under a
//! deadline, kept-alive connections closed when idle, a cap on open connections, metrics
//! that can leave the public listener or require a token.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolrouter::config::ServerConfig;

fn config(header_timeout: Duration, max_connections: usize) -> ServerConfig {
    let mut cfg = ServerConfig::for_tests();
    cfg.listen = toolrouter::listen::ListenLimits { max_connections, first_bytes: header_timeout, header_timeout };
    cfg
}

/// Waits for the server to close the connection (a read of 0 bytes or an error); how long it took.
async fn closed_after(stream: &mut TcpStream, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(limit, stream.read(&mut buf)).await {
            Err(_) => panic!("still open after {limit:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let mut req = reqwest::Client::new().get(format!("http://{addr}{path}"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("GET");
    (r.status().as_u16(), r.text().await.unwrap_or_default())
}

#[tokio::test]
async fn an_http_request_head_not_finished_in_time_closes_its_connection() {
    let s = TestServer::start_with(config(Duration::from_millis(500), 64)).await;
    let mut slow = TcpStream::connect(s.server.http_addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await.unwrap();
    closed_after(&mut slow, Duration::from_secs(5)).await;
    assert_eq!(get(s.server.http_addr, "/healthz", None).await.0, 200, "others are served");
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_on_both_listeners() {
    let s = TestServer::start_with(config(Duration::from_millis(500), 64)).await;
    for addr in [s.server.http_addr, s.server.grpc_addr] {
        let mut silent = TcpStream::connect(addr).await.unwrap();
        closed_after(&mut silent, Duration::from_secs(5)).await;
    }
}

#[tokio::test]
async fn a_grpc_connection_that_sends_half_the_http2_preface_is_closed() {
    let s = TestServer::start_with(config(Duration::from_millis(500), 64)).await;
    let mut half = TcpStream::connect(s.server.grpc_addr).await.unwrap();
    half.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    closed_after(&mut half, Duration::from_secs(5)).await;
}

/// A server whose drain may last 60 s, with no call in flight.
async fn draining_server() -> TestServer {
    let mut cfg = config(Duration::from_secs(30), 64);
    cfg.grace = Duration::from_secs(60);
    TestServer::start_with(cfg).await
}

#[tokio::test]
async fn a_stalled_grpc_request_does_not_hold_the_shutdown_for_the_grace_period() {
    let s = draining_server().await;
    let tcp = TcpStream::connect(s.server.grpc_addr).await.unwrap();
    let (mut h2, connection) = h2::client::handshake(tcp).await.expect("HTTP/2");
    tokio::spawn(connection);
    let req = http::Request::post(format!("http://{}/toolrouter.v1.Router/HandleToolCall", s.server.grpc_addr))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    // Headers sent, the message never: the request is never admitted.
    let (_response, _stalled_body) = h2.send_request(req, false).expect("stream opened");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let TestServer { server, .. } = s;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), server.shutdown()).await.expect("shutdown ends");
    assert!(started.elapsed() < Duration::from_secs(10), "held for {:?} by a request that never arrived", started.elapsed());
}

#[tokio::test]
async fn a_stalled_mcp_body_is_not_a_request_in_flight_and_does_not_hold_the_shutdown() {
    let s = draining_server().await;
    let mut stalled = TcpStream::connect(s.server.http_addr).await.unwrap();
    stalled
        .write_all(b"POST /mcp/agents/crm HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(s.server.in_flight(), 0, "a body still arriving is not admitted");
    let TestServer { server, .. } = s;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), server.shutdown()).await.expect("shutdown ends");
    assert!(started.elapsed() < Duration::from_secs(10), "held for {:?} by a body that never arrived", started.elapsed());
}

#[tokio::test]
async fn a_kept_alive_connection_idle_past_the_header_timeout_is_closed() {
    let s = TestServer::start_with(config(Duration::from_millis(500), 64)).await;
    let mut conn = TcpStream::connect(s.server.http_addr).await.unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 512];
    let n = conn.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    closed_after(&mut conn, Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_listener_at_its_connection_limit_closes_new_connections_and_serves_those_it_has() {
    let s = TestServer::start_with(config(Duration::from_secs(10), 2)).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(s.server.http_addr).await.unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
        let mut buf = [0u8; 256];
        assert!(c.read(&mut buf).await.unwrap() > 0);
        held.push(c);
    }
    let mut refused = TcpStream::connect(s.server.http_addr).await.unwrap();
    closed_after(&mut refused, Duration::from_secs(5)).await;
    // A place frees up when a connection closes.
    drop(held.pop());
    let mut served = false;
    for _ in 0..50 {
        let mut c = TcpStream::connect(s.server.http_addr).await.unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut buf = [0u8; 256];
        if matches!(c.read(&mut buf).await, Ok(n) if n > 0) {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served, "a freed place is given to a new connection");
}

#[tokio::test]
async fn with_hundreds_of_slow_clients_open_normal_calls_still_complete() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    let mut slow = Vec::new();
    for i in 0..300 {
        let addr = if i % 2 == 0 { s.server.http_addr } else { s.server.grpc_addr };
        let mut c = TcpStream::connect(addr).await.unwrap();
        if i % 2 == 0 {
            c.write_all(b"POST /mcp/agents/crm HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
        }
        slow.push(c);
    }
    for i in 0..20 {
        let (content, is_error) = s
            .call_result(
                "crm",
                "r1",
                &format!("c{i}"),
                "call_tool",
                serde_json::json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}}),
            )
            .await;
        assert!(!is_error && content == "Ada", "{content}");
    }
    assert_eq!(get(s.server.http_addr, "/readyz", None).await.0, 200);
}

#[tokio::test]
async fn metrics_can_move_to_the_admin_listener_and_require_a_token() {
    use sha2::Digest;
    let mut cfg = ServerConfig::for_tests();
    cfg.admin_addr = Some("127.0.0.1:0".parse().unwrap());
    cfg.metrics_token = Some(sha2::Sha256::digest(b"scrape-me").into());
    let s = TestServer::start_with(cfg).await;
    let admin = s.server.admin_addr.expect("an admin listener");
    assert_eq!(get(s.server.http_addr, "/metrics", None).await.0, 404, "not on the public listener");
    assert_eq!(get(s.server.http_addr, "/healthz", None).await.0, 200);
    assert_eq!(get(admin, "/metrics", None).await.0, 401);
    assert_eq!(get(admin, "/metrics", Some("wrong")).await.0, 401);
    let (status, body) = get(admin, "/metrics", Some("scrape-me")).await;
    assert_eq!(status, 200);
    assert!(body.contains("toolrouter_"), "{body}");
    assert_eq!(get(admin, "/readyz", None).await.0, 200);
}
