//! Prometheus metrics, all prefixed `judgecal_`. Labels are bounded sets (route template,
//! method, status, judge, rubric), never item ids. One registry per application, so tests can
//! run several side by side.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::domain::CellKey;

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    pub http_requests: IntCounterVec,
    pub http_duration: HistogramVec,
    pub cell_anchors: IntGaugeVec,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let http_requests = IntCounterVec::new(
            Opts::new("judgecal_http_requests_total", "HTTP requests answered"),
            &["route", "method", "status"],
        )
        .expect("valid metric");
        let http_duration = HistogramVec::new(
            HistogramOpts::new(
                "judgecal_http_request_duration_seconds",
                "Time to answer an HTTP request",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ]),
            &["route", "method", "status"],
        )
        .expect("valid metric");
        let cell_anchors = IntGaugeVec::new(
            Opts::new(
                "judgecal_cell_anchors",
                "Anchors stored per (judge, rubric) cell",
            ),
            &["judge", "rubric"],
        )
        .expect("valid metric");
        for c in [
            Box::new(http_requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(http_duration.clone()),
            Box::new(cell_anchors.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        Self {
            registry,
            http_requests,
            http_duration,
            cell_anchors,
        }
    }

    pub fn set_cell_anchors(&self, key: &CellKey, count: i64) {
        self.cell_anchors
            .with_label_values(&[key.judge.as_str(), key.rubric.as_str()])
            .set(count);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding to memory cannot fail");
        String::from_utf8(buf).expect("Prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
