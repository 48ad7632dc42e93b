//! Operator secrets for MCP header bindings: a definition names a secret, the server config
//! says where its value lives (an environment variable or a mounted file), which tenants may
//! use it and which upstream hosts it may be sent to. Values are read when a run's headers
//! are resolved and never stored in definitions, logs or errors.
//!
//! A spec (`--secret`, one per value): `NAME=env:VAR` or `NAME=file:PATH`, then options
//! separated by `;`: `tenant=ID` (repeatable; `tenant=*` = every tenant) and `host=PATTERN`
//! (repeatable; an outbound pattern such as `https://crm-mcp.internal`). `;` never occurs in
//! the flag's comma-separated list syntax, so a spec is read on its own.
//!
//! A secret without `tenant=` is usable only while authentication is off (every caller is
//! then tenant `default`); with authentication on nobody can use it until the operator names
//! its tenants. A secret without `host=` may go to any URL the outbound policy allows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::catalog::{AgentDefinition, HeaderValue, SourceKind};
use crate::error::FieldViolation;
use crate::outbound::{Policy, Target};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    File(PathBuf),
}

impl SecretSource {
    /// Where the value lives, for the operator's log only (never for tenants).
    fn location(&self) -> String {
        match self {
            SecretSource::Env(var) => format!("environment variable {var}"),
            SecretSource::File(path) => format!("file {}", path.display()),
        }
    }
}

/// Which tenants may bind a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tenants {
    /// No `tenant=` given: only while authentication is off.
    Unscoped,
    /// `tenant=*`.
    Any,
    Only(BTreeSet<String>),
}

/// One operator secret: where its value lives, who may use it, where it may be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    source: SecretSource,
    tenants: Tenants,
    /// `None`: any URL the outbound policy allows.
    hosts: Option<Policy>,
}

impl Secret {
    /// An unscoped secret (usable only while authentication is off).
    pub fn new(source: SecretSource) -> Self {
        Self { source, tenants: Tenants::Unscoped, hosts: None }
    }

    pub fn source(&self) -> &SecretSource {
        &self.source
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Also the answer for a secret of another tenant: a tenant cannot tell the two apart.
    #[error("unknown secret {0:?}: operator secrets are configured on the server (--secret), each for the tenants that may use it")]
    Unknown(String),
    #[error("secret {name:?} may not be sent to {target}: the operator allows it for other hosts only")]
    NotForHost { name: String, target: String },
    /// Where it was read from goes to the operator's log, not into this message.
    #[error("secret {0:?} could not be read on the server")]
    Unreadable(String),
    #[error("bad --secret {spec:?}: {problem}")]
    BadSpec { spec: String, problem: String },
    #[error("secret {0:?} is configured more than once (--secret / TOOLROUTER_SECRETS)")]
    Duplicate(String),
}

/// Secret name → its configuration, and whether callers authenticate (which decides what an
/// unscoped secret allows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secrets {
    secrets: BTreeMap<String, Secret>,
    duplicates: BTreeSet<String>,
    authentication: bool,
}

impl Default for Secrets {
    /// No secrets; authentication assumed on (unscoped secrets usable by nobody) until
    /// [`Secrets::for_server`] says otherwise.
    fn default() -> Self {
        Self { secrets: BTreeMap::new(), duplicates: BTreeSet::new(), authentication: true }
    }
}

const SPEC_HELP: &str =
    "use NAME=env:VAR or NAME=file:PATH, optionally followed by ;tenant=ID (repeatable, * = every tenant) and ;host=PATTERN (repeatable)";

