//! API keys: a JSON file of SHA-256 hashes, each mapped to a tenant and identity claims,
//! re-read whenever its contents change.
//!
//! ```json
//! [{"tenant": "acme", "sha256": "<64 hex digits>", "identity": {"user_id": "svc-acme"}, "name": "acme-ci"}]
//! ```
//!
//! The file is polled (its contents, not its mtime): a Kubernetes Secret volume replaces its
//! files by swapping the `..data` symlink, which a read through the path follows. A file that
//! fails to parse keeps the last good set and logs an error that never quotes the file.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::{Principal, TENANT_CLAIM};

type Hash = [u8; 32];

/// The keys in force, swapped whole on reload.
pub struct KeySet {
    current: RwLock<Arc<HashMap<Hash, Principal>>>,
}

/// Why a key file was refused; never includes a value from the file.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("cannot read the API key file: {0}")]
    Read(std::io::ErrorKind),
    #[error("the API key file is not JSON (line {line}, column {column})")]
    Syntax { line: usize, column: usize },
    #[error("the API key file: {0}")]
    Entry(String),
}

/// SHA-256 of a key, as the file stores it (lower-case hex).
pub fn hash_hex(key: &str) -> String {
    Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex(s: &str) -> Option<Hash> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn tenant_problem(t: &str) -> Option<&'static str> {
    if t.is_empty() || t.len() > 128 {
        Some("\"tenant\" must be 1 to 128 bytes")
    } else if t.chars().any(char::is_control) {
        Some("\"tenant\" must not contain control characters")
    } else {
        None
    }
}

/// Parses the file's text into hash → principal. Messages name entries by position and
/// fields by name only: a key pasted into the wrong field is not echoed into the logs.
pub fn parse(text: &[u8]) -> Result<HashMap<Hash, Principal>, KeyFileError> {
    let doc: Value = serde_json::from_slice(text).map_err(|e| KeyFileError::Syntax { line: e.line(), column: e.column() })?;
    let Value::Array(entries) = doc else {
        return Err(KeyFileError::Entry("the top level must be a JSON array of keys".into()));
    };
    let mut keys = HashMap::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let bad = |what: &str| KeyFileError::Entry(format!("entry {i}: {what}"));
        let Value::Object(fields) = entry else {
            return Err(bad("must be an object"));
        };
        for name in fields.keys() {
            if !matches!(name.as_str(), "tenant" | "sha256" | "identity" | "name") {
                return Err(bad("unknown field (expected tenant, sha256, identity, name)"));
            }
        }
        let tenant = fields.get("tenant").and_then(Value::as_str).ok_or_else(|| bad("\"tenant\" must be a string"))?;
        if let Some(p) = tenant_problem(tenant) {
            return Err(bad(p));
        }
        let hash = fields
            .get("sha256")
            .and_then(Value::as_str)
            .and_then(|h| parse_hex(&h.to_ascii_lowercase()))
            .ok_or_else(|| bad("\"sha256\" must be the 64 hexadecimal digits of the key's SHA-256"))?;
        let mut identity = BTreeMap::new();
        match fields.get("identity") {
            None | Some(Value::Null) => {}
            Some(Value::Object(claims)) => {
                for (k, v) in claims {
                    let v = v.as_str().ok_or_else(|| bad("identity claims must be strings"))?;
                    if k.is_empty() {
                        return Err(bad("identity claim names must not be empty"));
                    }
                    identity.insert(k.clone(), v.to_string());
                }
            }
            Some(_) => return Err(bad("\"identity\" must be an object of string claims")),
        }
        if identity.get(TENANT_CLAIM).is_some_and(|t| t != tenant) {
            return Err(bad("identity.tenant_id differs from tenant"));
        }
        identity.insert(TENANT_CLAIM.to_string(), tenant.to_string());
        if fields.get("name").is_some_and(|n| !n.is_string()) {
            return Err(bad("\"name\" must be a string"));
        }
        if keys.insert(hash, Principal { tenant: tenant.to_string(), identity }).is_some() {
            return Err(bad("the same key hash appears twice"));
        }
    }
    Ok(keys)
}

impl KeySet {
    /// Loads the file (at start-up a broken file is an error) and re-reads it every
    /// `interval` until `stop` (see [`super::reload::watch_file`]).
    pub async fn load(path: PathBuf, interval: Duration, stop: CancellationToken) -> anyhow::Result<Arc<Self>> {
        let text = tokio::fs::read(&path).await.map_err(|e| KeyFileError::Read(e.kind()))?;
        let keys = parse(&text)?;
        if keys.is_empty() {
            tracing::warn!(path = %path.display(), "the API key file holds no keys: every call will be refused");
        }
        tracing::info!(path = %path.display(), keys = keys.len(), "API keys loaded");
        let this = Arc::new(Self { current: RwLock::new(Arc::new(keys)) });
        let set = this.clone();
        super::reload::watch_file("API key", path, text, interval, stop, move |text| {
            let keys = parse(text).map_err(|e| e.to_string())?;
            let n = keys.len();
            *set.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
            Ok(n)
        });
        Ok(this)
    }

    /// The principal of a presented key, if it is one of ours. The key is hashed first, so
    /// looking the hash up in a map reveals nothing about the key through timing.
    pub fn principal(&self, key: &str) -> Option<Principal> {
        let hash: Hash = Sha256::digest(key.as_bytes()).into();
        self.current.read().unwrap_or_else(|e| e.into_inner()).get(&hash).cloned()
    }

    pub fn len(&self) -> usize {
        self.current.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_of_a_key_is_lower_case_hex_sha256() {
        // printf %s secret | sha256sum
        assert_eq!(hash_hex("secret"), "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b");
    }

    #[test]
    fn a_key_file_maps_hashes_to_tenants_with_tenant_id_among_the_claims() {
        let text = format!(r#"[{{"tenant":"acme","sha256":"{}","identity":{{"user_id":"svc"}},"name":"ci"}}]"#, hash_hex("k1"));
        let keys = parse(text.as_bytes()).unwrap();
        let p = &keys[&<[u8; 32]>::from(Sha256::digest(b"k1"))];
        assert_eq!(p.tenant, "acme");
        assert_eq!(p.identity["user_id"], "svc");
        assert_eq!(p.identity["tenant_id"], "acme");
    }

    #[test]
    fn key_file_errors_never_quote_the_file() {
        let planted = "sk-live-planted-0123456789";
        for text in [
            format!(r#"[{{"tenant":"acme","sha256":"{planted}"}}]"#),
            format!(r#"[{{"tenant":"acme","key":"{planted}"}}]"#),
            format!(r#"[{{"tenant":"acme","sha256":"{}","identity":{{"user_id":["{planted}"]}}}}]"#, hash_hex("x")),
            format!(r#"[{{"tenant":"acme","sha256":"{planted}"#),
        ] {
            let e = parse(text.as_bytes()).unwrap_err().to_string();
            assert!(!e.contains(planted), "{e}");
        }
    }

    #[test]
    fn duplicate_hashes_and_conflicting_tenant_claims_are_refused() {
        let h = hash_hex("k");
        assert!(parse(format!(r#"[{{"tenant":"a","sha256":"{h}"}},{{"tenant":"b","sha256":"{h}"}}]"#).as_bytes()).is_err());
        assert!(parse(format!(r#"[{{"tenant":"a","sha256":"{h}","identity":{{"tenant_id":"b"}}}}]"#).as_bytes()).is_err());
    }
}
