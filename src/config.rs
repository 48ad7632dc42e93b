//! Command line and environment configuration, validated into the server's runtime config.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::clock::{Clock, SystemClock};
use crate::invoke::RouterConfig;
use crate::invoke::executor::ExecutorConfig;

#[derive(Debug, Parser)]
#[command(name = "toolrouter", version, about = "Routes LLM tool calls: grouped discovery, validation, executors, deferred records")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service.
    Serve(ServeArgs),
    /// Run the demo CRM executor used by the README walk-through.
    DemoExecutor {
        #[arg(long, default_value = "127.0.0.1:7000", env = "TOOLROUTER_DEMO_ADDR")]
        addr: SocketAddr,
    },
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// gRPC listen address.
    #[arg(long, default_value = "127.0.0.1:50051", env = "TOOLROUTER_GRPC_ADDR")]
    pub grpc_addr: SocketAddr,
    /// HTTP listen address (health and readiness).
    #[arg(long, default_value = "127.0.0.1:8080", env = "TOOLROUTER_HTTP_ADDR")]
    pub http_addr: SocketAddr,
    /// Store URL: sqlite://FILE (embedded, the default) or
    /// postgres://USER:PASSWORD@HOST:PORT/DB (shared by several replicas; plain TCP, no TLS yet).
    #[arg(long, default_value = "sqlite://toolrouter.db", env = "TOOLROUTER_STORE")]
    pub store: String,
    /// Largest accepted definition, in bytes.
    #[arg(long, default_value_t = 16 * 1024 * 1024, env = "TOOLROUTER_MAX_DEFINITION_BYTES")]
    pub max_definition_bytes: usize,
    /// Deadline of an executor call when neither tool nor source sets one, in milliseconds.
    #[arg(long, default_value_t = 30_000, env = "TOOLROUTER_DEFAULT_TIMEOUT_MS")]
    pub default_timeout_ms: u64,
    /// Runs idle this long (seconds) are forgotten.
    #[arg(long, default_value_t = 24 * 3600, env = "TOOLROUTER_RUN_IDLE_SECS")]
    pub run_idle_secs: u64,
    /// Turn auto-pinning off for every definition.
    #[arg(long, env = "TOOLROUTER_DISABLE_AUTO_PIN")]
    pub disable_auto_pin: bool,
    /// An operator secret for MCP header bindings: NAME=env:VAR or NAME=file:/path
    /// (repeatable; the environment variable takes a comma-separated list).
    #[arg(long = "secret", value_name = "NAME=env:VAR|NAME=file:PATH", env = "TOOLROUTER_SECRETS", value_delimiter = ',', value_parser = parse_secret)]
    pub secrets: Vec<(String, crate::mcp::SecretSource)>,
    /// A Host accepted by the MCP endpoint besides the loopback names, e.g. the Kubernetes
    /// Service name (repeatable; the environment variable takes a comma-separated list).
    #[arg(long = "mcp-allowed-host", value_name = "HOST[:PORT]", env = "TOOLROUTER_MCP_ALLOWED_HOSTS", value_delimiter = ',')]
    pub mcp_allowed_hosts: Vec<String>,
    /// A run's MCP session with a source is closed after this many idle seconds.
    #[arg(long, default_value_t = 900, env = "TOOLROUTER_MCP_SESSION_IDLE_SECS")]
    pub mcp_session_idle_secs: u64,
}

fn parse_secret(spec: &str) -> Result<(String, crate::mcp::SecretSource), String> {
    let one = crate::mcp::Secrets::parse([spec]).map_err(|e| e.to_string())?;
    let (name, _) = spec.split_once('=').ok_or("use NAME=env:VAR or NAME=file:/path")?;
    let source = one.source(name).cloned().ok_or("use NAME=env:VAR or NAME=file:/path")?;
    Ok((name.to_string(), source))
}

/// Everything the server needs, ready to use.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub store: String,
    pub max_definition_bytes: usize,
    pub executor: ExecutorConfig,
    pub router: RouterConfig,
    pub clock: Arc<dyn Clock>,
    /// How long shutdown waits for calls in flight.
    pub grace: Duration,
    pub mcp_client: crate::mcp::McpClientConfig,
    pub mcp_endpoint: crate::mcp::McpEndpointConfig,
    pub secrets: crate::mcp::Secrets,
}

impl ServerConfig {
    /// Loopback, ephemeral ports, an in-memory store: for tests and benchmarks.
    pub fn for_tests() -> Self {
        Self {
            grpc_addr: "127.0.0.1:0".parse().expect("address"),
            http_addr: "127.0.0.1:0".parse().expect("address"),
            store: "sqlite::memory:".into(),
            max_definition_bytes: 16 * 1024 * 1024,
            executor: ExecutorConfig::default(),
            router: RouterConfig::default(),
            clock: Arc::new(SystemClock),
            grace: Duration::from_secs(5),
            mcp_client: Default::default(),
            mcp_endpoint: Default::default(),
            secrets: Default::default(),
        }
    }
}

impl From<ServeArgs> for ServerConfig {
    fn from(a: ServeArgs) -> Self {
        Self {
            grpc_addr: a.grpc_addr,
            http_addr: a.http_addr,
            store: a.store,
            max_definition_bytes: a.max_definition_bytes,
            executor: ExecutorConfig { default_timeout: Duration::from_millis(a.default_timeout_ms), ..Default::default() },
            router: RouterConfig { run_idle: Duration::from_secs(a.run_idle_secs), auto_pin: !a.disable_auto_pin, ..Default::default() },
            clock: Arc::new(SystemClock),
            grace: Duration::from_secs(20),
            mcp_client: crate::mcp::McpClientConfig {
                session_idle: Duration::from_secs(a.mcp_session_idle_secs),
                default_timeout: Duration::from_millis(a.default_timeout_ms),
                ..Default::default()
            },
            mcp_endpoint: crate::mcp::McpEndpointConfig { allowed_hosts: a.mcp_allowed_hosts },
            secrets: {
                let mut s = crate::mcp::Secrets::default();
                for (name, source) in a.secrets {
                    s.insert(name, source);
                }
                s
            },
        }
    }
}

