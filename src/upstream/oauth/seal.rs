//! Sealing secrets before they reach the store (AES-256-GCM, aws-lc-rs).
//!
//! A sealed blob is base64 (standard) text of: version byte 1 | key id (4 bytes: the first
//! four of SHA-256 of the key) | nonce (12 random bytes) | ciphertext and tag. The additional
//! authenticated data binds a blob to its row (see [`row_aad`]): a blob copied into another
//! row does not open there.
//!
//! Keys come from a file of one base64 32-byte key per line: the first seals, every one opens,
//! so a key is rotated by putting a new one first and keeping the old ones until what they
//! sealed has been re-sealed or has expired.

use std::fmt;
use std::path::Path;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

/// The format version of a sealed blob.
const VERSION: u8 = 1;
const KEY_ID_LEN: usize = 4;
const TAG_LEN: usize = 16;
const HEADER_LEN: usize = 1 + KEY_ID_LEN + NONCE_LEN;

/// Why a blob did not open. Never carries the blob or a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Not base64, too short, or an unknown format version.
    #[error("the sealed value is malformed: {0}")]
    Malformed(&'static str),
    /// Sealed with a key the key file no longer holds.
    #[error("the sealed value was sealed with a key that is not in the key file (key id {0})")]
    UnknownKey(String),
    /// The key is known but the blob does not authenticate: tampered, or bound to another row.
    #[error("the sealed value does not authenticate (tampered, or sealed for another row)")]
    Failed,
}

struct Key {
    id: [u8; KEY_ID_LEN],
    key: LessSafeKey,
}

/// The sealing keys: the first seals, every one opens.
pub struct Sealer {
    keys: Vec<Key>,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer").field("key_ids", &self.keys.iter().map(|k| hex(&k.id)).collect::<Vec<_>>()).finish()
    }
}

impl Sealer {
    /// Reads the key file: one key per line, base64 (standard) of 32 random bytes; the first
    /// key seals, every key opens. Blank lines and lines starting with '#' are ignored.
    /// Errors name the file and the line, never a key.
    pub fn from_file(path: &Path) -> Result<Sealer, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading the OAuth key file {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("the OAuth key file {}: {e}", path.display()))
    }

    /// Parses the key file's text (see [`Sealer::from_file`]).
    pub fn parse(text: &str) -> Result<Sealer, String> {
        let mut keys = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let n = i + 1;
            let bytes = STANDARD.decode(line).map_err(|_| format!("line {n} is not a base64 (standard alphabet) key"))?;
            let key: [u8; 32] = bytes
                .try_into()
                .map_err(|b: Vec<u8>| format!("line {n} decodes to {} bytes; a key is 32 random bytes (e.g. `openssl rand -base64 32`)", b.len()))?;
            keys.push(key);
        }
        if keys.is_empty() {
            return Err("it holds no key (one base64 32-byte key per line, e.g. `openssl rand -base64 32`)".into());
        }
        Ok(Self::from_keys(keys))
    }

    /// The keys themselves (tests): the first seals. Panics when `keys` is empty.
    pub fn from_keys(keys: Vec<[u8; 32]>) -> Sealer {
        assert!(!keys.is_empty(), "a Sealer needs at least one key");
        let keys = keys
            .iter()
            .map(|k| {
                let digest = Sha256::digest(k);
                let mut id = [0u8; KEY_ID_LEN];
                id.copy_from_slice(&digest[..KEY_ID_LEN]);
                Key { id, key: LessSafeKey::new(UnboundKey::new(&AES_256_GCM, k).expect("a 32-byte AES-256 key")) }
            })
            .collect();
        Sealer { keys }
    }

    /// Seals `plain`, bound to `aad`: base64 of version 1 | key id | nonce | ciphertext+tag.
    pub fn seal(&self, plain: &[u8], aad: &[u8]) -> String {
        let key = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).expect("the system random number generator");
        let mut out = Vec::with_capacity(HEADER_LEN + plain.len() + TAG_LEN);
        out.push(VERSION);
        out.extend_from_slice(&key.id);
        out.extend_from_slice(&nonce);
        let mut body = plain.to_vec();
        key.key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), &mut body).expect("AES-256-GCM sealing");
        out.extend_from_slice(&body);
        STANDARD.encode(out)
    }

    /// Opens a blob sealed by any of the keys, bound to the same `aad`.
    pub fn open(&self, sealed: &str, aad: &[u8]) -> Result<Vec<u8>, SealError> {
        let raw = STANDARD.decode(sealed.trim()).map_err(|_| SealError::Malformed("not base64"))?;
        if raw.len() < HEADER_LEN + TAG_LEN {
            return Err(SealError::Malformed("too short"));
        }
        if raw[0] != VERSION {
            return Err(SealError::Malformed("unknown format version"));
        }
        let id = &raw[1..1 + KEY_ID_LEN];
        let nonce: [u8; NONCE_LEN] = raw[1 + KEY_ID_LEN..HEADER_LEN].try_into().expect("NONCE_LEN bytes");
        let mut known = false;
        // Ids are 4 bytes: two keys may share one, so each key with the id is tried.
        for key in self.keys.iter().filter(|k| k.id == id) {
            known = true;
            let mut body = raw[HEADER_LEN..].to_vec();
            if let Ok(plain) = key.key.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad), &mut body) {
                let n = plain.len();
                body.truncate(n);
                return Ok(body);
            }
        }
        if known { Err(SealError::Failed) } else { Err(SealError::UnknownKey(hex(id))) }
    }
}

