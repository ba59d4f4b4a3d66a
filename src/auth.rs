//! API keys and scopes. A key is `jc_` + 64 hex digits of randomness; the store keeps its
//! SHA-256 only. `admin` allows everything.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Upload, list and delete anchors.
    Ingest,
    /// Correct scores.
    Correct,
    /// Start and watch calibration jobs.
    Train,
    /// Scrape `GET /metrics` where `auth.protect_metrics` puts it behind a key.
    Metrics,
    /// Everything, including rubric scales.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 5] = [
        Scope::Ingest,
        Scope::Correct,
        Scope::Train,
        Scope::Metrics,
        Scope::Admin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Correct => "correct",
            Scope::Train => "train",
            Scope::Metrics => "metrics",
            Scope::Admin => "admin",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| {
                format!("unknown scope {s:?}; one of ingest, correct, train, metrics, admin")
            })
    }
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq)]
pub enum Principal {
    /// `auth.disabled = true`: everything is allowed.
    Anonymous,
    Key {
        prefix: String,
        scopes: Vec<Scope>,
        /// When the key stops working (Unix ms), where it was made with an expiry.
        expires_at_ms: Option<i64>,
    },
}

impl Principal {
    pub fn allows(&self, scope: Scope) -> bool {
        match self {
            Principal::Anonymous => true,
            Principal::Key { scopes, .. } => {
                scopes.contains(&Scope::Admin) || scopes.contains(&scope)
            }
        }
    }

    /// Whether the key has expired at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> bool {
        match self {
            Principal::Anonymous => false,
            Principal::Key { expires_at_ms, .. } => expires_at_ms.is_some_and(|e| now_ms >= e),
        }
    }

    /// For logs: never the key, only its public prefix.
    pub fn label(&self) -> &str {
        match self {
            Principal::Anonymous => "anonymous",
            Principal::Key { prefix, .. } => prefix,
        }
    }
}

pub fn parse_scopes(s: &str) -> Result<Vec<Scope>, String> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(str::parse)
        .collect()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn hash_key(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

/// A new random key and its public prefix (the first 8 hex digits, for telling keys apart).
pub fn new_key() -> (String, String) {
    let secret = hex(&rand::random::<[u8; 32]>());
    let prefix = format!("jc_{}", &secret[..8]);
    (format!("jc_{secret}"), prefix)
}

/// Remembers recently seen keys so that a busy client costs one store look-up every
/// `auth.key_cache_secs` (2 s by default), not one a request; a revoked key is refused once
/// its entry is that old.
pub struct KeyCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Option<Principal>)>>,
}

impl KeyCache {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(answer)` if the hash was looked up within the TTL (`answer` is `None` for an
    /// unknown key).
    pub fn get(&self, hash: &str) -> Option<Option<Principal>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(hash)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, p)| p.clone())
    }

    pub fn put(&self, hash: String, principal: Option<Principal>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: unknown keys sent at random must not grow it without limit.
        if entries.len() > 10_000 {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
            if entries.len() > 10_000 {
                entries.clear();
            }
        }
        entries.insert(hash, (Instant::now(), principal));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_allows_every_scope_and_others_only_their_own() {
        let admin = Principal::Key {
            prefix: "p".into(),
            scopes: vec![Scope::Admin],
            expires_at_ms: None,
        };
        let ingest = Principal::Key {
            prefix: "p".into(),
            scopes: vec![Scope::Ingest],
            expires_at_ms: Some(1_000),
        };
        assert!(Scope::ALL.iter().all(|s| admin.allows(*s)));
        assert!(ingest.allows(Scope::Ingest));
        assert!(!ingest.allows(Scope::Correct));
        assert!(!ingest.allows(Scope::Metrics));
        assert!(!ingest.expired(999) && ingest.expired(1_000));
        assert!(!admin.expired(i64::MAX));
    }

    #[test]
    fn keys_are_random_and_hash_deterministically() {
        let (a, prefix) = new_key();
        let (b, _) = new_key();
        assert_ne!(a, b);
        assert!(a.starts_with(&prefix) && a.len() == 67);
        assert_eq!(hash_key(&a), hash_key(&a));
        assert_eq!(
            hash_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn scopes_parse_from_a_list() {
        assert_eq!(
            parse_scopes("ingest,train").unwrap(),
            vec![Scope::Ingest, Scope::Train]
        );
        assert!(parse_scopes("ingest,root").is_err());
    }
}