/// Parses one `--secret` spec.
pub fn parse_spec(spec: &str) -> Result<(String, Secret), SecretError> {
    let bad = |problem: String| SecretError::BadSpec { spec: spec.to_string(), problem };
    let mut parts = spec.trim().split(';');
    let head = parts.next().unwrap_or_default();
    let (name, from) = head.split_once('=').ok_or_else(|| bad(SPEC_HELP.into()))?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')) {
        return Err(bad("a secret name has only ASCII letters, digits, '_', '-' and '.'".into()));
    }
    let source = match (from.strip_prefix("env:"), from.strip_prefix("file:")) {
        (Some(var), _) if !var.is_empty() => SecretSource::Env(var.to_string()),
        (_, Some(path)) if !path.is_empty() => SecretSource::File(PathBuf::from(path)),
        _ => return Err(bad(SPEC_HELP.into())),
    };
    let mut tenants = BTreeSet::new();
    let mut any_tenant = false;
    let mut hosts = Vec::new();
    for option in parts {
        match option.split_once('=') {
            Some(("tenant", "*")) => any_tenant = true,
            Some(("tenant", t)) if !t.is_empty() => {
                tenants.insert(t.to_string());
            }
            Some(("host", h)) if !h.is_empty() => {
                Policy::new(&[h]).map_err(|e| bad(format!("host={h}: {}", e.problem)))?;
                hosts.push(h.to_string());
            }
            _ => return Err(bad(format!("unknown option {option:?}: {SPEC_HELP}"))),
        }
    }
    if any_tenant && !tenants.is_empty() {
        return Err(bad("tenant=* already allows every tenant; drop the other tenant= options".into()));
    }
    let tenants = match (any_tenant, tenants.is_empty()) {
        (true, _) => Tenants::Any,
        (false, true) => Tenants::Unscoped,
        (false, false) => Tenants::Only(tenants),
    };
    let hosts = if hosts.is_empty() { None } else { Some(Policy::new(&hosts).map_err(|e| bad(e.problem))?) };
    Ok((name.to_string(), Secret { source, tenants, hosts }))
}

impl Secrets {
    /// Parses `--secret` specs.
    pub fn parse<'a>(specs: impl IntoIterator<Item = &'a str>) -> Result<Self, SecretError> {
        let mut out = Self::default();
        for spec in specs {
            let (name, secret) = parse_spec(spec)?;
            out.insert_secret(name, secret);
        }
        out.check_duplicates()?;
        Ok(out)
    }

    /// Adds an unscoped secret.
    pub fn insert(&mut self, name: impl Into<String>, source: SecretSource) {
        self.insert_secret(name, Secret::new(source));
    }

    /// Adds a secret; a name given twice is reported by [`Secrets::for_server`].
    pub fn insert_secret(&mut self, name: impl Into<String>, secret: Secret) {
        let name = name.into();
        if self.secrets.insert(name.clone(), secret).is_some() {
            self.duplicates.insert(name);
        }
    }

    pub fn get(&self, name: &str) -> Option<&Secret> {
        self.secrets.get(name)
    }

    fn check_duplicates(&self) -> Result<(), SecretError> {
        match self.duplicates.first() {
            Some(name) => Err(SecretError::Duplicate(name.clone())),
            None => Ok(()),
        }
    }

    /// The secrets as the server uses them: a name configured twice stops start-up, and with
    /// authentication on every secret that names no tenant is reported in a warning (nobody
    /// can use it).
    pub fn for_server(mut self, authentication: bool) -> Result<Self, SecretError> {
        self.check_duplicates()?;
        self.authentication = authentication;
        if authentication {
            for (name, s) in &self.secrets {
                if s.tenants == Tenants::Unscoped {
                    tracing::warn!(
                        secret = %name,
                        "operator secret names no tenant: with authentication on no tenant can use it; add ;tenant=ID (or ;tenant=* for every tenant) to its --secret"
                    );
                }
            }
        }
        Ok(self)
    }

    fn tenant_may_use(&self, secret: &Secret, tenant: &str) -> bool {
        match &secret.tenants {
            Tenants::Unscoped => !self.authentication,
            Tenants::Any => true,
            Tenants::Only(t) => t.contains(tenant),
        }
    }

    /// May `tenant` send secret `name` to `url`? Checked at registration and again whenever
    /// the value is read, so a definition stored before the operator narrowed a secret does
    /// not get it.
    pub fn check(&self, name: &str, tenant: &str, url: &str) -> Result<&Secret, SecretError> {
        let secret = self.secrets.get(name).filter(|s| self.tenant_may_use(s, tenant)).ok_or_else(|| SecretError::Unknown(name.to_string()))?;
        if let Some(hosts) = &secret.hosts
            && hosts.check_url(url).is_err()
        {
            let target = Target::parse(url).map(|t| t.to_string()).unwrap_or_else(|_| "this URL".into());
            return Err(SecretError::NotForHost { name: name.to_string(), target });
        }
        Ok(secret)
    }

    /// Reads a secret's current value (a mounted file may have been rotated) for `tenant`,
    /// to be sent to `url`.
    pub fn read(&self, name: &str, tenant: &str, url: &str) -> Result<String, SecretError> {
        let secret = self.check(name, tenant, url)?;
        let value = match &secret.source {
            SecretSource::Env(var) => std::env::var(var).ok(),
            // Mounted secrets usually end with a newline that is not part of the value.
            SecretSource::File(path) => std::fs::read_to_string(path).ok().map(|v| v.trim_end_matches(['\r', '\n']).to_string()),
        };
        value.ok_or_else(|| {
            tracing::warn!(secret = %name, from = %secret.source.location(), "operator secret could not be read");
            SecretError::Unreadable(name.to_string())
        })
    }
}