/// Additional authenticated data binding a sealed blob to its row: a domain tag, the kind of
/// row, then each part (tenant, user, source, ...) length-prefixed, so no two different lists
/// of parts give the same bytes.
pub fn row_aad(kind: &str, parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + kind.len() + parts.iter().map(|p| p.len() + 4).sum::<usize>());
    out.extend_from_slice(b"toolrouter-oauth/v1\0");
    for part in std::iter::once(&kind).chain(parts) {
        out.extend_from_slice(&(part.len() as u32).to_be_bytes());
        out.extend_from_slice(part.as_bytes());
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: [u8; 32] = [1; 32];
    const K2: [u8; 32] = [2; 32];

    #[test]
    fn a_sealed_value_opens_with_the_same_aad() {
        let s = Sealer::from_keys(vec![K1]);
        let aad = row_aad("token", &["t", "u", "src"]);
        let sealed = s.seal(b"the tokens", &aad);
        assert!(!sealed.contains("the tokens"));
        assert_eq!(s.open(&sealed, &aad).unwrap(), b"the tokens");
        // Two seals of the same value differ (random nonces).
        assert_ne!(sealed, s.seal(b"the tokens", &aad));
        // Empty plaintext round-trips too.
        assert_eq!(s.open(&s.seal(b"", &aad), &aad).unwrap(), b"");
    }

    #[test]
    fn another_rows_aad_does_not_open() {
        let s = Sealer::from_keys(vec![K1]);
        let sealed = s.seal(b"secret", &row_aad("token", &["t", "u", "src"]));
        assert_eq!(s.open(&sealed, &row_aad("token", &["t", "u", "other"])), Err(SealError::Failed));
        assert_eq!(s.open(&sealed, &row_aad("consent", &["t", "u", "src"])), Err(SealError::Failed));
        // Length prefixes: moving a boundary between parts changes the AAD.
        assert_ne!(row_aad("k", &["ab", "c"]), row_aad("k", &["a", "bc"]));
    }

    #[test]
    fn rotation_old_keys_open_the_first_seals() {
        let old = Sealer::from_keys(vec![K1]);
        let sealed_old = old.seal(b"old", b"row");
        let rotated = Sealer::from_keys(vec![K2, K1]);
        assert_eq!(rotated.open(&sealed_old, b"row").unwrap(), b"old");
        let sealed_new = rotated.seal(b"new", b"row");
        assert_eq!(rotated.open(&sealed_new, b"row").unwrap(), b"new");
        // Sealed with the new key: the old key file cannot open it.
        assert!(matches!(old.open(&sealed_new, b"row"), Err(SealError::UnknownKey(_))));
        // Once the old key is dropped, what it sealed no longer opens.
        assert!(matches!(Sealer::from_keys(vec![K2]).open(&sealed_old, b"row"), Err(SealError::UnknownKey(_))));
    }

    #[test]
    fn a_tampered_blob_does_not_open() {
        let s = Sealer::from_keys(vec![K1]);
        let sealed = s.seal(b"secret value", b"row");
        let raw = STANDARD.decode(&sealed).unwrap();
        for i in [HEADER_LEN - 1, HEADER_LEN, raw.len() - 1] {
            let mut bad = raw.clone();
            bad[i] ^= 1;
            assert_eq!(s.open(&STANDARD.encode(&bad), b"row"), Err(SealError::Failed), "byte {i}");
        }
        let mut bad = raw.clone();
        bad[0] = 2;
        assert_eq!(s.open(&STANDARD.encode(&bad), b"row"), Err(SealError::Malformed("unknown format version")));
        assert_eq!(s.open(&STANDARD.encode(&raw[..HEADER_LEN + TAG_LEN - 1]), b"row"), Err(SealError::Malformed("too short")));
        assert_eq!(s.open("not base64!", b"row"), Err(SealError::Malformed("not base64")));
    }

    #[test]
    fn the_key_file_takes_comments_and_blank_lines_and_names_bad_lines() {
        let k1 = STANDARD.encode(K1);
        let k2 = STANDARD.encode(K2);
        let s = Sealer::parse(&format!("# new key first\n\n  {k2}  \n# the old one\n{k1}\n")).unwrap();
        assert_eq!(s.keys.len(), 2);
        let sealed = s.seal(b"x", b"row");
        assert_eq!(Sealer::from_keys(vec![K2]).open(&sealed, b"row").unwrap(), b"x");

        let short = STANDARD.encode([7u8; 16]);
        let err = Sealer::parse(&format!("{k1}\n# c\n{short}\n")).err().unwrap();
        assert!(err.contains("line 3") && err.contains("16 bytes"), "{err}");
        assert!(!err.contains(&short) && !err.contains(&k1), "{err}");

        let bad = "c2VjcmV0IGtleSBtYXRlcmlhbA==!";
        let err = Sealer::parse(&format!("\n{bad}\n")).err().unwrap();
        assert!(err.contains("line 2") && err.contains("base64"), "{err}");
        assert!(!err.contains(bad), "{err}");

        let err = Sealer::parse("# only a comment\n\n").err().unwrap();
        assert!(err.contains("no key"), "{err}");
    }

    #[test]
    fn from_file_names_the_file() {
        let dir = std::env::temp_dir().join(format!("toolrouter-seal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys");
        std::fs::write(&path, format!("{}\n", STANDARD.encode(K1))).unwrap();
        let s = Sealer::from_file(&path).unwrap();
        assert_eq!(s.open(&s.seal(b"x", b"a"), b"a").unwrap(), b"x");
        std::fs::write(&path, "not a key\n").unwrap();
        let err = Sealer::from_file(&path).err().unwrap();
        assert!(err.contains(&path.display().to_string()) && err.contains("line 1"), "{err}");
        let missing = Sealer::from_file(&dir.join("missing")).err().unwrap();
        assert!(missing.contains("missing"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn debug_shows_key_ids_only() {
        let s = Sealer::from_keys(vec![K1]);
        let d = format!("{s:?}");
        assert!(d.contains(&hex(&s.keys[0].id)) && !d.contains(&STANDARD.encode(K1)) && !d.contains(&hex(&K1)), "{d}");
    }
}
