//! Command line and environment configuration, validated into the server's runtime config.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::clock::{Clock, SystemClock};
use crate::invoke::RouterConfig;
use crate::upstream::UpstreamConfig;

/// Seven days.
pub const DEFAULT_RETENTION_SECS: u64 = 7 * 24 * 3600;

#[derive(Debug, Parser)]
#[command(name = "toolrouter", version, about = "Routes LLM tool calls: grouped discovery, validation, executors, deferred records")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once at start-up
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
    /// Largest tool result kept, in bytes of its JSON: a larger one is dropped and the model
    /// is told the tool ran (`result_too_large`).
    #[arg(long, default_value_t = 4 * 1024 * 1024, env = "TOOLROUTER_MAX_RESULT_BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_result_bytes: u64,
    /// Runs idle this long (seconds) are forgotten.
    #[arg(long, default_value_t = 24 * 3600, env = "TOOLROUTER_RUN_IDLE_SECS")]
    pub run_idle_secs: u64,
    /// The address users' browsers reach the HTTP listener at (https://toolrouter.example.com):
    /// authorization servers of OAuth MCP sources send them back to <public url>/oauth/callback.
    /// Default: the HTTP listener's own address.
    #[arg(long, env = "TOOLROUTER_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Keys that seal users' OAuth tokens at rest: one per line, base64 of 32 random bytes
    /// (`head -c 32 /dev/urandom | base64`); the first seals, every line opens (rotation: add
    /// the new key first, drop the old one once tokens sealed with it are gone). Without it,
    /// OAuth MCP sources answer that per-user authorization is not configured.
    #[arg(long, env = "TOOLROUTER_TOKEN_ENCRYPTION_KEY_FILE")]
    pub token_encryption_key_file: Option<PathBuf>,
    /// A user's tokens for a source not used (refreshed or granted again) this many seconds are deleted.
    #[arg(long, default_value_t = 30 * 24 * 3600, env = "TOOLROUTER_OAUTH_TOKEN_TTL_SECS", value_parser = clap::value_parser!(u64).range(60..))]
    pub oauth_token_ttl_secs: u64,
    /// A consent link, and the call waiting for it, stay valid this many seconds.
    #[arg(long, default_value_t = 600, env = "TOOLROUTER_CONSENT_TTL_SECS", value_parser = clap::value_parser!(u64).range(10..))]
    pub consent_ttl_secs: u64,
    /// A claimed tool call (or an approved call being carried out) is held under a lease its
    /// replica renews; a retry learns the replica is gone within this many seconds (plus a
    /// poll) and gets the uncertain outcome.
    #[arg(long, default_value_t = 15, env = "TOOLROUTER_CLAIM_LEASE_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub claim_lease_secs: u64,
    /// A sentence-transformers BERT model directory (config.json, tokenizer.json,
    /// model.safetensors): natural-language search becomes hybrid (lexical fused with
    /// embedding similarity). A bad directory stops start-up naming the file.
    /// Empty means none (to turn off the container image's model).
    #[arg(long, value_name = "DIR", env = "TOOLROUTER_EMBEDDING_MODEL", value_parser = any_path)]
    pub embedding_model: Option<PathBuf>,
    /// Share of the CPU the background embedding of new catalogs may take (0.05..=1):
    /// it rests between batches so calls are not starved.
    #[arg(long, default_value_t = 0.5, env = "TOOLROUTER_EMBEDDING_CPU_SHARE", value_parser = cpu_share)]
    pub embedding_cpu_share: f64,
    /// Call records, resolved and expired deferred records are deleted this many seconds
    /// after their last change (exactly-once holds within it).
    #[arg(long, default_value_t = DEFAULT_RETENTION_SECS, env = "TOOLROUTER_RETENTION_SECS", value_parser = clap::value_parser!(u64).range(60..))]
    pub retention_secs: u64,
    /// Turn auto-pinning off for every definition.
    #[arg(long, env = "TOOLROUTER_DISABLE_AUTO_PIN")]
    pub disable_auto_pin: bool,
    /// How long (ms) a default version or run pin read from the store is trusted before it is
    /// read again: how late a promotion or EndRun made through another replica is seen (0 =
    /// read the store on every call).
    #[arg(long, default_value_t = 1000, env = "TOOLROUTER_CACHE_REFRESH_MS")]
    pub cache_refresh_ms: u64,

    // ----- security: authentication and limits (issue 6) -----
    /// API key file: a JSON array of {"tenant", "sha256", "identity"}; re-read on change.
    #[arg(long, env = "TOOLROUTER_API_KEYS", value_name = "FILE")]
    pub api_keys: Option<PathBuf>,
    /// JWT: required issuer (`iss`); with --jwt-audience and --jwt-jwks or --jwt-jwks-url,
    /// enables JWT bearer tokens.
    #[arg(long, env = "TOOLROUTER_JWT_ISSUER", requires_all = ["jwt_audience", "jwks"])]
    pub jwt_issuer: Option<String>,
    /// JWT: required audience (one of `aud`).
    #[arg(long, env = "TOOLROUTER_JWT_AUDIENCE", requires = "jwt_issuer")]
    pub jwt_audience: Option<String>,
    /// JWT: JWKS file with the issuer's public keys (re-read on change).
    #[arg(long, env = "TOOLROUTER_JWT_JWKS", value_name = "FILE", requires = "jwt_issuer", group = "jwks")]
    pub jwt_jwks: Option<PathBuf>,
    /// JWT: the claim that names the tenant.
    #[arg(long, default_value = "tenant_id", env = "TOOLROUTER_JWT_TENANT_CLAIM")]
    pub jwt_tenant_claim: String,
    /// JWT: URL of the issuer's JWKS (https; http only to a loopback address), instead of --jwt-jwks.
    #[arg(long, env = "TOOLROUTER_JWT_JWKS_URL", value_name = "URL", requires = "jwt_issuer", group = "jwks")]
    pub jwt_jwks_url: Option<String>,
    /// JWT: seconds between two fetches of --jwt-jwks-url (a token with an unknown `kid` also
    /// triggers one, at most every 30 s).
    #[arg(long, default_value_t = 300, env = "TOOLROUTER_JWT_JWKS_REFRESH_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub jwt_jwks_refresh_secs: u64,
    /// Serve without authentication on a non-loopback address (never in production).
    #[arg(long, env = "TOOLROUTER_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,
    /// Largest gRPC request message, in bytes (encoded).
    #[arg(long, default_value_t = Limits::default().max_message_bytes, env = "TOOLROUTER_MAX_MESSAGE_BYTES")]
    pub max_message_bytes: usize,
    /// Largest JSON Schema of a tool (input or output), in bytes.
    #[arg(long, default_value_t = Limits::default().max_schema_bytes, env = "TOOLROUTER_MAX_SCHEMA_BYTES")]
    pub max_schema_bytes: usize,
    /// Deepest nesting of a tool's JSON Schema (objects and arrays; the schema itself is 1).
    #[arg(long, default_value_t = Limits::default().max_schema_depth, env = "TOOLROUTER_MAX_SCHEMA_DEPTH")]
    pub max_schema_depth: usize,
    /// Largest arguments_json of a tool call (or of an approval's replacement), in bytes.
    #[arg(long, default_value_t = Limits::default().max_arguments_bytes, env = "TOOLROUTER_MAX_ARGUMENTS_BYTES")]
    pub max_arguments_bytes: usize,
    /// Requests per second per tenant, per replica (0 = no limit).
    #[arg(long, default_value_t = Limits::default().rate.per_second, env = "TOOLROUTER_RATE_LIMIT_RPS")]
    pub rate_limit_rps: f64,
    /// Burst above the per-tenant rate, in requests.
    #[arg(long, default_value_t = Limits::default().rate.burst, env = "TOOLROUTER_RATE_LIMIT_BURST")]
    pub rate_limit_burst: u32,
    /// Live runs per tenant (runs not ended and not idle-expired; 0 = no limit).
    #[arg(long, default_value_t = Limits::default().max_runs_per_tenant, env = "TOOLROUTER_MAX_RUNS_PER_TENANT")]
    pub max_runs_per_tenant: u64,
    /// TLS: certificate chain (PEM, leaf first) for both listeners; re-read on change.
    #[arg(long, env = "TOOLROUTER_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: private key of the certificate (PEM: PKCS#8, PKCS#1 or SEC1); re-read on change.
    #[arg(long, env = "TOOLROUTER_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// TLS: CA certificates (PEM) that client certificates must chain to (mutual TLS).
    #[arg(long, env = "TOOLROUTER_TLS_CLIENT_CA", value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    // ----- end security -----
    /// An operator secret for MCP header bindings: NAME=env:VAR or NAME=file:PATH, then
    /// ;tenant=ID (repeatable, * = every tenant) and ;host=PATTERN (repeatable) options.
    /// Without tenant= a secret is usable only while authentication is off (repeatable; the
    /// environment variable takes a comma-separated list).
    #[arg(long = "secret", value_name = "NAME=env:VAR|NAME=file:PATH[;tenant=ID][;host=PATTERN]", env = "TOOLROUTER_SECRETS", value_delimiter = ',', value_parser = parse_secret)]
    pub secrets: Vec<(String, crate::upstream::Secret)>,
    /// A Host accepted by the MCP endpoint besides the loopback names, e.g. the Kubernetes
    /// Service name (repeatable; the environment variable takes a comma-separated list).
    #[arg(long = "mcp-allowed-host", value_name = "HOST[:PORT]", env = "TOOLROUTER_MCP_ALLOWED_HOSTS", value_delimiter = ',')]
    pub mcp_allowed_hosts: Vec<String>,
    /// Serve /healthz, /readyz and /metrics on this address too, and /metrics only here (not on
    /// --http-addr). Plain HTTP: keep it inside the cluster.
    #[arg(long, env = "TOOLROUTER_ADMIN_ADDR")]
    pub admin_addr: Option<SocketAddr>,
    /// /metrics requires `authorization: Bearer <token>` for the token whose SHA-256 (hex) this
    /// is (unset: /metrics is open).
    #[arg(long, env = "TOOLROUTER_METRICS_TOKEN_SHA256", value_name = "HEX", value_parser = parse_sha256)]
    pub metrics_token_sha256: Option<[u8; 32]>,
    /// Open connections per listener (gRPC, HTTP, admin); more are closed on accept.
    #[arg(long, default_value_t = 4096, env = "TOOLROUTER_MAX_CONNECTIONS", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// A new connection that sends nothing within this many seconds is closed, and so is an
    /// HTTP connection whose next request head (the idle time of a kept-alive connection
    /// included) does not arrive within it.
    #[arg(long, default_value_t = 10, env = "TOOLROUTER_HTTP_HEADER_TIMEOUT_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub http_header_timeout_secs: u64,
    /// HTTP listener: a request body not read completely within this many seconds is refused.
    #[arg(long, default_value_t = 30, env = "TOOLROUTER_HTTP_BODY_TIMEOUT_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub http_body_timeout_secs: u64,
    /// MCP endpoint sessions one replica keeps track of, in all (each costs a few hundred
    /// bytes; the session itself is a run in the store). initialize beyond it is refused.
    #[arg(long, default_value_t = 100_000, env = "TOOLROUTER_MAX_MCP_SESSIONS", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_mcp_sessions: u64,
    /// The same, per tenant.
    #[arg(long, default_value_t = 10_000, env = "TOOLROUTER_MAX_MCP_SESSIONS_PER_TENANT", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_mcp_sessions_per_tenant: u64,
    /// A replica forgets an MCP endpoint session idle this many seconds (its run stays in the
    /// store until it is ended or expires, and any replica picks it up again).
    #[arg(long, default_value_t = 900, env = "TOOLROUTER_MCP_ENDPOINT_SESSION_IDLE_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub mcp_endpoint_session_idle_secs: u64,
    /// A run's MCP session with a source is closed after this many idle seconds.
    #[arg(long, default_value_t = 900, env = "TOOLROUTER_MCP_SESSION_IDLE_SECS")]
    pub mcp_session_idle_secs: u64,
    /// Tools listed upstream (MCP tools/list, executor ListTools) are used this many seconds
    /// before they are listed again.
    #[arg(long, default_value_t = crate::registry::LISTED_TOOLS_TTL.as_secs(), env = "TOOLROUTER_TOOL_LIST_TTL_SECS")]
    pub tool_list_ttl_secs: u64,
    /// A listing that failed for some source (unreachable executor or MCP server) is used this
    /// many seconds, then tried again; meanwhile that source's tools are missing, the others
    /// and the control tools are not.
    #[arg(long, default_value_t = crate::registry::LISTING_FAILURE_TTL.as_secs(), env = "TOOLROUTER_TOOL_LIST_FAILURE_TTL_SECS")]
    pub tool_list_failure_ttl_secs: u64,
    /// Bytes of compiled catalogs (search indexes, validators) one replica keeps, shared
    /// fairly between tenants; a version too large for it is refused (RESOURCE_EXHAUSTED).
    #[arg(long, default_value_t = crate::registry::CATALOG_CACHE_BYTES as u64, env = "TOOLROUTER_CATALOG_CACHE_BYTES", value_parser = clap::value_parser!(u64).range(1_048_576..))]
    pub catalog_cache_bytes: u64,

    // ----- outbound targets and upstream TLS (issue 6 items 3, 6b) -----
    /// An allowed executor endpoint / MCP URL pattern: [http://|https://]HOST[:PORT] with HOST
    /// `*`, `*.example.com`, a name, an IP address or a CIDR (repeatable; the environment
    /// variable takes a comma-separated list). None given: loopback only.
    #[arg(long = "outbound-allow", value_name = "PATTERN", env = "TOOLROUTER_OUTBOUND_ALLOW", value_delimiter = ',')]
    pub outbound_allow: Vec<String>,
    /// PEM bundle of CA certificates trusted for https:// upstreams, in addition to the system's.
    #[arg(long, env = "TOOLROUTER_UPSTREAM_CA", value_name = "FILE")]
    pub upstream_ca: Option<PathBuf>,
    /// Client certificate chain (PEM) presented to https:// upstreams (mutual TLS).
    #[arg(long, env = "TOOLROUTER_UPSTREAM_CLIENT_CERT", value_name = "FILE", requires = "upstream_client_key")]
    pub upstream_client_cert: Option<PathBuf>,
    /// The private key (PEM) of --upstream-client-cert.
    #[arg(long, env = "TOOLROUTER_UPSTREAM_CLIENT_KEY", value_name = "FILE", requires = "upstream_client_cert")]
    pub upstream_client_key: Option<PathBuf>,
    // ----- end outbound -----
}

