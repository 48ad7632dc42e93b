//! Telemetry: logs (human-readable, or JSON with trace ids), OpenTelemetry traces over OTLP
//! gRPC, Prometheus metrics, and the spans the router emits (SPEC §10).
//!
//! Configuration is read from the environment in one place ([`TelemetryConfig::from_env`]);
//! tests build a [`TelemetryConfig`] instead. Traces go through `tracing`: the OpenTelemetry
//! layer turns toolrouter's spans into OTel spans, so spans created anywhere inside an RPC are
//! its children.

mod logs;
pub mod metrics;
pub mod rpc;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// Everything telemetry needs, read from the environment once.
#[derive(Debug, Clone)]
pub struct TelemetryConfig {
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`; `None` = no
    /// exporter (spans still carry ids, so trace context still reaches executors and logs).
    pub otlp_endpoint: Option<String>,
    /// `OTEL_SERVICE_NAME`, else `service.name` in the resource attributes, else `toolrouter`.
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES` (`k=v,k2=v2`, values percent-decoded).
    pub resource_attributes: Vec<(String, String)>,
    /// `TOOLROUTER_TRACE_ARGUMENTS=true`: tool arguments go into `gen_ai.tool.call.arguments`.
    pub trace_arguments: bool,
    /// `TOOLROUTER_LOG_FORMAT=json` for JSON lines.
    pub log_format: LogFormat,
    /// `RUST_LOG`, default `info`.
    pub log_filter: String,
    /// Longest wait before a batch of spans is exported (`OTEL_BSP_SCHEDULE_DELAY`, ms).
    pub export_delay: Duration,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self::from_lookup(|_| None)
    }
}

impl TelemetryConfig {
    pub fn from_env() -> Self {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the variables through `get` (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let set = |k: &str| get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let resource_attributes = set("OTEL_RESOURCE_ATTRIBUTES").map(|s| parse_resource_attributes(&s)).unwrap_or_default();
        let service_name = set("OTEL_SERVICE_NAME")
            .or_else(|| resource_attributes.iter().find(|(k, _)| k == "service.name").map(|(_, v)| v.clone()))
            .unwrap_or_else(|| "toolrouter".to_string());
        Self {
            otlp_endpoint: set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT")),
            service_name,
            resource_attributes,
            trace_arguments: set("TOOLROUTER_TRACE_ARGUMENTS").is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1"),
            log_format: if set("TOOLROUTER_LOG_FORMAT").is_some_and(|v| v.eq_ignore_ascii_case("json")) { LogFormat::Json } else { LogFormat::Human },
            log_filter: set("RUST_LOG").unwrap_or_else(|| "info".to_string()),
            export_delay: set("OTEL_BSP_SCHEDULE_DELAY").and_then(|v| v.parse().ok()).map(Duration::from_millis).unwrap_or(Duration::from_secs(5)),
        }
    }
}

/// `k=v,k2=v2` as the OpenTelemetry spec writes resource attributes (values percent-encoded).
fn parse_resource_attributes(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter_map(|entry| {
            let (k, v) = entry.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_string(), percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

static TRACE_ARGUMENTS: AtomicBool = AtomicBool::new(false);

/// Did the operator opt in to tool arguments in spans?
pub fn trace_arguments() -> bool {
    TRACE_ARGUMENTS.load(Ordering::Relaxed)
}

/// The installed telemetry; shut it down at exit so the last spans are exported.
pub struct Telemetry {
    provider: SdkTracerProvider,
    exporting: bool,
}

impl Telemetry {
    /// Is an OTLP exporter configured?
    pub fn exporting(&self) -> bool {
        self.exporting
    }

    /// Exports the spans ended so far (blocking: call from a blocking thread).
    pub fn force_flush(&self) -> anyhow::Result<()> {
        self.provider.force_flush().context("flushing spans")
    }

    /// Flushes and stops the exporter.
    pub async fn shutdown(self) {
        let provider = self.provider;
        // The batch processor blocks until its worker has exported; the export itself runs on
        // this runtime, so wait on a blocking thread.
        let done = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(Duration::from_secs(5))).await;
        if let Ok(Err(e)) = done {
            tracing::warn!(error = %e, "stopping the trace exporter failed");
        }
    }
}

/// Builds the tracer provider: with a batch OTLP/gRPC exporter when an endpoint is set.
/// Must run inside the tokio runtime that will carry the exports (the channel lives there).
fn tracer_provider(cfg: &TelemetryConfig) -> anyhow::Result<(SdkTracerProvider, bool)> {
    let resource = Resource::builder_empty()
        .with_detector(Box::new(opentelemetry_sdk::resource::TelemetryResourceDetector))
        .with_attributes(cfg.resource_attributes.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())))
        .with_service_name(cfg.service_name.clone())
        .build();
    let mut builder = SdkTracerProvider::builder().with_resource(resource);
    let exporting = cfg.otlp_endpoint.is_some();
    if let Some(endpoint) = &cfg.otlp_endpoint {
        use opentelemetry_otlp::WithExportConfig;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint.clone())
            .with_timeout(Duration::from_secs(10))
            .build()
            .with_context(|| format!("building the OTLP exporter for {endpoint}"))?;
        let batch = BatchConfigBuilder::default().with_scheduled_delay(cfg.export_delay).build();
        builder = builder.with_span_processor(BatchSpanProcessor::builder(exporter).with_batch_config(batch).build());
    }
    Ok((builder.build(), exporting))
}

