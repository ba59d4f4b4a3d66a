//! Alarms posted to webhooks: what an alarm says (its type, the cell, the figures behind it and
//! a link) and how a delivery is signed (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
//! `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`). The sender is
//! `jobs::deliveries`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

use crate::domain::{CellKey, rfc3339};

/// An alarm's type: the `type` of its body and what a hook's `events` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlarmKind {
    /// A cell's drift alarm (`judgecal_drift_alarm`): its anchors miss the active version's
    /// intervals more often than the version's bound allows (its coverage is below its band).
    Drift,
    /// A cell's fleet-wide drift alert (`judgecal_drift_fleet_alarm`, `JudgecalDrift`).
    FleetAlert,
    /// The active version's β canary (`judgecal_beta_canary`): Pr(β < 0.3) > 0.05.
    BetaCanary,
    /// A silent-change check found the judge changed under the same version label
    /// (`judgecal_judge_changed` = 1).
    JudgeChanged,
    /// A test delivery, asked for with POST /v1/webhooks/{id}/ping.
    Ping,
}

impl AlarmKind {
    /// The types a hook may subscribe to (a ping reaches the hook it was asked of, whatever it
    /// subscribes to).
    pub const ALARMS: [AlarmKind; 4] = [
        AlarmKind::Drift,
        AlarmKind::FleetAlert,
        AlarmKind::BetaCanary,
        AlarmKind::JudgeChanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlarmKind::Drift => "drift",
            AlarmKind::FleetAlert => "fleet_alert",
            AlarmKind::BetaCanary => "beta_canary",
            AlarmKind::JudgeChanged => "judge_changed",
            AlarmKind::Ping => "ping",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALARMS.into_iter().find(|k| k.as_str() == s)
    }
}

/// One alarm, raised once: `id` is its idempotency key (the same alarm raised again, by any
/// replica, is the same id and is queued once per hook).
#[derive(Debug, Clone, PartialEq)]
pub struct Alarm {
    pub kind: AlarmKind,
    pub id: String,
    pub cell: Option<CellKey>,
    /// The calibration version it concerns, where it concerns one.
    pub version: Option<i64>,
    /// The figures behind it (each type's own; docs/webhooks.md lists them).
    pub figures: serde_json::Value,
    /// Where to read more, as a path of this service.
    pub link: String,
    pub summary: String,
}

#[derive(Serialize)]
struct Body<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: AlarmKind,
    occurred_at: String,
    summary: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    judge: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rubric: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<i64>,
    figures: &'a serde_json::Value,
    link: String,
}

impl Alarm {
    /// The JSON body every hook it reaches is sent, with links under `public_url`.
    pub fn body(&self, public_url: &str, at_ms: i64) -> String {
        let body = Body {
            id: &self.id,
            kind: self.kind,
            occurred_at: rfc3339(at_ms),
            summary: &self.summary,
            judge: self.cell.as_ref().map(|k| k.judge.as_str()),
            rubric: self.cell.as_ref().map(|k| k.rubric.as_str()),
            version: self.version,
            figures: &self.figures,
            link: format!("{}{}", public_url.trim_end_matches('/'), self.link),
        };
        serde_json::to_string(&body).expect("an alarm's body serialises")
    }
}

/// The `webhook-signature` header of `body` sent as message `id` at `timestamp` (Unix s):
/// Standard Webhooks' `v1,` and the base64 HMAC-SHA256, keyed by the secret's bytes (the
/// base64 after `whsec_`), of `id.timestamp.body`.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &str) -> Result<String, String> {
    let key = secret_bytes(secret)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|e| e.to_string())?;
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    Ok(format!("v1,{}", BASE64.encode(mac.finalize().into_bytes())))
}