fn parse_sha256(hex: &str) -> Result<[u8; 32], String> {
    let bytes: Option<Vec<u8>> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect();
    bytes.and_then(|b| b.try_into().ok()).ok_or_else(|| "64 hex digits (the SHA-256 of the token)".to_string())
}

fn parse_secret(spec: &str) -> Result<(String, crate::upstream::Secret), String> {
    crate::upstream::secrets::parse_spec(spec).map_err(|e| e.to_string())
}

pub use crate::auth::limits::Limits;

/// Per-user OAuth for MCP sources (issue 17).
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    /// Where browsers reach the HTTP listener; `None`: its own address.
    pub public_url: Option<String>,
    /// The sealing keys; `None`: OAuth sources cannot be used.
    pub key_file: Option<PathBuf>,
    pub token_ttl: Duration,
    pub consent_ttl: Duration,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        Self { public_url: None, key_file: None, token_ttl: Duration::from_secs(30 * 24 * 3600), consent_ttl: Duration::from_secs(600) }
    }
}

/// Everything the server needs, ready to use.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    /// Probes and metrics, on an address of their own.
    pub admin_addr: Option<SocketAddr>,
    /// The SHA-256 of the bearer token `/metrics` requires.
    pub metrics_token: Option<[u8; 32]>,
    /// Limits of every listener against hostile clients.
    pub listen: crate::listen::ListenLimits,
    pub store: String,
    pub max_definition_bytes: usize,
    /// Executors and MCP servers: deadlines, concurrency, sessions.
    pub upstream: UpstreamConfig,
    pub router: RouterConfig,
    pub clock: Arc<dyn Clock>,
    /// Per-user authorization of OAuth MCP sources.
    pub oauth: OAuthConfig,
    /// How long shutdown waits for calls in flight.
    pub grace: Duration,
    /// Call records, resolved deferred records and the like are deleted after this.
    pub retention: Duration,
    /// How often idle runs, expired records and old records are swept.
    pub sweep_every: Duration,
    /// How long default versions and run pins read from the store are trusted.
    pub cache_refresh: Duration,
    // ----- security (issue 6) -----
    pub auth: crate::auth::AuthConfig,
    pub limits: Limits,
    /// TLS on both listeners; `None` = plaintext.
    pub tls: Option<crate::tls::TlsConfig>,
    // ----- end security -----
    pub mcp_endpoint: crate::http::mcp::McpEndpointConfig,
    pub secrets: crate::upstream::Secrets,
    /// How long tools listed upstream are used before they are listed again.
    pub tool_list_ttl: Duration,
    /// How long a listing that failed for some source is used before it is tried again.
    pub tool_list_failure_ttl: Duration,
    /// Bytes of compiled catalogs kept.
    pub catalog_cache_bytes: usize,
    /// Allowed outbound targets and upstream TLS (issue 6 items 3, 6b).
    pub outbound: crate::outbound::OutboundConfig,
    /// Hybrid search's model directory, if any.
    pub embedding_model: Option<PathBuf>,
    /// CPU share of background embedding.
    pub embedding_cpu_share: f64,
}

