//! Operator secrets for MCP header bindings: a definition names a secret, the server config
//! says where its value lives (an environment variable or a mounted file). Values are read
//! when a run's headers are resolved and never stored in definitions, logs or errors.

use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    File(PathBuf),
}

/// Secret name → where its value is read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    sources: BTreeMap<String, SecretSource>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("secret {0:?} is not configured on this server (--secret {0}=env:VAR or {0}=file:/path)")]
    Unknown(String),
    /// The message names the secret and its location, never its value.
    #[error("secret {name:?} could not be read from {from}")]
    Unreadable { name: String, from: String },
    #[error("bad --secret {0:?}: use NAME=env:VAR or NAME=file:/path")]
    BadSpec(String),
}

impl Secrets {
    /// Parses `NAME=env:VAR` / `NAME=file:/path` specs (the `--secret` flag).
    pub fn parse<'a>(specs: impl IntoIterator<Item = &'a str>) -> Result<Self, SecretError> {
        let mut sources = BTreeMap::new();
        for spec in specs {
            let bad = || SecretError::BadSpec(spec.to_string());
            let (name, from) = spec.split_once('=').ok_or_else(bad)?;
            let source = if let Some(var) = from.strip_prefix("env:") {
                SecretSource::Env(var.to_string())
            } else if let Some(path) = from.strip_prefix("file:") {
                SecretSource::File(PathBuf::from(path))
            } else {
                return Err(bad());
            };
            if name.is_empty() || from.ends_with(':') {
                return Err(bad());
            }
            sources.insert(name.to_string(), source);
        }
        Ok(Self { sources })
    }

    pub fn source(&self, name: &str) -> Option<&SecretSource> {
        self.sources.get(name)
    }

    pub fn insert(&mut self, name: impl Into<String>, source: SecretSource) {
        self.sources.insert(name.into(), source);
    }

    /// Reads a secret's current value (a mounted file may have been rotated).
    pub fn read(&self, name: &str) -> Result<String, SecretError> {
        match self.sources.get(name) {
            None => Err(SecretError::Unknown(name.to_string())),
            Some(SecretSource::Env(var)) => std::env::var(var)
                .map_err(|_| SecretError::Unreadable { name: name.to_string(), from: format!("environment variable {var}") }),
            Some(SecretSource::File(path)) => std::fs::read_to_string(path)
                // Mounted secrets usually end with a newline that is not part of the value.
                .map(|v| v.trim_end_matches(['\r', '\n']).to_string())
                .map_err(|_| SecretError::Unreadable { name: name.to_string(), from: format!("file {}", path.display()) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_env_vars_and_files() {
        let s = Secrets::parse(["a=env:A_TOKEN", "b=file:/run/secrets/b"]).unwrap();
        assert_eq!(s.sources["a"], SecretSource::Env("A_TOKEN".into()));
        assert_eq!(s.sources["b"], SecretSource::File("/run/secrets/b".into()));
        assert!(Secrets::parse(["a=token"]).is_err());
        assert!(Secrets::parse(["a=env:"]).is_err());
        assert!(Secrets::parse(["=env:X"]).is_err());
    }

    #[test]
    fn file_secrets_are_read_without_the_trailing_newline_and_errors_omit_the_value() {
        let dir = std::env::temp_dir().join(format!("toolrouter-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tok");
        std::fs::write(&path, "s3cr3t-value\n").unwrap();
        let mut s = Secrets::default();
        s.insert("tok", SecretSource::File(path.clone()));
        assert_eq!(s.read("tok").unwrap(), "s3cr3t-value");
        std::fs::remove_file(&path).unwrap();
        let e = s.read("tok").unwrap_err().to_string();
        assert!(e.contains("tok") && !e.contains("s3cr3t"), "{e}");
        assert!(matches!(s.read("other"), Err(SecretError::Unknown(_))));
    }
}
