//! Abuse all along the run. Slow clients (half an HTTP request head, a half-sent MCP POST,
//! a partial HTTP/2 preface, a gRPC stream that never sends its message): how long until the
//! server cut them off. Malformed requests (garbage bytes on both listeners, a body that is
//! not protobuf, arguments that are not JSON, broken JSON-RPC): what each got back.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Request, Status};
use toolrouter::pb;

use crate::Soak;
use crate::nodes::Node;

/// How long a slow client holds on before giving up on being cut off.
const HOLD_CAP: Duration = Duration::from_secs(60);

pub fn spawn(soak: Arc<Soak>) -> Vec<JoinHandle<()>> {
    let mut v: Vec<JoinHandle<()>> = SLOW.iter().map(|&kind| tokio::spawn(slow_client(soak.clone(), kind))).collect();
    v.push(tokio::spawn(malformed(soak)));
    v
}

const SLOW: [&str; 4] = ["half HTTP request head", "half-sent MCP POST", "partial HTTP/2 preface", "stalled gRPC stream"];

fn live_node(soak: &Soak, rng: &mut StdRng) -> Option<Arc<Node>> {
    let up: Vec<&Arc<Node>> = soak.nodes.iter().filter(|n| n.is_up()).collect();
    (!up.is_empty()).then(|| up[rng.random_range(0..up.len())].clone())
}

/// Opens a slow connection, then reads until the server closes it.
async fn slow_client(soak: Arc<Soak>, kind: &'static str) {
    let mut rng = StdRng::seed_from_u64(soak.args.seed + kind.len() as u64);
    while !soak.stop.is_cancelled() {
        let Some(node) = live_node(&soak, &mut rng) else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let addr = if kind.contains("HTTP/2") || kind.contains("gRPC") { node.grpc } else { node.http };
        let Ok(mut s) = TcpStream::connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let bytes = match kind {
            "half HTTP request head" => b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slo".to_vec(),
            "half-sent MCP POST" => format!(
                "POST /mcp/agents/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 400\r\n\r\n{{\"jsonrpc\":\"2.0\",",
                soak.agent
            )
            .into_bytes(),
            "partial HTTP/2 preface" => b"PRI * HTTP/2.0\r\n".to_vec(),
            _ => stalled_grpc_stream(&node),
        };
        let (started, starts) = (Instant::now(), node.starts.load(Ordering::SeqCst));
        if s.write_all(&bytes).await.is_err() {
            continue;
        }
        node.slow_clients.fetch_add(1, Ordering::SeqCst);
        let mut buf = [0u8; 4096];
        let cut = tokio::select! {
            r = async {
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return Some(true),
                        Ok(_) => {}
                    }
                }
            } => r,
            _ = tokio::time::sleep(HOLD_CAP) => Some(false),
            _ = soak.halt.cancelled() => None,
        };
        node.slow_clients.fetch_sub(1, Ordering::SeqCst);
        let Some(cut) = cut else { return };
        let held = started.elapsed().as_secs_f64();
        let mut st = soak.ledger.stats.lock().unwrap();
        if !node.is_up() || node.starts.load(Ordering::SeqCst) != starts {
            *st.counts.entry(format!("slow client cut by a replica stop: {kind}")).or_default() += 1;
        } else if cut {
            st.holds.entry(format!("{kind} ({})", if node.grpc == addr { "gRPC listener" } else { "HTTP listener" })).or_default().push(held);
        } else {
            *st.counts.entry(format!("slow client not cut within {} s: {kind}", HOLD_CAP.as_secs())).or_default() += 1;
        }
    }
}

/// The HTTP/2 preface, empty SETTINGS, and HEADERS opening a HandleToolCall stream whose
/// message never comes (HPACK literals, no Huffman).
fn stalled_grpc_stream(node: &Node) -> Vec<u8> {
    let mut block = Vec::new();
    for (k, v) in [
        (":method", "POST".to_string()),
        (":scheme", "http".into()),
        (":path", "/toolrouter.v1.Router/HandleToolCall".into()),
        (":authority", node.grpc.to_string()),
        ("content-type", "application/grpc".into()),
        ("te", "trailers".into()),
    ] {
        block.push(0);
        block.push(k.len() as u8);
        block.extend_from_slice(k.as_bytes());
        block.push(v.len() as u8);
        block.extend_from_slice(v.as_bytes());
    }
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // SETTINGS
    let len = block.len() as u32;
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, 1, 4, 0, 0, 0, 1]); // HEADERS, END_HEADERS, stream 1
    out.extend_from_slice(&block);
    out
}

