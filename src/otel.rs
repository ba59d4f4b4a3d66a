//! OpenTelemetry evaluation events: with `otel.endpoint` set, every corrected item is sent to
//! an OTLP/HTTP receiver as a `gen_ai.evaluation.result` event (the GenAI semantic
//! conventions' name and `gen_ai.evaluation.*` attributes, judgecal's own under `judgecal.*`),
//! on a span per request (`judgecal.correct`, at most `otel.events_per_span` events a span).
//!
//! Off the hot path: a request only copies its answer into a bounded queue (and counts it
//! dropped when the queue is full); a background task turns it into spans, which the SDK's
//! batch processor exports from its own thread.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{Span, Tracer, TracerProvider};
use opentelemetry::{KeyValue, StringValue, Value};
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};
use tokio::sync::mpsc;

use crate::config::OtelSettings;
use crate::error::{Error, Result};

/// The event's name in the GenAI semantic conventions.
pub const EVENT: &str = "gen_ai.evaluation.result";

/// One corrected item, as its event reports it.
#[derive(Debug, Clone)]
pub struct EvaluatedItem {
    pub id: Option<String>,
    pub corrected: f64,
    /// The 95% interval (predictive, else credible), where the version gives one.
    pub interval: Option<(f64, f64)>,
    pub outside_anchors: bool,
    /// The codes of the answer's warnings that concern this item.
    pub warnings: Vec<&'static str>,
}

/// One answer of `/v1/correct`, queued for export.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub judge: String,
    pub rubric: String,
    pub judge_version: Option<String>,
    pub calibration_version: i64,
    pub method: &'static str,
    pub at: SystemTime,
    pub items: Vec<EvaluatedItem>,
}

/// The exporter of a process, or nothing (`otel.endpoint` empty).
#[derive(Default)]
pub struct Evaluations {
    queue: Option<mpsc::Sender<Evaluation>>,
    provider: Mutex<Option<SdkTracerProvider>>,
}

impl Evaluations {
    /// Builds the exporter where `otel.endpoint` is set and starts the task that turns queued
    /// answers into spans. Must run inside the async runtime; the exporter's blocking HTTP
    /// client is made on a thread of its own.
    pub fn start(settings: &OtelSettings) -> Result<Self> {
        if settings.endpoint.is_empty() {
            return Ok(Self::default());
        }
        let s = settings.clone();
        let provider = std::thread::spawn(move || provider(&s))
            .join()
            .map_err(|_| Error::Internal("building the OTLP exporter panicked".into()))??;
        let tracer = provider.tracer("judgecal");
        let (queue, received) = mpsc::channel(settings.queue);
        tokio::spawn(export(tracer, received, settings.events_per_span));
        tracing::info!(endpoint = %settings.endpoint, "evaluation events go to an OTLP receiver");
        Ok(Self {
            queue: Some(queue),
            provider: Mutex::new(Some(provider)),
        })
    }

    pub fn enabled(&self) -> bool {
        self.queue.is_some()
    }

    /// Queues an answer's events; false when the queue was full and they were dropped.
    pub fn send(&self, evaluation: Evaluation) -> bool {
        match &self.queue {
            Some(q) => q.try_send(evaluation).is_ok(),
            None => true,
        }
    }

    /// Exports what is queued and stops the exporter (at shutdown), off the async runtime.
    pub async fn shutdown(&self) {
        let provider = self.provider.lock().ok().and_then(|mut p| p.take());
        if let Some(provider) = provider {
            let _ = tokio::task::spawn_blocking(move || {
                let _ = provider.force_flush();
                let _ = provider.shutdown();
            })
            .await;
        }
    }
}