/// A path, empty allowed (clap's own parser refuses empty values).
fn any_path(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

fn cpu_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.05..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a share between 0.05 and 1")),
    }
}

impl ServerConfig {
    /// Loopback, ephemeral ports, an in-memory store: for tests and benchmarks.
    pub fn for_tests() -> Self {
        Self {
            grpc_addr: "127.0.0.1:0".parse().expect("address"),
            http_addr: "127.0.0.1:0".parse().expect("address"),
            admin_addr: None,
            metrics_token: None,
            listen: crate::listen::ListenLimits::default(),
            store: "sqlite::memory:".into(),
            max_definition_bytes: 16 * 1024 * 1024,
            upstream: UpstreamConfig::default(),
            router: RouterConfig::default(),
            clock: Arc::new(SystemClock),
            oauth: OAuthConfig::default(),
            grace: Duration::from_secs(5),
            retention: Duration::from_secs(DEFAULT_RETENTION_SECS),
            sweep_every: Duration::from_secs(60),
            cache_refresh: Duration::from_secs(1),
            auth: crate::auth::AuthConfig::default(),
            // Production limits, but no rate limit: benchmarks drive one tenant hard.
            limits: Limits { rate: crate::auth::limits::RateLimit::OFF, ..Limits::default() },
            tls: None,
            mcp_endpoint: Default::default(),
            secrets: Default::default(),
            tool_list_ttl: crate::registry::LISTED_TOOLS_TTL,
            tool_list_failure_ttl: crate::registry::LISTING_FAILURE_TTL,
            catalog_cache_bytes: crate::registry::CATALOG_CACHE_BYTES,
            // Loopback only: every test executor and MCP server listens on 127.0.0.1.
            outbound: Default::default(),
            embedding_model: None,
            embedding_cpu_share: 1.0,
        }
    }
}

