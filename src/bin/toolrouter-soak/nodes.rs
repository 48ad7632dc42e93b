//! Replicas: `toolrouter serve` processes on fixed loopback ports (a restarted replica comes
//! back on the same address), logs appended to files, pid files for soak.sh's trap, kill -9,
//! SIGTERM, restart, readiness and peak RSS; and the attempts in flight on each, for chaos
//! and the SIGTERM check.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tonic::transport::{Channel, Endpoint};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Store {
    Pg,
    Lite,
}

impl Store {
    pub fn label(self) -> &'static str {
        match self {
            Store::Pg => "pg",
            Store::Lite => "sqlite",
        }
    }
}

pub struct Node {
    pub name: &'static str,
    pub store: Store,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    pub channel: Channel,
    /// Routable: running, ready, not being stopped by chaos.
    up: AtomicBool,
    /// The process is ours to stop or restart (chaos or the end): the watchdog stays away.
    pub managed: AtomicBool,
    proc: Mutex<Option<Child>>,
    command: Vec<String>,
    binary: PathBuf,
    work: PathBuf,
    pub peak_rss_kib: AtomicU64,
    pub starts: AtomicU64,
    /// Slow (abusive) clients connected right now.
    pub slow_clients: AtomicU64,
    /// Attempts in flight: id → (started, slow tool).
    inflight: Mutex<HashMap<u64, (Instant, bool)>>,
}

static ATTEMPT: AtomicU64 = AtomicU64::new(1);

/// Counts an attempt in flight on a node until dropped.
pub struct AttemptGuard<'a> {
    pub id: u64,
    node: &'a Node,
}

impl Drop for AttemptGuard<'_> {
    fn drop(&mut self) {
        self.node.inflight.lock().unwrap().remove(&self.id);
    }
}

impl Node {
    pub fn new(name: &'static str, store: Store, port: u16, binary: &Path, store_url: &str, extra: &[String], work: &Path) -> std::sync::Arc<Node> {
        let grpc: SocketAddr = ([127, 0, 0, 1], port).into();
        let http: SocketAddr = ([127, 0, 0, 1], port + 1).into();
        let mut command = vec![
            "serve".to_string(),
            "--grpc-addr".into(),
            grpc.to_string(),
            "--http-addr".into(),
            http.to_string(),
            "--store".into(),
            store_url.to_string(),
        ];
        command.extend(extra.iter().cloned());
        let channel = Endpoint::from_shared(format!("http://{grpc}"))
            .expect("endpoint")
            .connect_timeout(Duration::from_secs(1))
            .tcp_nodelay(true)
            .connect_lazy();
        std::sync::Arc::new(Node {
            name,
            store,
            grpc,
            http,
            channel,
            up: AtomicBool::new(false),
            managed: AtomicBool::new(true),
            proc: Mutex::new(None),
            command,
            binary: binary.to_path_buf(),
            work: work.to_path_buf(),
            peak_rss_kib: AtomicU64::new(0),
            starts: AtomicU64::new(0),
            slow_clients: AtomicU64::new(0),
            inflight: Mutex::default(),
        })
    }

    pub fn log_path(&self) -> PathBuf {
        self.work.join(format!("replica-{}.log", self.name))
    }

    pub fn err_path(&self) -> PathBuf {
        self.work.join(format!("replica-{}.err", self.name))
    }

    fn pid_path(&self) -> PathBuf {
        self.work.join("pids").join(format!("{}.pid", self.name))
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::SeqCst)
    }

    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }

    pub fn pid(&self) -> Option<u32> {
        self.proc.lock().unwrap().as_ref().map(|c| c.id())
    }

    /// Starts the process (logs appended), writes its pid file. Not routable until ready.
    pub fn spawn(&self) -> Result<u32> {
        let append = |p: PathBuf| OpenOptions::new().create(true).append(true).open(&p).with_context(|| format!("opening {}", p.display()));
        let child = Command::new(&self.binary)
            .args(&self.command)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(append(self.log_path())?)
            .stderr(append(self.err_path())?)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        let pid = child.id();
        std::fs::write(self.pid_path(), format!("{pid}\n"))?;
        *self.proc.lock().unwrap() = Some(child);
        self.starts.fetch_add(1, Ordering::SeqCst);
        Ok(pid)
    }

    /// Waits until `/readyz` answers 200, then makes the node routable.
    pub async fn wait_ready(&self, limit: Duration) -> Result<Duration> {
        let started = Instant::now();
        let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build()?;
        let url = format!("http://{}/readyz", self.http);
        while started.elapsed() < limit {
            if let Some(status) = self.exited() {
                bail!("replica {} exited while starting ({status})", self.name);
            }
            if http.get(&url).send().await.is_ok_and(|r| r.status().is_success()) {
                self.set_up(true);
                return Ok(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("replica {} not ready after {limit:?}", self.name)
    }

    /// The exit status if the process has exited (reaped).
    pub fn exited(&self) -> Option<String> {
        let mut proc = self.proc.lock().unwrap();
        match proc.as_mut().map(|c| c.try_wait()) {
            Some(Ok(Some(status))) => Some(status.to_string()),
            None => Some("not running".into()),
            _ => None,
        }
    }

    /// kill -9, reaped.
    pub fn kill_now(&self) {
        self.set_up(false);
        if let Some(mut c) = self.proc.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn sigterm(&self) {
        self.set_up(false);
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        }
    }

    /// Waits for the process to exit; kill -9 after `limit`. Returns how long it took and
    /// whether it exited by itself.
    pub async fn wait_exit(&self, limit: Duration) -> (Duration, bool) {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self.exited().is_some() {
                return (started.elapsed(), true);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill_now();
        (started.elapsed(), false)
    }

    pub async fn stop_gracefully(&self, limit: Duration) {
        self.managed.store(true, Ordering::SeqCst);
        self.sigterm();
        self.wait_exit(limit).await;
        self.kill_now();
    }

    /// Peak RSS of the running process (VmHWM), kept as the node's maximum.
    pub fn sample_rss(&self) {
        let Some(pid) = self.pid() else { return };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return };
        if let Some(kib) = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()) {
            self.peak_rss_kib.fetch_max(kib, Ordering::SeqCst);
        }
    }

    pub fn begin(&self, slow: bool) -> AttemptGuard<'_> {
        let id = ATTEMPT.fetch_add(1, Ordering::SeqCst);
        self.inflight.lock().unwrap().insert(id, (Instant::now(), slow));
        AttemptGuard { id, node: self }
    }

    pub fn slow_in_flight(&self) -> usize {
        self.inflight.lock().unwrap().values().filter(|(_, slow)| *slow).count()
    }

    /// Attempts that started at least `age` ago: surely in the replica's hands.
    pub fn in_flight_older_than(&self, age: Duration) -> Vec<u64> {
        self.inflight.lock().unwrap().iter().filter(|(_, (t, _))| t.elapsed() >= age).map(|(id, _)| *id).collect()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill_now();
    }
}