/// Installs logging and tracing for the process. Call once, inside the tokio runtime.
pub fn init(cfg: &TelemetryConfig) -> anyhow::Result<Telemetry> {
    let (provider, exporting) = tracer_provider(cfg)?;
    TRACE_ARGUMENTS.store(cfg.trace_arguments, Ordering::Relaxed);
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("toolrouter"))
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_target(false)
        // Only toolrouter's own spans: no spans of dependencies, whatever RUST_LOG says.
        .with_filter(Targets::new().with_target("toolrouter", tracing::Level::INFO));
    let filter = EnvFilter::try_new(&cfg.log_filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = match cfg.log_format {
        LogFormat::Human => tracing_subscriber::fmt::layer().with_writer(std::io::stderr).boxed(),
        LogFormat::Json => logs::json_layer(std::io::stderr).boxed(),
    };
    tracing_subscriber::registry().with(otel).with(fmt.with_filter(filter)).try_init().context("installing the tracing subscriber")?;
    if exporting {
        tracing::info!(endpoint = cfg.otlp_endpoint.as_deref().unwrap_or(""), service = %cfg.service_name, "exporting traces over OTLP");
    }
    Ok(Telemetry { provider, exporting })
}

/// `fut` inside `span`; as it is when no subscriber takes the span: entering and leaving a
/// disabled span on every poll still costs a few checks, on each call's hot path.
pub fn in_span<F: Future>(fut: F, span: &tracing::Span) -> futures::future::Either<tracing::instrument::Instrumented<F>, F> {
    use tracing::Instrument;
    match span.is_disabled() {
        true => futures::future::Either::Right(fut),
        false => futures::future::Either::Left(fut.instrument(span.clone())),
    }
}

// ----- trace context -----

/// The W3C trace context of incoming request headers (`traceparent`, `tracestate`).
pub fn extract_context(headers: &http::HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers))
}

/// Writes the current span's trace context into outgoing gRPC metadata (`traceparent`).
pub fn inject_context(metadata: &mut tonic::metadata::MetadataMap) {
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&cx, &mut MetadataInjector(metadata));
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (tonic::metadata::MetadataKey::from_bytes(key.as_bytes()), value.parse()) {
            self.0.insert(k, v);
        }
    }
}

// ----- tool execution spans (OpenTelemetry GenAI semantic conventions) -----

/// The `execute_tool {name}` span of one execution of a tool (retries included).
/// `tool_type` is the GenAI `gen_ai.tool.type` (`function`; `extension` for MCP tools).
/// Arguments are recorded only when the operator opted in.
pub fn execute_tool_span(
    tool: &str,
    tool_type: &'static str,
    source_id: &str,
    call_id: &str,
    arguments_json: &str,
    with_arguments: bool,
) -> tracing::Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format_args!("execute_tool {tool}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %tool,
        "gen_ai.tool.type" = tool_type,
        gen_ai.tool.call.id = Empty,
        gen_ai.tool.call.arguments = Empty,
        toolrouter.source.id = %source_id,
        "error.type" = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if !call_id.is_empty() {
        span.record("gen_ai.tool.call.id", call_id);
    }
    if with_arguments {
        span.record("gen_ai.tool.call.arguments", arguments_json);
    }
    span
}

/// Marks the span failed with `error.type`: toolrouter's fault code, or `tool_error` when the
/// tool itself answered with an error.
pub fn record_tool_error(span: &tracing::Span, error_type: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("error.type", error_type);
    span.record("otel.status_code", "error");
}

// ----- search spans -----

/// One search (`discover_tools`, `tool_search`): a span with result counts and the
/// search metrics. Dropping it ends both.
pub struct Search {
    span: tracing::span::EnteredSpan,
    started: Instant,
}