/// Every header binding of a definition naming a secret its tenant may not use, or may not
/// send to the source's URL, with its field path (as `catalog::validate` names fields).
pub fn violations(secrets: &Secrets, tenant: &str, def: &AgentDefinition) -> Vec<FieldViolation> {
    let mut out = Vec::new();
    for (i, source) in def.sources.iter().enumerate() {
        let SourceKind::Mcp(m) = &source.kind else { continue };
        for (header, binding) in &m.headers {
            if let HeaderValue::Secret(name) = &binding.value
                && let Err(e) = secrets.check(name, tenant, &m.url)
            {
                out.push(FieldViolation::new(format!("definition.sources[{i}].mcp.headers[{header:?}].secret"), e.to_string()));
            }
        }
        // An OAuth client secret is an operator secret too, checked the same way.
        if let Some(o) = &m.oauth
            && !o.client_secret.is_empty()
            && let Err(e) = secrets.check(&o.client_secret, tenant, &m.url)
        {
            out.push(FieldViolation::new(format!("definition.sources[{i}].mcp.oauth.client_secret"), e.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(specs: &[&str]) -> Secrets {
        Secrets::parse(specs.iter().copied()).unwrap().for_server(false).unwrap()
    }

    fn authenticated(specs: &[&str]) -> Secrets {
        Secrets::parse(specs.iter().copied()).unwrap().for_server(true).unwrap()
    }

    #[test]
    fn specs_name_env_vars_and_files() {
        let s = Secrets::parse(["a=env:A_TOKEN", "b=file:/run/secrets/b"]).unwrap();
        assert_eq!(s.get("a").unwrap().source, SecretSource::Env("A_TOKEN".into()));
        assert_eq!(s.get("b").unwrap().source, SecretSource::File("/run/secrets/b".into()));
        for bad in [
            "a=token",
            "a=env:",
            "a=file:",
            "=env:X",
            "a b=env:X",
            "a=env:X;tenant=",
            "a=env:X;tenants=acme",
            "a=env:X;host=",
            "a=env:X;host=ftp://x",
            "a=env:X;tenant=*;tenant=acme",
            "a=env:X;x",
        ] {
            assert!(matches!(Secrets::parse([bad]), Err(SecretError::BadSpec { .. })), "{bad}");
        }
        assert_eq!(Secrets::parse(["a=env:X", "a=file:/y"]), Err(SecretError::Duplicate("a".into())));
    }

    #[test]
    fn tenants_and_hosts_scope_a_secret() {
        let s = authenticated(&["crm=env:CRM;tenant=acme;tenant=globex;host=https://crm-mcp.internal;host=*.crm.svc:8443"]);
        assert!(s.check("crm", "acme", "https://crm-mcp.internal/mcp").is_ok());
        assert!(s.check("crm", "globex", "https://a.crm.svc:8443/mcp").is_ok());
        assert_eq!(s.check("crm", "initech", "https://crm-mcp.internal/mcp").unwrap_err(), SecretError::Unknown("crm".into()));
        assert_eq!(s.check("nothing", "acme", "https://crm-mcp.internal/mcp").unwrap_err(), SecretError::Unknown("nothing".into()));
        let e = s.check("crm", "acme", "http://crm-mcp.internal/mcp").unwrap_err();
        assert_eq!(e, SecretError::NotForHost { name: "crm".into(), target: "crm-mcp.internal:80".into() });
        assert!(s.check("crm", "acme", "https://evil.example.com/mcp?crm-mcp.internal").is_err());
        assert!(s.check("crm", "acme", "https://a.crm.svc/mcp").is_err(), "port 443 is not 8443");
    }

    #[test]
    fn an_unscoped_secret_is_usable_only_without_authentication() {
        let spec = ["crm=env:CRM"];
        assert!(open(&spec).check("crm", "default", "http://127.0.0.1:1/mcp").is_ok());
        assert_eq!(authenticated(&spec).check("crm", "default", "http://127.0.0.1:1/mcp").unwrap_err(), SecretError::Unknown("crm".into()));
        let any = authenticated(&["crm=env:CRM;tenant=*"]);
        assert!(any.check("crm", "whoever", "http://127.0.0.1:1/mcp").is_ok());
        assert!(Secrets::default().check("crm", "default", "http://x").is_err(), "no secrets by default");
    }

    #[test]
    fn messages_never_show_where_a_value_lives_or_the_value() {
        let dir = std::env::temp_dir().join(format!("toolrouter-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tok");
        std::fs::write(&path, "s3cr3t-value\n").unwrap();
        let mut s = Secrets::default();
        s.insert("tok", SecretSource::File(path.clone()));
        s.insert("env", SecretSource::Env("TOOLROUTER_UNIT_TEST_UNSET_VAR_51c".into()));
        let s = s.for_server(false).unwrap();
        let url = "http://127.0.0.1:1/mcp";
        assert_eq!(s.read("tok", "default", url).unwrap(), "s3cr3t-value", "without the trailing newline");
        std::fs::remove_file(&path).unwrap();
        for name in ["tok", "env"] {
            let e = s.read(name, "default", url).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
            assert!(!e.contains("s3cr3t") && !e.contains("toolrouter-secret") && !e.contains("UNSET_VAR"), "{e}");
        }
    }

    #[test]
    fn registration_violations_name_the_header_binding() {
        use crate::catalog::{HeaderBinding, McpSource, ToolSource};
        let binding = |name: &str| HeaderBinding { value: HeaderValue::Secret(name.into()), prefix: String::new() };
        let mcp = McpSource {
            url: "http://127.0.0.1:9/mcp".into(),
            headers: [("Authorization".to_string(), binding("crm")), ("X-Other".to_string(), binding("other"))].into(),
            ..Default::default()
        };
        let def = AgentDefinition {
            sources: vec![ToolSource { id: "crm".into(), kind: SourceKind::Mcp(mcp), ..Default::default() }],
            ..Default::default()
        };
        let s = authenticated(&["crm=env:CRM;tenant=acme", "other=env:O;tenant=acme;host=127.0.0.1:10"]);
        let v = violations(&s, "acme", &def);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].field, "definition.sources[0].mcp.headers[\"X-Other\"].secret");
        assert!(v[0].description.contains("may not be sent to 127.0.0.1:9"), "{}", v[0].description);
        let v = violations(&s, "globex", &def);
        assert_eq!(v.len(), 2);
        assert!(v.iter().all(|x| x.description.starts_with("unknown secret")), "{v:?}");
    }
}