impl From<ServeArgs> for ServerConfig {
    fn from(a: ServeArgs) -> Self {
        Self {
            grpc_addr: a.grpc_addr,
            http_addr: a.http_addr,
            admin_addr: a.admin_addr,
            metrics_token: a.metrics_token_sha256,
            listen: crate::listen::ListenLimits {
                max_connections: a.max_connections as usize,
                first_bytes: Duration::from_secs(a.http_header_timeout_secs),
                header_timeout: Duration::from_secs(a.http_header_timeout_secs),
            },
            store: a.store,
            max_definition_bytes: a.max_definition_bytes,
            upstream: UpstreamConfig {
                default_timeout: Duration::from_millis(a.default_timeout_ms),
                session_idle: Duration::from_secs(a.mcp_session_idle_secs),
                max_result_bytes: a.max_result_bytes as usize,
                ..Default::default()
            },
            router: RouterConfig {
                run_idle: Duration::from_secs(a.run_idle_secs),
                auto_pin: !a.disable_auto_pin,
                claim_lease: Duration::from_secs(a.claim_lease_secs),
            },
            clock: Arc::new(SystemClock),
            oauth: OAuthConfig {
                public_url: a.public_url,
                key_file: a.token_encryption_key_file,
                token_ttl: Duration::from_secs(a.oauth_token_ttl_secs),
                consent_ttl: Duration::from_secs(a.consent_ttl_secs),
            },
            grace: Duration::from_secs(20),
            retention: Duration::from_secs(a.retention_secs),
            sweep_every: Duration::from_secs(60),
            cache_refresh: Duration::from_millis(a.cache_refresh_ms),
            auth: crate::auth::AuthConfig {
                api_keys: a.api_keys,
                insecure_no_auth: a.insecure_no_auth,
                reload_interval: Duration::from_secs(1),
                jwt: {
                    use crate::auth::jwt::{JwksSource, JwtConfig};
                    let jwks = match (a.jwt_jwks, a.jwt_jwks_url) {
                        (Some(file), _) => Some(JwksSource::File(file)),
                        (None, Some(url)) => Some(JwksSource::Url(url)),
                        (None, None) => None,
                    };
                    match (a.jwt_issuer, a.jwt_audience, jwks) {
                        (Some(issuer), Some(audience), Some(jwks)) => Some(JwtConfig {
                            tenant_claim: a.jwt_tenant_claim,
                            jwks_refresh: Duration::from_secs(a.jwt_jwks_refresh_secs),
                            ..JwtConfig::new(issuer, audience, jwks)
                        }),
                        _ => None,
                    }
                },
            },
            limits: Limits {
                max_message_bytes: a.max_message_bytes,
                max_schema_bytes: a.max_schema_bytes,
                max_schema_depth: a.max_schema_depth,
                max_arguments_bytes: a.max_arguments_bytes,
                rate: crate::auth::limits::RateLimit { per_second: a.rate_limit_rps, burst: a.rate_limit_burst },
                max_runs_per_tenant: a.max_runs_per_tenant,
            },
            tls: match (a.tls_cert, a.tls_key) {
                (Some(cert), Some(key)) => Some(crate::tls::TlsConfig { client_ca: a.tls_client_ca, ..crate::tls::TlsConfig::new(cert, key) }),
                _ => None,
            },
            mcp_endpoint: crate::http::mcp::McpEndpointConfig {
                allowed_hosts: a.mcp_allowed_hosts,
                body_timeout: Duration::from_secs(a.http_body_timeout_secs),
                sessions: crate::http::mcp::sessions::SessionLimits {
                    max_total: a.max_mcp_sessions as usize,
                    max_per_tenant: a.max_mcp_sessions_per_tenant as usize,
                    idle: Duration::from_secs(a.mcp_endpoint_session_idle_secs),
                },
            },
            secrets: {
                // A name given twice stops start-up (`Secrets::for_server`).
                let mut s = crate::upstream::Secrets::default();
                for (name, secret) in a.secrets {
                    s.insert_secret(name, secret);
                }
                s
            },
            tool_list_ttl: Duration::from_secs(a.tool_list_ttl_secs),
            tool_list_failure_ttl: Duration::from_secs(a.tool_list_failure_ttl_secs),
            catalog_cache_bytes: a.catalog_cache_bytes as usize,
            outbound: crate::outbound::OutboundConfig {
                allow: a.outbound_allow,
                tls: crate::outbound::UpstreamTlsConfig {
                    ca_file: a.upstream_ca,
                    client_cert: a.upstream_client_cert,
                    client_key: a.upstream_client_key,
                },
            },
            // Empty (e.g. the image's variable cleared): no model.
            embedding_model: a.embedding_model.filter(|p| !p.as_os_str().is_empty()),
            embedding_cpu_share: a.embedding_cpu_share,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(args: &[&str]) -> Result<ServerConfig, clap::Error> {
        let argv = ["toolrouter", "serve"].iter().chain(args);
        match Cli::try_parse_from(argv)?.command {
            Command::Serve(a) => Ok(a.into()),
            Command::DemoExecutor { .. } => unreachable!("parsed serve"),
        }
    }

    #[test]
    fn the_embedding_flags_take_a_directory_and_a_share_between_five_percent_and_all() {
        let cfg = serve(&["--embedding-model", "/models/minilm", "--embedding-cpu-share", "0.25"]).unwrap();
        assert_eq!(cfg.embedding_model.as_deref(), Some(std::path::Path::new("/models/minilm")));
        assert_eq!(cfg.embedding_cpu_share, 0.25);
        assert_eq!(serve(&[]).unwrap().embedding_model, None);
        assert_eq!(serve(&[]).unwrap().embedding_cpu_share, 0.5);
        assert_eq!(serve(&["--embedding-model="]).unwrap().embedding_model, None, "empty turns it off");
        for bad in ["0", "1.5", "-1", "half"] {
            let Err(e) = serve(&[&format!("--embedding-cpu-share={bad}")]) else { panic!("{bad} accepted") };
            let e = e.to_string();
            assert!(e.contains("between 0.05 and 1"), "{bad}: {e}");
        }
    }

    #[test]
    fn jwt_takes_a_jwks_file_or_a_jwks_url_but_not_both() {
        use crate::auth::jwt::JwksSource;
        let jwt = ["--jwt-issuer", "https://idp", "--jwt-audience", "toolrouter"];
        let with = |extra: &[&str]| serve(&[&jwt[..], extra].concat());
        let file = with(&["--jwt-jwks", "/etc/jwks.json"]).unwrap().auth.jwt.unwrap();
        assert_eq!(file.jwks, JwksSource::File("/etc/jwks.json".into()));
        let url = with(&["--jwt-jwks-url", "https://idp/jwks", "--jwt-jwks-refresh-secs", "60"]).unwrap().auth.jwt.unwrap();
        assert_eq!(url.jwks, JwksSource::Url("https://idp/jwks".into()));
        assert_eq!(url.jwks_refresh, Duration::from_secs(60));
        assert!(with(&["--jwt-jwks", "/etc/jwks.json", "--jwt-jwks-url", "https://idp/jwks"]).is_err());
        assert!(with(&[]).is_err(), "an issuer without keys");
        assert!(with(&["--jwt-jwks-url", "https://idp/jwks", "--jwt-jwks-refresh-secs", "0"]).is_err());
        assert!(serve(&["--jwt-jwks-url", "https://idp/jwks"]).is_err(), "keys without an issuer");
    }

    #[test]
    fn secrets_take_tenant_and_host_options_and_the_variable_separates_specs_with_commas() {
        let cfg = serve(&[
            "--secret",
            "crm=file:/run/crm;tenant=acme;tenant=globex;host=https://crm-mcp.internal,billing=env:BILLING;tenant=*",
            "--secret",
            "plain=env:PLAIN",
        ])
        .unwrap();
        let s = cfg.secrets.for_server(true).unwrap();
        assert!(s.check("crm", "globex", "https://crm-mcp.internal/mcp").is_ok());
        assert!(s.check("crm", "initech", "https://crm-mcp.internal/mcp").is_err());
        assert!(s.check("billing", "initech", "http://127.0.0.1:1").is_ok());
        assert!(s.check("plain", "acme", "http://127.0.0.1:1").is_err(), "unscoped, authentication on");
        assert!(serve(&["--secret", "crm=file:/run/crm;tenant=acme,globex"]).is_err(), "a comma separates specs");
        assert!(serve(&["--secret", "crm=file:/a", "--secret", "crm=file:/b"]).unwrap().secrets.for_server(false).is_err(), "a name twice");
        assert_eq!(serve(&[]).unwrap().tool_list_ttl, Duration::from_secs(60));
        assert_eq!(serve(&["--tool-list-ttl-secs", "5"]).unwrap().tool_list_ttl, Duration::from_secs(5));
    }

    #[test]
    fn tls_needs_both_certificate_and_key_and_a_client_ca_needs_them() {
        let tls = serve(&["--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key", "--tls-client-ca", "/tls/ca.crt"]).unwrap().tls.unwrap();
        assert_eq!((tls.cert.to_str(), tls.key.to_str()), (Some("/tls/tls.crt"), Some("/tls/tls.key")));
        assert_eq!(tls.client_ca.as_deref().and_then(|p| p.to_str()), Some("/tls/ca.crt"));
        assert!(serve(&[]).unwrap().tls.is_none(), "plaintext by default");
        assert!(serve(&["--tls-cert", "/tls/tls.crt"]).is_err());
        assert!(serve(&["--tls-key", "/tls/tls.key"]).is_err());
        assert!(serve(&["--tls-client-ca", "/tls/ca.crt"]).is_err());
    }
}