impl Search {
    /// Starts a search span; records how many keywords the query has, never the query.
    pub fn start(operation: &'static str, query_keywords: usize) -> Search {
        let span = tracing::info_span!(
            "search",
            otel.name = operation,
            toolrouter.search.operation = operation,
            toolrouter.search.query_keywords = Empty,
            toolrouter.search.total = Empty,
            toolrouter.search.returned = Empty,
        );
        span.record("toolrouter.search.query_keywords", query_keywords as i64);
        Search { span: span.entered(), started: Instant::now() }
    }

    /// The size of the candidate set and of the page returned.
    pub fn found(&self, total: u32, returned: usize) {
        // i64: the OpenTelemetry layer exports unsigned fields as strings.
        self.span.record("toolrouter.search.total", i64::from(total));
        self.span.record("toolrouter.search.returned", returned as i64);
        if total == 0 {
            metrics::search_zero_results();
        }
    }
}

impl Drop for Search {
    fn drop(&mut self) {
        metrics::search_duration(self.started.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> TelemetryConfig {
        let map: std::collections::HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        TelemetryConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn no_endpoint_means_no_exporter_and_the_default_service_name() {
        let c = config(&[]);
        assert_eq!(c.otlp_endpoint, None);
        assert_eq!(c.service_name, "toolrouter");
        assert!(!c.trace_arguments);
        assert_eq!(c.log_format, LogFormat::Human);
        assert_eq!(config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]).otlp_endpoint, None);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (_, exporting) = rt.block_on(async { tracer_provider(&c) }).unwrap();
        assert!(!exporting);
    }

    #[test]
    fn standard_variables_configure_the_exporter_and_resource() {
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod, team=tools%2Crouting,broken"),
            ("TOOLROUTER_TRACE_ARGUMENTS", "true"),
            ("TOOLROUTER_LOG_FORMAT", "json"),
        ]);
        assert_eq!(c.otlp_endpoint.as_deref(), Some("http://collector:4317"));
        assert_eq!(
            c.resource_attributes,
            vec![("deployment.environment".to_string(), "prod".to_string()), ("team".to_string(), "tools,routing".to_string())]
        );
        assert!(c.trace_arguments);
        assert_eq!(c.log_format, LogFormat::Json);
        let traces = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4317"), ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:4317")]);
        assert_eq!(traces.otlp_endpoint.as_deref(), Some("http://b:4317"), "the signal-specific variable wins");
    }

    #[test]
    fn service_name_comes_from_otel_service_name_then_resource_attributes() {
        assert_eq!(config(&[("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs")]).service_name, "from-attrs");
        assert_eq!(config(&[("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs"), ("OTEL_SERVICE_NAME", "named")]).service_name, "named");
    }

    /// Span fields as recorded (at creation and later).
    #[derive(Clone, Default)]
    struct Fields(std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, String>>>);

    struct Visit<'a>(&'a mut std::collections::BTreeMap<String, String>);

    impl tracing::field::Visit for Visit<'_> {
        fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
            self.0.insert(f.name().to_string(), format!("{v:?}"));
        }
        fn record_str(&mut self, f: &tracing::field::Field, v: &str) {
            self.0.insert(f.name().to_string(), v.to_string());
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Fields {
        fn on_new_span(&self, attrs: &tracing::span::Attributes<'_>, _: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
            attrs.record(&mut Visit(&mut self.0.lock().unwrap()));
        }
        fn on_record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            values.record(&mut Visit(&mut self.0.lock().unwrap()));
        }
    }

    fn span_fields(with_arguments: bool) -> std::collections::BTreeMap<String, String> {
        let fields = Fields::default();
        let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(fields.clone()));
        let span = execute_tool_span("lookup", "function", "fs", "call-1", r#"{"card":"4111"}"#, with_arguments);
        record_tool_error(&span, "timeout");
        drop(span);
        fields.0.lock().unwrap().clone()
    }

    #[test]
    fn execute_tool_spans_follow_the_genai_conventions_and_keep_arguments_out() {
        let f = span_fields(false);
        assert_eq!(f["otel.name"], "execute_tool lookup");
        assert_eq!(f["gen_ai.operation.name"], "execute_tool");
        assert_eq!(f["gen_ai.tool.name"], "lookup");
        assert_eq!(f["gen_ai.tool.call.id"], "call-1");
        assert_eq!(f["gen_ai.tool.type"], "function");
        assert_eq!(f["toolrouter.source.id"], "fs");
        assert_eq!(f["error.type"], "timeout");
        assert_eq!(f["otel.status_code"], "error");
        assert!(!f.contains_key("gen_ai.tool.call.arguments"), "{f:?}");
        assert!(!f.values().any(|v| v.contains("4111")), "{f:?}");
    }

    #[test]
    fn arguments_are_traced_only_when_the_operator_opts_in() {
        let f = span_fields(true);
        assert_eq!(f["gen_ai.tool.call.arguments"], r#"{"card":"4111"}"#);
    }
}