fn secret_bytes(secret: &str) -> Result<Vec<u8>, String> {
    let encoded = secret
        .strip_prefix("whsec_")
        .ok_or("must start with whsec_ (Standard Webhooks' form)")?;
    let bytes = BASE64
        .decode(encoded)
        .map_err(|e| format!("is not whsec_ and base64 ({e})"))?;
    if !(24..=64).contains(&bytes.len()) {
        return Err(format!(
            "holds {} bytes; 24 to 64 random bytes are expected",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// A new secret: `whsec_` and 32 random bytes in base64.
pub fn new_secret() -> String {
    format!("whsec_{}", BASE64.encode(rand::random::<[u8; 32]>()))
}

/// Why `url` cannot be a hook's address, if it cannot: an absolute http(s) URL with a host.
pub fn check_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!(
            "{url:?} must be an http:// or https:// URL with a host"
        ));
    }
    Ok(())
}

/// The alarm types a comma-separated list names; an unknown one is refused by name.
pub fn parse_events<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<AlarmKind>, String> {
    names
        .into_iter()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| {
            AlarmKind::parse(n).ok_or_else(|| {
                // Coverage below the band is the drift alarm's test (docs/webhooks.md).
                let hint = if n.to_ascii_lowercase().contains("coverage") {
                    " (a cell's coverage below its band is the drift alarm: subscribe to \"drift\")"
                } else {
                    ""
                };
                format!(
                    "unknown alarm type {n:?}; one of {}{hint}",
                    AlarmKind::ALARMS.map(AlarmKind::as_str).join(", ")
                )
            })
        })
        .collect()
}

/// The `[webhooks]` settings' problem, with the key to fix: the configured hook's `url`,
/// `secret` and `events`, and the links' `public_url`.
pub fn check_settings(
    url: &str,
    secret: &str,
    events: &str,
    public_url: &str,
) -> Result<(), (&'static str, String)> {
    if !public_url.is_empty() {
        check_url(public_url).map_err(|e| ("webhooks.public_url", e))?;
    }
    if url.is_empty() {
        return Ok(());
    }
    check_url(url).map_err(|e| ("webhooks.url", e))?;
    secret_bytes(secret).map_err(|e| ("webhooks.secret", format!("the secret {e}")))?;
    parse_events(events.split(',')).map_err(|e| ("webhooks.events", e))?;
    Ok(())
}

/// The wait before attempt `attempts + 1`, after `attempts` failures: `base` doubled per
/// failure after the first, at most `max`.
pub fn backoff_ms(attempts: i64, base: u64, max: u64) -> u64 {
    let doublings = attempts.saturating_sub(1).clamp(0, 40) as u32;
    base.saturating_mul(1u64 << doublings).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_standard_webhooks() {
        // The Standard Webhooks specification's example; the expected value was computed with
        // Python's hmac and base64 modules, independently of this code.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let signed = sign(
            secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            r#"{"test": 2432232314}"#,
        )
        .unwrap();
        assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        // Any change to the id, time or body changes it.
        assert_ne!(
            sign(
                secret,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_331,
                r#"{"test": 2432232314}"#
            )
            .unwrap(),
            signed
        );
        assert!(sign("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "a", 1, "b").is_err());
        assert!(sign("whsec_c2hvcnQ=", "a", 1, "b").is_err());
        let fresh = new_secret();
        assert!(sign(&fresh, "a", 1, "b").is_ok() && fresh != new_secret());
    }

    #[test]
    fn backoff_doubles_to_its_ceiling() {
        let waits: Vec<u64> = (1..=6).map(|a| backoff_ms(a, 100, 1_000)).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(backoff_ms(80, 100, u64::MAX), 100 << 40);
    }

    #[test]
    fn urls_and_event_lists_are_checked() {
        assert!(check_url("https://hooks.example.com/judgecal").is_ok());
        assert!(check_url("http://127.0.0.1:9/x").is_ok());
        assert!(check_url("ftp://example.com").is_err());
        assert!(check_url("/relative").is_err());
        assert_eq!(
            parse_events("drift, beta_canary,".split(',')).unwrap(),
            [AlarmKind::Drift, AlarmKind::BetaCanary]
        );
        let err = parse_events(["drift", "ping"]).unwrap_err();
        assert!(
            err.contains("\"ping\"") && err.contains("fleet_alert") && !err.contains("band"),
            "{err}"
        );
        let err = parse_events(["coverage_below_band"]).unwrap_err();
        assert!(err.contains("subscribe to \"drift\""), "{err}");
    }
}