/// Sends raw bytes as a gRPC message and reads the answer's bytes back.
#[derive(Clone, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }
    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let v = src.chunk().to_vec();
        src.advance(v.len());
        Ok(Some(v))
    }
}

const MALFORMED: [&str; 6] = [
    "garbage bytes to gRPC",
    "garbage bytes to HTTP",
    "undecodable protobuf",
    "arguments not JSON",
    "broken JSON-RPC",
    "JSON-RPC of the wrong shape",
];

/// A malformed request every ~40 ms, kinds in rotation, on a random live replica.
async fn malformed(soak: Arc<Soak>) {
    let mut rng = StdRng::seed_from_u64(soak.args.seed ^ 0xbad);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("HTTP client");
    let mut i = 0usize;
    while !soak.stop.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(rng.random_range(10..70))).await;
        let Some(node) = live_node(&soak, &mut rng) else { continue };
        let kind = MALFORMED[i % MALFORMED.len()];
        i += 1;
        let got = match kind {
            "garbage bytes to gRPC" | "garbage bytes to HTTP" => {
                let garbage: Vec<u8> = (0..rng.random_range(8..256)).map(|_| rng.random()).collect();
                raw_exchange(if kind.contains("gRPC") { node.grpc } else { node.http }, &garbage).await
            }
            "undecodable protobuf" => {
                let mut grpc = tonic::client::Grpc::new(node.channel.clone());
                let path = http::uri::PathAndQuery::from_static("/toolrouter.v1.Router/HandleToolCall");
                match grpc.ready().await {
                    Err(_) => "replica unreachable".into(),
                    Ok(()) => match grpc.unary(Request::new(vec![0xff, 0xff, 0xff, 0x0f, 0x12, 0x99]), path, RawCodec).await {
                        Ok(_) => "OK (!)".into(),
                        Err(s) => format!("{:?}", s.code()),
                    },
                }
            }
            "arguments not JSON" => {
                let req = pb::HandleToolCallRequest {
                    agent: Some(pb::AgentRef { agent_id: soak.agent.clone(), version: 0 }),
                    run: Some(pb::RunContext { run_id: format!("malformed-{}", i % 50), ..Default::default() }),
                    call: Some(pb::ToolCall {
                        tool_call_id: format!("m{i}"),
                        tool_name: "records__lookup".into(),
                        arguments_json: "{\"key\": 12,,".into(),
                    }),
                    ..Default::default()
                };
                match pb::router_client::RouterClient::new(node.channel.clone()).handle_tool_call(req).await {
                    Ok(r) => format!("answered {}", crate::checks::Answer::from_outcome(r.into_inner().outcome).kind()),
                    Err(s) => format!("{:?}", s.code()),
                }
            }
            _ => {
                let body =
                    if kind == "broken JSON-RPC" { "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/ca" } else { "{\"hello\": [1, 2, 3]}" };
                let r = http
                    .post(format!("http://{}/mcp/agents/{}", node.http, soak.agent))
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(body)
                    .send()
                    .await;
                match r {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let v: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap_or_default()).unwrap_or_default();
                        format!("HTTP {status} JSON-RPC {}", v["error"]["code"])
                    }
                    Err(_) => "replica unreachable".into(),
                }
            }
        };
        *soak.ledger.stats.lock().unwrap().malformed.entry(format!("{kind} → {got}")).or_default() += 1;
    }
}

/// Writes `bytes` on a new connection and says what came back within 5 s.
async fn raw_exchange(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    let Ok(mut s) = TcpStream::connect(addr).await else { return "replica unreachable".into() };
    if s.write_all(bytes).await.is_err() {
        return "closed while sending".into();
    }
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    let first_line = |b: &[u8]| String::from_utf8_lossy(b).lines().next().unwrap_or_default().chars().take(40).collect::<String>();
    match read {
        Err(_) if buf.is_empty() => "nothing within 5 s".into(),
        Err(_) => format!("{} bytes, still open", buf.len()),
        Ok(_) if buf.is_empty() => "closed".into(),
        Ok(_) if buf.starts_with(b"HTTP/") => format!("{}, closed", first_line(&buf)),
        // HTTP/2 frames: SETTINGS then GOAWAY.
        Ok(_) => "HTTP/2 frames (GOAWAY), closed".into(),
    }
}
