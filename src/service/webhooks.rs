//! Webhooks: hooks a key makes (and the one `webhooks.url` configures), the alarms raised to
//! them, and their delivery log. Raising an alarm only queues it in the store; the sender
//! (`crate::webhooks::send_due`) posts it, so no request waits on a receiver.

use super::families::Webhooks;
use crate::auth::{Principal, Scope};
use crate::domain::{Problem, now_ms};
use crate::error::{Error, Result};
use crate::store::{CONFIGURED, Delivery, StoredWebhook};
use crate::webhooks::{Alarm, AlarmKind, check_url, new_secret, parse_events};

/// A delivery's states, as the log reports them.
const DELIVERY_STATES: [&str; 4] = ["pending", "delivered", "failed", "cancelled"];

impl Webhooks<'_> {
    /// Makes the configured hook say what `[webhooks]` says (or deletes it): at start.
    pub async fn configure(&self) -> Result<()> {
        let s = &self.webhook_settings;
        let hook = (!s.url.is_empty()).then(|| StoredWebhook {
            id: CONFIGURED.to_owned(),
            url: s.url.clone(),
            secret: s.secret.clone(),
            events: s
                .events
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect(),
            owner: None,
            created_at_ms: now_ms(),
        });
        self.store
            .webhook_rows()
            .configure(hook.as_ref(), now_ms())
            .await
    }

    /// A new hook owned by the caller's key: alarms of `events` (all where empty) are posted
    /// to `url`, signed with the secret it returns.
    pub async fn create(
        &self,
        caller: &Principal,
        url: &str,
        events: &[String],
    ) -> Result<StoredWebhook> {
        let mut problems = Vec::new();
        if let Err(e) = check_url(url) {
            problems.push(Problem::at(None, "url", e));
        }
        let kinds = parse_events(events.iter().map(String::as_str)).unwrap_or_else(|e| {
            problems.push(Problem::at(None, "events", e));
            Vec::new()
        });
        if !problems.is_empty() {
            return Err(Error::invalid("the webhook cannot be made", problems));
        }
        let stored = StoredWebhook {
            id: uuid::Uuid::new_v4().to_string(),
            url: url.to_owned(),
            secret: new_secret(),
            events: kinds.iter().map(|k| k.as_str().to_owned()).collect(),
            owner: owner(caller),
            created_at_ms: now_ms(),
        };
        self.store.webhook_rows().insert_webhook(&stored).await?;
        // Alarms already standing reach the new hook at the next refresh.
        if let Ok(mut raised) = self.raised.lock() {
            raised.clear();
        }
        tracing::info!(webhook = %stored.id, url, "webhook made");
        Ok(stored)
    }

    /// The hooks the caller may see: all of them with the admin scope (or without keys), else
    /// those its key made.
    pub async fn list(&self, caller: &Principal) -> Result<Vec<StoredWebhook>> {
        let all = self.store.webhook_rows().webhooks().await?;
        Ok(all.into_iter().filter(|h| sees(caller, h)).collect())
    }

    /// One hook the caller may see; 404 otherwise (another key's hook is not told apart from
    /// none).
    pub async fn get(&self, caller: &Principal, id: &str) -> Result<StoredWebhook> {
        self.find(caller, id, false).await
    }

    /// The same, deleted hooks included where `deleted`.
    async fn find(&self, caller: &Principal, id: &str, deleted: bool) -> Result<StoredWebhook> {
        match self.store.webhook_rows().webhook(id, deleted).await? {
            Some(h) if sees(caller, &h) => Ok(h),
            _ => Err(Error::NotFound(format!(
                "no webhook {id} of this key; GET /v1/webhooks lists them"
            ))),
        }
    }

    pub async fn delete(&self, caller: &Principal, id: &str) -> Result<()> {
        let hook = self.get(caller, id).await?;
        if hook.id == CONFIGURED {
            return Err(Error::conflict(
                "the configured webhook is set by webhooks.url; change the settings instead".into(),
                vec![],
            ));
        }
        self.store
            .webhook_rows()
            .delete_webhook(id, now_ms())
            .await?;
        Ok(())
    }

    /// Queues a `ping` to one hook: a test of its receiver and its signature check.
    pub async fn ping(&self, caller: &Principal, id: &str) -> Result<String> {
        let hook = self.get(caller, id).await?;
        let ping = Alarm {
            kind: AlarmKind::Ping,
            id: format!("ping:{}", uuid::Uuid::new_v4()),
            cell: None,
            version: None,
            figures: serde_json::json!({}),
            link: format!("/v1/webhooks/{}/deliveries", hook.id),
            summary: "A test delivery asked for with POST /v1/webhooks/{hook}/ping".into(),
        };
        let now = now_ms();
        let body = ping.body(&self.webhook_settings.public_url, now);
        self.store
            .webhook_rows()
            .enqueue(&hook.id, &ping.id, ping.kind.as_str(), &body, now)
            .await?;
        self.delivery_queued.notify_one();
        Ok(ping.id)
    }

    /// A hook's log, newest first (a deleted hook's too).
    pub async fn deliveries(
        &self,
        caller: &Principal,
        id: &str,
        state: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Delivery>> {
        if let Some(s) = state
            && !DELIVERY_STATES.contains(&s)
        {
            return Err(Error::rejected(
                "the log cannot be read",
                vec![Problem::at(
                    None,
                    "state",
                    format!("{s:?} is not one of {}", DELIVERY_STATES.join(", ")),
                )],
            ));
        }
        // A deleted hook's log stays readable.
        let hook = self.find(caller, id, true).await?;
        self.store
            .webhook_rows()
            .deliveries(&hook.id, state, limit)
            .await
    }

    /// Queues each alarm not raised before to every live hook that subscribes to its type.
    /// An alarm this process has queued already costs nothing; one another replica queued is
    /// queued once all the same (its id is the idempotency key). A failure is logged, never
    /// returned: an alarm's delivery must not fail the work that found it.
    pub async fn raise(&self, alarms: Vec<Alarm>) {
        let fresh: Vec<Alarm> = match self.raised.lock() {
            Ok(raised) => alarms
                .into_iter()
                .filter(|a| !raised.contains(&a.id))
                .collect(),
            Err(_) => alarms,
        };
        if fresh.is_empty() {
            return;
        }
        if let Err(e) = self.queue(&fresh).await {
            tracing::warn!(error = ?e, "alarms not queued for webhooks; tried again at the next refresh");
            return;
        }
        if let Ok(mut raised) = self.raised.lock() {
            raised.extend(fresh.into_iter().map(|a| a.id));
        }
    }

    async fn queue(&self, alarms: &[Alarm]) -> Result<()> {
        let now = now_ms();
        let hooks = self.store.webhook_rows().live_webhooks(now).await?;
        let mut queued = 0;
        for alarm in alarms {
            tracing::info!(alarm = %alarm.id, summary = %alarm.summary, "alarm raised");
            let body = alarm.body(&self.webhook_settings.public_url, now);
            let kind = alarm.kind.as_str();
            for hook in hooks
                .iter()
                .filter(|h| h.events.is_empty() || h.events.iter().any(|e| e == kind))
            {
                if self
                    .store
                    .webhook_rows()
                    .enqueue(&hook.id, &alarm.id, kind, &body, now)
                    .await?
                {
                    queued += 1;
                }
            }
        }
        if queued > 0 {
            self.delivery_queued.notify_one();
        }
        Ok(())
    }
}

fn owner(caller: &Principal) -> Option<String> {
    match caller {
        Principal::Anonymous => None,
        Principal::Key { prefix, .. } => Some(prefix.clone()),
    }
}

fn sees(caller: &Principal, hook: &StoredWebhook) -> bool {
    caller.allows(Scope::Admin) || (hook.owner.is_some() && hook.owner == owner(caller))
}
