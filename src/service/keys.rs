//! API keys: made, listed, revoked, and checked on every request (through a short cache, so a
//! revocation reaches every replica within `auth.key_cache_secs`).

use super::families::Operations;
use crate::auth::{self, Principal, Scope};
use crate::domain::{Problem, now_ms};
use crate::error::{Error, Result};
use crate::store::StoredKey;

/// Why a caller was turned away.
#[derive(Debug, Clone, PartialEq)]
pub enum AuthFailure {
    /// No key, or one the service does not know, or one revoked or expired.
    Unauthenticated(String),
    /// A good key without the scope.
    Forbidden(String),
    /// The store could not be asked about the key: retry.
    Unavailable,
}

/// A key as `judgecal keys list` shows it: never the key, only its prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyInfo {
    pub prefix: String,
    pub name: String,
    pub scopes: String,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
}

impl From<StoredKey> for KeyInfo {
    fn from(k: StoredKey) -> Self {
        Self {
            prefix: k.prefix,
            name: k.name,
            scopes: k.scopes,
            created_at_ms: k.created_at_ms,
            expires_at_ms: k.expires_at_ms,
            revoked_at_ms: k.revoked_at_ms,
        }
    }
}

const DAY_MS: i64 = 86_400_000;

impl Operations<'_> {
    /// Creates an API key with the given scopes that does not expire; the key is returned once
    /// and stored hashed.
    pub async fn create_key(&self, scopes: &[Scope], name: &str) -> Result<String> {
        self.create_expiring_key(scopes, name, None).await
    }

    /// Creates an API key with the given scopes, expiring after `expires_in_days` where given.
    pub async fn create_expiring_key(
        &self,
        scopes: &[Scope],
        name: &str,
        expires_in_days: Option<u32>,
    ) -> Result<String> {
        if scopes.is_empty() {
            return Err(Error::invalid(
                "the key was refused",
                vec![Problem::at(None, "scope", "give at least one scope")],
            ));
        }
        if expires_in_days == Some(0) {
            return Err(Error::invalid(
                "the key was refused",
                vec![Problem::at(
                    None,
                    "expires_in_days",
                    "must be at least 1; leave it out for a key that does not expire",
                )],
            ));
        }
        let (key, prefix) = auth::new_key();
        let scopes = scopes
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let now = now_ms();
        let stored = StoredKey {
            id: uuid::Uuid::new_v4().to_string(),
            prefix,
            scopes,
            name: name.to_owned(),
            created_at_ms: now,
            expires_at_ms: expires_in_days.map(|d| now + i64::from(d) * DAY_MS),
            revoked_at_ms: None,
        };
        self.store
            .key_rows()
            .insert_key(&stored, &auth::hash_key(&key))
            .await?;
        Ok(key)
    }

    /// Every key ever made, revoked and expired ones included, oldest first.
    pub async fn keys(&self) -> Result<Vec<KeyInfo>> {
        Ok(self
            .store
            .key_rows()
            .keys()
            .await?
            .into_iter()
            .map(KeyInfo::from)
            .collect())
    }

    /// Revokes the key `which` names: the key itself, its prefix (`jc_1a2b3c4d`, as `keys list`
    /// shows it) or its name (every live key of that name). Not found where none is live.
    pub async fn revoke_key(&self, which: &str) -> Result<Vec<KeyInfo>> {
        let which = which.trim();
        if which.is_empty() {
            return Err(Error::rejected(
                "nothing was revoked",
                vec![Problem::at(
                    None,
                    "key",
                    "name a key, its prefix or its name",
                )],
            ));
        }
        let revoked = self
            .store
            .key_rows()
            .revoke_keys(&auth::hash_key(which), which, now_ms())
            .await?;
        if revoked.is_empty() {
            return Err(Error::NotFound(format!(
                "no live key is {which:?}, has that prefix or that name (`judgecal keys list` shows them)"
            )));
        }
        Ok(revoked.into_iter().map(KeyInfo::from).collect())
    }

    /// Resolves an `Authorization` header value to a principal that holds `scope` (any valid
    /// key where `scope` is `None`).
    pub async fn authorize(
        &self,
        header: Option<&str>,
        scope: Option<Scope>,
    ) -> Result<Principal, AuthFailure> {
        if self.auth_disabled {
            return Ok(Principal::Anonymous);
        }
        let Some(header) = header else {
            return Err(AuthFailure::Unauthenticated(
                "no API key: send `Authorization: Bearer <key>` (create one with `judgecal keys create`)".into(),
            ));
        };
        let Some(key) = header.strip_prefix("Bearer ").map(str::trim) else {
            return Err(AuthFailure::Unauthenticated(
                "the Authorization header must be `Bearer <key>`".into(),
            ));
        };
        let hash = auth::hash_key(key);
        let principal = match self.keys.get(&hash) {
            Some(cached) => cached,
            None => {
                let found = self
                    .store
                    .key_rows()
                    .key_by_hash(&hash)
                    .await
                    .map_err(|e| {
                        tracing::error!(error = ?e, "API key look-up failed");
                        AuthFailure::Unavailable
                    })?;
                // A revoked key is remembered as unknown.
                let principal =
                    found
                        .filter(|k| k.revoked_at_ms.is_none())
                        .map(|k| Principal::Key {
                            scopes: auth::parse_scopes(&k.scopes).unwrap_or_default(),
                            prefix: k.prefix,
                            expires_at_ms: k.expires_at_ms,
                        });
                self.keys.put(hash, principal.clone());
                principal
            }
        };
        match principal {
            None => Err(AuthFailure::Unauthenticated(
                "unknown or revoked API key".into(),
            )),
            Some(p) if p.expired(now_ms()) => Err(AuthFailure::Unauthenticated(format!(
                "API key {} has expired; ask for a new one",
                p.label()
            ))),
            Some(p) => match scope {
                Some(scope) if !p.allows(scope) => Err(AuthFailure::Forbidden(format!(
                    "key {} lacks the `{scope}` scope this request needs",
                    p.label()
                ))),
                _ => Ok(p),
            },
        }
    }
}
