//! JSON log lines carrying the OpenTelemetry `trace_id` and `span_id` of the span they were
//! written in, so logs and traces join up.

use std::fmt::{self, Write as _};
use std::sync::{Arc, OnceLock};

use opentelemetry::trace::TraceContextExt;
use tracing::dispatcher::WeakDispatch;
use tracing::{Dispatch, Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Json, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The fmt layer for `TOOLROUTER_LOG_FORMAT=json`.
pub fn json_layer<S, W>(writer: W) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    let dispatch = DispatchSlot::default();
    let format =
        JsonWithTrace { json: tracing_subscriber::fmt::format().json().with_current_span(true).with_span_list(false), dispatch: dispatch.clone() };
    let fmt = tracing_subscriber::fmt::layer::<S>().json().with_writer(writer).event_format(format);
    dispatch.and_then(fmt)
}

/// The subscriber the layer is part of. A formatter runs inside a dispatch, where
/// `dispatcher::get_default` answers "none", so the OpenTelemetry context is read through this.
#[derive(Clone, Default)]
struct DispatchSlot(Arc<OnceLock<WeakDispatch>>);

impl<S: Subscriber> Layer<S> for DispatchSlot {
    fn on_register_dispatch(&self, subscriber: &Dispatch) {
        let _ = self.0.set(subscriber.downgrade());
    }
}

/// tracing-subscriber's JSON line, with `trace_id` and `span_id` added at the top level.
pub struct JsonWithTrace {
    json: Format<Json>,
    dispatch: DispatchSlot,
}

impl<S, N> FormatEvent<S, N> for JsonWithTrace
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let mut line = String::new();
        self.json.format_event(ctx, Writer::new(&mut line), event)?;
        let span = event.parent().and_then(|id| ctx.span(id)).or_else(|| ctx.lookup_current());
        let ids = span.and_then(|s| {
            let dispatch = self.dispatch.0.get()?.upgrade()?;
            let cx = tracing_opentelemetry::get_otel_context(&s.id(), &dispatch)?;
            let sc = cx.span().span_context().clone();
            sc.is_valid().then(|| (sc.trace_id(), sc.span_id()))
        });
        if let (Some((trace_id, span_id)), Some(body)) = (ids, line.strip_suffix("}\n")) {
            let mut out = String::with_capacity(line.len() + 80);
            out.push_str(body);
            writeln!(out, ",\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\"}}")?;
            return writer.write_str(&out);
        }
        writer.write_str(&line)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TracerProvider as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn json_logs_carry_the_trace_and_span_ids_of_the_current_span() {
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let buf = Buffer::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
            .with(json_layer(move || writer.clone()));
        let _guard = tracing::subscriber::set_default(subscriber);

        tracing::info!("outside any span");
        let carrier: std::collections::HashMap<String, String> =
            [("traceparent".to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string())].into();
        let parent = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        let span = tracing::info_span!("work");
        span.set_parent(parent).unwrap();
        span.in_scope(|| tracing::info!(answer = 42, "inside"));

        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect(l)).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].get("trace_id").is_none(), "no span, no ids: {}", lines[0]);
        assert_eq!(lines[1]["fields"]["message"], "inside");
        assert_eq!(lines[1]["fields"]["answer"], 42);
        assert_eq!(lines[1]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        let span_id = lines[1]["span_id"].as_str().unwrap();
        assert_eq!(span_id.len(), 16);
        assert_ne!(span_id, "00f067aa0ba902b7", "the span's own id, not its parent's");
    }
}
