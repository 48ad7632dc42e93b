//! Fake executors: real tonic `ToolExecutor` servers, each on its own runtime and thread so
//! a crash (the runtime dropped) cuts its connections mid-call; a restart binds the same
//! port. Every execution is recorded by (run_id, tool_call_id) when it arrives.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tonic::{Request, Response, Status};
use toolrouter::pb;
use toolrouter::pb::tool_executor_server::{ToolExecutor, ToolExecutorServer};

/// Executions seen, by (run_id, tool_call_id): tool and count.
pub type Executions = HashMap<(String, String), (String, u32)>;

#[derive(Clone, Default)]
struct Recorder {
    executions: Arc<Mutex<Executions>>,
    inflight: Arc<AtomicUsize>,
}

struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tonic::async_trait]
impl ToolExecutor for Recorder {
    async fn execute(&self, req: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        let r = req.into_inner();
        let run = r.run.as_ref().map(|r| r.run_id.clone()).unwrap_or_default();
        self.executions.lock().unwrap().entry((run, r.tool_call_id.clone())).or_insert((r.tool.clone(), 0)).1 += 1;
        self.inflight.fetch_add(1, Ordering::SeqCst);
        let _inflight = InFlight(self.inflight.clone());
        let args: serde_json::Value = serde_json::from_str(&r.arguments_json).unwrap_or_default();
        let ms = args["ms"].as_u64().unwrap_or(0).min(10_000);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let content = serde_json::json!({"tool": r.tool, "key": args["key"], "call": r.tool_call_id});
        Ok(Response::new(pb::ExecuteResponse { content_json: content.to_string(), is_error: false }))
    }

    async fn list_tools(&self, _req: Request<pb::ListToolsRequest>) -> Result<Response<pb::ListToolsResponse>, Status> {
        Ok(Response::new(pb::ListToolsResponse { tools: Vec::new() }))
    }
}

/// One executor: its port, recorder and the runtime serving it (None while crashed).
pub struct Executor {
    pub addr: SocketAddr,
    recorder: Recorder,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    pub crashes: AtomicUsize,
}

impl Executor {
    fn serve(&self) -> Result<()> {
        // Bound first: a runtime dropped on the error path would panic inside the harness's own.
        let std_listener = bind_reusing(self.addr).with_context(|| format!("binding the fake executor to {}", self.addr))?;
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("soak-executor").enable_all().build()?;
        let svc = ToolExecutorServer::new(self.recorder.clone());
        rt.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = tonic::transport::Server::builder().add_service(svc).serve_with_incoming(incoming).await;
        });
        *self.runtime.lock().unwrap() = Some(rt);
        Ok(())
    }

    /// Drops the runtime: the listener and every connection go, calls in flight are cut.
    pub fn crash(&self) {
        if let Some(rt) = self.runtime.lock().unwrap().take() {
            // Its tasks are dropped with it: their in-flight guards count themselves out.
            rt.shutdown_background();
            self.crashes.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Serves again on the same port (retrying while the port is still held).
    pub async fn restart(&self) -> Result<()> {
        let mut last = None;
        for _ in 0..50 {
            match self.serve() {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(last.expect("an error"))
    }

    pub fn in_flight(&self) -> usize {
        self.recorder.inflight.load(Ordering::SeqCst)
    }
}

fn bind_reusing(addr: SocketAddr) -> Result<std::net::TcpListener> {
    // tokio's TcpSocket sets SO_REUSEADDR: a restart binds while old connections linger.
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    let listener = socket.listen(1024)?;
    let std = listener.into_std()?;
    Ok(std)
}

pub struct Executors {
    pub list: Vec<Arc<Executor>>,
}

impl Executors {
    pub fn start(ports: &[u16]) -> Result<Executors> {
        let mut list = Vec::new();
        for &port in ports {
            let e = Arc::new(Executor {
                addr: ([127, 0, 0, 1], port).into(),
                recorder: Recorder::default(),
                runtime: Mutex::new(None),
                crashes: AtomicUsize::new(0),
            });
            e.serve()?;
            list.push(e);
        }
        Ok(Executors { list })
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.list.iter().map(|e| format!("http://{}", e.addr)).collect()
    }

    /// Every execution of every executor.
    pub fn executions(&self) -> Executions {
        let mut all = Executions::new();
        for e in &self.list {
            for (k, (tool, n)) in e.recorder.executions.lock().unwrap().iter() {
                all.entry(k.clone()).or_insert((tool.clone(), 0)).1 += n;
            }
        }
        all
    }

    pub fn shutdown(&self) {
        for e in &self.list {
            if let Some(rt) = e.runtime.lock().unwrap().take() {
                rt.shutdown_background();
            }
        }
    }
}