fn provider(s: &OtelSettings) -> Result<SdkTracerProvider> {
    let exporter = SpanExporter::builder()
        .with_http()
        .with_endpoint(&s.endpoint)
        .with_timeout(Duration::from_millis(s.timeout_millis))
        .build()
        .map_err(|e| Error::Internal(format!("otel.endpoint: cannot build the exporter: {e}")))?;
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(s.queue.max(1))
        .with_max_export_batch_size(s.export_batch.max(1))
        .with_scheduled_delay(Duration::from_millis(s.delay_millis))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(
            BatchSpanProcessor::builder(exporter)
                .with_batch_config(batch)
                .build(),
        )
        // Resource attributes also come from OTEL_RESOURCE_ATTRIBUTES (e.g. Phoenix's
        // openinference.project.name=judgecal).
        .with_resource(Resource::builder().with_service_name("judgecal").build())
        .with_max_events_per_span(s.events_per_span.max(1) as u32)
        .build())
}

async fn export(tracer: SdkTracer, mut received: mpsc::Receiver<Evaluation>, per_span: usize) {
    while let Some(e) = received.recv().await {
        for chunk in e.items.chunks(per_span.max(1)) {
            spans(&tracer, &e, chunk);
        }
    }
}

/// One span of `chunk`'s events. What every item shares (the judge, its version, the
/// calibration) is on the span and on each event, each string shared, not copied.
fn spans(tracer: &SdkTracer, e: &Evaluation, chunk: &[EvaluatedItem]) {
    let shared = Shared::of(e);
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "evaluate"),
        KeyValue::new("judgecal.items", chunk.len() as i64),
        KeyValue::new("judgecal.calibration.method", e.method),
        KeyValue::new("judgecal.interval.level", 0.95),
    ];
    attributes.extend(shared.attributes());
    let mut span = tracer
        .span_builder("judgecal.correct")
        .with_start_time(e.at)
        .with_attributes(attributes)
        .start(tracer);
    for item in chunk {
        span.add_event_with_timestamp(EVENT, e.at, event(&shared, item));
    }
    span.end_with_timestamp(e.at);
}

/// The attributes every event of an answer carries, each string counted, not copied.
struct Shared {
    rubric: StringValue,
    judge: StringValue,
    judge_version: Option<StringValue>,
    version: i64,
}

impl Shared {
    fn of(e: &Evaluation) -> Self {
        let shared = |s: &str| StringValue::from(std::sync::Arc::<str>::from(s));
        Self {
            rubric: shared(&e.rubric),
            judge: shared(&e.judge),
            judge_version: e.judge_version.as_deref().map(shared),
            version: e.calibration_version,
        }
    }

    fn attributes(&self) -> Vec<KeyValue> {
        let mut a = vec![
            KeyValue::new("gen_ai.evaluation.name", self.rubric.clone()),
            KeyValue::new("judgecal.judge", self.judge.clone()),
            KeyValue::new("judgecal.calibration.version", self.version),
        ];
        if let Some(v) = &self.judge_version {
            a.push(KeyValue::new("judgecal.judge.version", v.clone()));
        }
        a
    }
}

/// A `gen_ai.evaluation.result` event's attributes: the answer's (rubric as the evaluation's
/// name, judge, judge version, calibration version), the corrected score as its value, and
/// the item's id, interval and warnings where it has them.
fn event(shared: &Shared, item: &EvaluatedItem) -> Vec<KeyValue> {
    let mut a = shared.attributes();
    a.push(KeyValue::new(
        "gen_ai.evaluation.score.value",
        item.corrected,
    ));
    if let Some(id) = &item.id {
        a.push(KeyValue::new("judgecal.item.id", id.clone()));
    }
    if let Some((low, high)) = item.interval {
        a.push(KeyValue::new("judgecal.interval.low", low));
        a.push(KeyValue::new("judgecal.interval.high", high));
    }
    if item.outside_anchors {
        a.push(KeyValue::new("judgecal.outside_anchors", true));
    }
    if !item.warnings.is_empty() {
        let codes: Vec<StringValue> = item
            .warnings
            .iter()
            .map(|w| StringValue::from(*w))
            .collect();
        a.push(KeyValue::new(
            "judgecal.warnings",
            Value::Array(codes.into()),
        ));
    }
    a
}
