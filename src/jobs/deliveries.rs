//! The webhook sender: every process works through the store's queue of deliveries, each
//! claimed for one attempt, posted signed, and recorded, with retries and backoff.

use std::sync::Arc;
use std::time::Duration;

use crate::config::WebhookSettings;
use crate::domain::now_ms;
use crate::service::Service;
use crate::store::{Attempt, Claimed};
use crate::webhooks::{backoff_ms, sign};

/// Attempts in flight at once per process.
const IN_FLIGHT: usize = 32;

/// Sends the deliveries due, in every process, until the service stops: each claimed for one
/// attempt (so one replica sends it at a time), posted signed, and recorded: delivered on a 2xx,
/// otherwise tried again after the backoff until `max_attempts`. Requests never wait on it.
pub async fn send_due(service: Arc<Service>) {
    let settings = service.webhook_settings().clone();
    let timeout = Duration::from_millis(settings.timeout_millis);
    let client = match reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("judgecal/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the webhook client; no alarm will be posted");
            return;
        }
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut stop = service.stopping();
    loop {
        if *stop.borrow() {
            return;
        }
        let free = slots.available_permits();
        let now = now_ms();
        // Claimed past the attempt's timeout, so a process that dies mid-attempt leaves the
        // delivery to be sent again, never lost.
        let until = now + 2 * settings.timeout_millis as i64 + 1_000;
        let claimed = if free == 0 {
            Ok(Vec::new())
        } else {
            service
                .store()
                .webhook_rows()
                .claim_due(now, until, free as i64)
                .await
        };
        match claimed {
            Ok(claimed) => {
                let more = claimed.len() == free;
                for c in claimed {
                    let Ok(slot) = slots.clone().acquire_owned().await else {
                        return;
                    };
                    let (client, service, settings) =
                        (client.clone(), service.clone(), settings.clone());
                    // Each attempt on its own: a receiver that hangs holds its own slot until
                    // the timeout, never another hook's delivery.
                    tokio::spawn(async move {
                        let attempt = attempt(&client, &c, &settings).await;
                        let recorded = service
                            .store()
                            .webhook_rows()
                            .record_attempt(&c.delivery.id, &attempt, now_ms())
                            .await;
                        if let Err(e) = recorded {
                            tracing::warn!(delivery = %c.delivery.id, error = ?e, "cannot record a webhook attempt; it is sent again");
                        }
                        drop(slot);
                    });
                }
                if more {
                    continue;
                }
            }
            Err(e) => tracing::warn!(error = ?e, "cannot look for webhook deliveries"),
        }
        tokio::select! {
            _ = stop.changed() => return,
            () = service.delivery_queued() => {}
            () = tokio::time::sleep(Duration::from_millis(settings.poll_millis)) => {}
        }
    }
}

/// One signed POST of a claimed delivery, and what came of it.
async fn attempt(client: &reqwest::Client, c: &Claimed, settings: &WebhookSettings) -> Attempt {
    let d = &c.delivery;
    let attempts = d.attempts + 1;
    let retry = |status: Option<i64>, error: String| Attempt::Failed {
        status,
        error,
        retry_at_ms: (attempts < settings.max_attempts).then(|| {
            now_ms()
                + backoff_ms(
                    attempts,
                    settings.backoff_millis,
                    settings.max_backoff_millis,
                ) as i64
        }),
    };
    let timestamp = now_ms() / 1000;
    let signature = match sign(&c.secret, &d.event_id, timestamp, &d.payload) {
        Ok(s) => s,
        Err(e) => return retry(None, format!("the hook's secret {e}")),
    };
    let sent = client
        .post(&c.url)
        .header("content-type", "application/json")
        .header("webhook-id", &d.event_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(d.payload.clone())
        .send()
        .await;
    match sent {
        Ok(res) if res.status().is_success() => Attempt::Delivered {
            status: i64::from(res.status().as_u16()),
        },
        Ok(res) => {
            let status = res.status();
            retry(
                Some(i64::from(status.as_u16())),
                format!("the receiver answered {status}"),
            )
        }
        Err(e) if e.is_timeout() => retry(
            None,
            format!("no answer within {} ms", settings.timeout_millis),
        ),
        Err(e) => retry(None, format!("cannot reach the receiver: {e}")),
    }
}
