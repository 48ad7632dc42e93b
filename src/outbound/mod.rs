//! Outbound targets (SPEC §9): which executor endpoints and MCP URLs toolrouter may reach.
//!
//! A target must match an operator pattern when its definition is registered and again on
//! every connection, where the addresses a name resolves to are checked too (DNS rebinding)
//! and only an address that passed is connected to. Link-local, cloud metadata, unspecified
//! and multicast addresses are refused whatever the patterns say.
//!
//! Patterns: `[http://|https://]HOST[:PORT]` where HOST is `*` (any host), `*.example.com`
//! (any name below it), an exact name, an IP address (IPv6 in brackets when a port follows),
//! or a CIDR (`10.0.0.0/8`, `fd00::/8`, `[fd00::/8]:7000`); PORT is a number or `*`. Without
//! a scheme or port a pattern matches any. Name patterns match names, address patterns match
//! URLs written with an address; the addresses a name resolves to may be anything but the
//! always-refused ones, except loopback, which only an address pattern (or `*`) allows.

pub mod connect;
pub mod tls;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::catalog::{AgentDefinition, SourceKind};
use crate::error::FieldViolation;

pub use connect::{ConnectError, Connector, Resolver};
pub use tls::{TlsError, UpstreamTls, UpstreamTlsConfig};

/// The patterns in force when the operator gives none: loopback only.
pub const DEFAULT_PATTERNS: &[&str] = &["127.0.0.0/8", "::1", "localhost"];

/// Host names of cloud metadata services, refused whatever they resolve to.
const METADATA_NAMES: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.azure.com",
    "metadata.tencentyun.com",
];

/// Cloud metadata addresses outside the link-local range (AWS IPv6, Alibaba, Oracle, Azure's
/// platform host); 169.254.169.254 and the ECS task endpoint are named for clearer messages.
const METADATA_ADDRESSES: &[IpAddr] = &[
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V4(Ipv4Addr::new(192, 0, 0, 192)),
    IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
];

/// Everything the operator configures about outbound connections.
#[derive(Debug, Clone, Default)]
pub struct OutboundConfig {
    /// Allowed target patterns; empty = [`DEFAULT_PATTERNS`].
    pub allow: Vec<String>,
    pub tls: UpstreamTlsConfig,
}

/// The policy and the TLS settings every outbound connection uses.
#[derive(Debug, Clone)]
pub struct Outbound {
    pub policy: Arc<Policy>,
    pub tls: Arc<UpstreamTls>,
}

impl Outbound {
    /// Parses the patterns and loads the TLS files; any problem stops start-up.
    pub fn from_config(cfg: &OutboundConfig) -> Result<Self, OutboundConfigError> {
        Ok(Self { policy: Arc::new(Policy::new(&cfg.allow)?), tls: Arc::new(UpstreamTls::load(&cfg.tls)?) })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OutboundConfigError {
    #[error(transparent)]
    Pattern(#[from] PatternError),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }

    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Any,
    /// `*.example.com`, stored as `.example.com`.
    Below(String),
    Name(String),
    Net(IpNet),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    scheme: Option<Scheme>,
    host: HostPattern,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid outbound pattern {pattern:?} (--outbound-allow): {problem}")]
pub struct PatternError {
    pub pattern: String,
    pub problem: String,
}

impl FromStr for Pattern {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (scheme, rest) = match text.split_once("://") {
            Some((s, rest)) => (Some(Scheme::parse(s).ok_or("the scheme must be http or https")?), rest),
            None => (None, text),
        };
        if rest.is_empty() {
            return Err("a host is required (`*` allows any host)".into());
        }
        if rest.contains(['@', '?', '#']) {
            return Err("a pattern is [scheme://]host[:port], without user, query or fragment".into());
        }
        // Bracketed IPv6 (or IPv6 CIDR), bare IPv6 (no port), or host[:port].
        let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
            let (inner, after) = inner.split_once(']').ok_or("an unclosed '['")?;
            match after {
                "" => (inner, None),
                p => (inner, Some(p.strip_prefix(':').ok_or("only :PORT may follow ']'")?)),
            }
        } else if rest.matches(':').count() > 1 {
            (rest, None)
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        let port = match port {
            None | Some("*") => None,
            Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p != 0).ok_or("the port must be 1-65535 or *")?),
        };
        Ok(Pattern { scheme, host: host_pattern(host)?, port })
    }
}

fn host_pattern(host: &str) -> Result<HostPattern, String> {
    if host == "*" {
        return Ok(HostPattern::Any);
    }
    if host.contains('/') {
        let net = IpNet::from_str(host).map_err(|_| format!("{host:?} is not a CIDR such as 10.0.0.0/8 or fd00::/8"))?;
        return Ok(HostPattern::Net(canonical_net(net.trunc())));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        let ip = ip.to_canonical();
        return Ok(HostPattern::Net(IpNet::from(ip)));
    }
    let name = normalize_name(host);
    if let Some(below) = name.strip_prefix("*.") {
        if !is_dns_name(below) {
            return Err(format!("{host:?}: after '*.' comes a DNS name"));
        }
        return Ok(HostPattern::Below(format!(".{below}")));
    }
    if name.contains('*') {
        return Err("'*' is allowed only as the whole host or as the first label (*.example.com)".into());
    }
    if !is_dns_name(&name) {
        return Err(format!("{host:?} is not a host name, IP address or CIDR"));
    }
    Ok(HostPattern::Name(name))
}

/// IPv4-mapped IPv6 networks (`::ffff:10.0.0.0/104`) become IPv4 ones, as addresses do.
fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.network().to_ipv4_mapped() {
            Some(v4) => ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96).map(IpNet::V4).unwrap_or(net),
            None => net,
        },
        _ => net,
    }
}

fn normalize_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// A DNS name toolrouter will resolve: labels of letters, digits, '-' and '_', and a last
/// label that is not numeric, so resolver shorthands (`2130706433`, `0x7f.1`, `127.1`) for
/// addresses never pass as names.
fn is_dns_name(name: &str) -> bool {
    if name.is_empty() || name.len() > 253 {
        return false;
    }
    let labels_ok = name.split('.').all(|l| !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    let last = name.rsplit('.').next().unwrap_or_default();
    let numeric = last.bytes().all(|b| b.is_ascii_digit()) || last.strip_prefix("0x").is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    labels_ok && !numeric
}

/// A target's host as written in its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

/// Where a URL points: scheme, host, and port (the scheme's default when the URL has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub scheme: Scheme,
    pub host: Host,
    pub port: u16,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Name(n) => write!(f, "{n}:{}", self.port),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
            Host::Ip(ip) => write!(f, "{ip}:{}", self.port),
        }
    }
}

impl Target {
    /// Parses an `http://` or `https://` URL. Errors never repeat the URL (it may carry a
    /// password).
    pub fn parse(url: &str) -> Result<Self, Refusal> {
        let uri = http::Uri::from_str(url.trim()).map_err(|_| bad_url("it does not parse as a URL"))?;
        Self::from_uri(&uri)
    }

    pub fn from_uri(uri: &http::Uri) -> Result<Self, Refusal> {
        let scheme = uri.scheme_str().and_then(Scheme::parse).ok_or_else(|| bad_url("the scheme must be http or https"))?;
        let host = uri.host().filter(|h| !h.is_empty()).ok_or_else(|| bad_url("the URL has no host"))?;
        let port = uri.port_u16().unwrap_or(scheme.default_port());
        let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let host = match bare.parse::<IpAddr>() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => {
                let name = normalize_name(bare);
                if !is_dns_name(&name) {
                    return Err(bad_url("its host is neither a DNS name nor an IP address"));
                }
                Host::Name(name)
            }
        };
        Ok(Target { scheme, host, port })
    }
}

fn bad_url(why: &'static str) -> Refusal {
    Refusal { target: "the URL".into(), rule: Rule::BadUrl(why) }
}

/// Why a target or an address is refused. The message names the host and port and the rule,
/// never the whole URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{target} is refused: {rule}")]
pub struct Refusal {
    pub target: String,
    pub rule: Rule,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rule {
    #[error("{0}")]
    BadUrl(&'static str),
    #[error("{0} is a link-local address (always refused)")]
    LinkLocal(IpAddr),
    #[error("{0} is a cloud metadata address (always refused)")]
    MetadataAddress(IpAddr),
    #[error("it names a cloud metadata service (always refused)")]
    MetadataName,
    #[error("{0} is an unspecified address (always refused)")]
    Unspecified(IpAddr),
    #[error("{0} is a broadcast or multicast address (always refused)")]
    Multicast(IpAddr),
    #[error(
        "it is not in the outbound allowlist; the operator allows targets with --outbound-allow (TOOLROUTER_OUTBOUND_ALLOW), and without it only loopback"
    )]
    NotAllowed,
    #[error("it resolves to the loopback address {0}, which only an address pattern allows (--outbound-allow 127.0.0.0/8 or ::1)")]
    LoopbackAddress(IpAddr),
}

impl Rule {
    /// A stable name for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Rule::BadUrl(_) => "bad_url",
            Rule::LinkLocal(_) => "link_local",
            Rule::MetadataAddress(_) | Rule::MetadataName => "cloud_metadata",
            Rule::Unspecified(_) => "unspecified",
            Rule::Multicast(_) => "multicast",
            Rule::NotAllowed => "not_allowed",
            Rule::LoopbackAddress(_) => "loopback_address",
        }
    }
}

/// The operator's allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    patterns: Vec<Pattern>,
    texts: Vec<String>,
}

impl Default for Policy {
    /// Loopback only.
    fn default() -> Self {
        Policy::new(DEFAULT_PATTERNS).expect("default patterns parse")
    }
}

impl Policy {
    /// Parses the patterns; none means [`DEFAULT_PATTERNS`].
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, PatternError> {
        let texts: Vec<String> = if patterns.is_empty() {
            DEFAULT_PATTERNS.iter().map(|s| s.to_string()).collect()
        } else {
            patterns.iter().map(|s| s.as_ref().trim().to_string()).collect()
        };
        let patterns =
            texts.iter().map(|t| t.parse::<Pattern>().map_err(|problem| PatternError { pattern: t.clone(), problem })).collect::<Result<_, _>>()?;
        Ok(Self { patterns, texts })
    }

    /// The patterns in force, as written.
    pub fn patterns(&self) -> &[String] {
        &self.texts
    }

    /// Checks a URL as written: scheme, host and port against the patterns, and an address
    /// or name against the always-refused ones. Names are resolved only when connecting.
    pub fn check_url(&self, url: &str) -> Result<Target, Refusal> {
        let target = Target::parse(url)?;
        self.check_target(&target)?;
        Ok(target)
    }

    pub fn check_target(&self, target: &Target) -> Result<(), Refusal> {
        let refuse = |rule| Err(Refusal { target: target.to_string(), rule });
        match &target.host {
            Host::Name(name) if METADATA_NAMES.contains(&name.as_str()) => return refuse(Rule::MetadataName),
            Host::Ip(ip) => {
                if let Some(rule) = always_refused(*ip) {
                    return refuse(rule);
                }
            }
            Host::Name(_) => {}
        }
        let allowed = self.patterns.iter().any(|p| {
            p.scheme.is_none_or(|s| s == target.scheme)
                && p.port.is_none_or(|port| port == target.port)
                && match (&p.host, &target.host) {
                    (HostPattern::Any, _) => true,
                    (HostPattern::Below(suffix), Host::Name(n)) => n.ends_with(suffix.as_str()),
                    (HostPattern::Name(pat), Host::Name(n)) => pat == n,
                    (HostPattern::Net(net), Host::Ip(ip)) => net.contains(&ip.to_canonical()),
                    _ => false,
                }
        });
        if allowed { Ok(()) } else { refuse(Rule::NotAllowed) }
    }

    /// Checks one address a name resolved to (`target` names the name for the message).
    pub fn check_address(&self, target: &str, ip: IpAddr) -> Result<(), Refusal> {
        let refuse = |rule| Err(Refusal { target: target.to_string(), rule });
        if let Some(rule) = always_refused(ip) {
            return refuse(rule);
        }
        let ip = ip.to_canonical();
        if ip.is_loopback() {
            let allowed = self.patterns.iter().any(|p| match &p.host {
                HostPattern::Any => true,
                HostPattern::Net(net) => net.contains(&ip),
                _ => false,
            });
            if !allowed {
                return refuse(Rule::LoopbackAddress(ip));
            }
        }
        Ok(())
    }
}

/// The always-refused class of an address, if any. IPv4 addresses embedded in IPv6 ones
/// (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) are judged
/// as the IPv4 address too.
pub fn always_refused(ip: IpAddr) -> Option<Rule> {
    let original = ip;
    let ip = ip.to_canonical();
    if METADATA_ADDRESSES.contains(&ip) {
        return Some(Rule::MetadataAddress(original));
    }
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if o[0] == 0 {
                Some(Rule::Unspecified(original))
            } else if v4.is_link_local() {
                Some(Rule::LinkLocal(original))
            } else if v4.is_multicast() || v4.is_broadcast() {
                Some(Rule::Multicast(original))
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_unspecified() {
                return Some(Rule::Unspecified(original));
            }
            if v6.is_unicast_link_local() {
                return Some(Rule::LinkLocal(original));
            }
            if v6.is_multicast() {
                return Some(Rule::Multicast(original));
            }
            let s = v6.segments();
            let compatible = s[..6] == [0; 6] && !v6.is_loopback();
            let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
            if compatible || nat64 {
                let [.., a, b, c, d] = v6.octets();
                let rule = always_refused(IpAddr::V4(Ipv4Addr::new(a, b, c, d)))?;
                return Some(match rule {
                    Rule::LinkLocal(_) => Rule::LinkLocal(original),
                    Rule::MetadataAddress(_) => Rule::MetadataAddress(original),
                    Rule::Unspecified(_) => Rule::Unspecified(original),
                    Rule::Multicast(_) => Rule::Multicast(original),
                    other => other,
                });
            }
            None
        }
    }
}

/// Every function endpoint and MCP URL of a definition that the policy refuses, with its
/// field path (as `catalog::validate` names fields).
pub fn violations(policy: &Policy, def: &AgentDefinition) -> Vec<FieldViolation> {
    let mut out = Vec::new();
    for (i, source) in def.sources.iter().enumerate() {
        let (field, url) = match &source.kind {
            SourceKind::Function(f) => ("function.endpoint", &f.endpoint),
            SourceKind::Mcp(m) => ("mcp.url", &m.url),
            SourceKind::Client(_) => continue,
        };
        if let Err(r) = policy.check_url(url) {
            out.push(FieldViolation::new(format!("definition.sources[{i}].{field}"), r.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(patterns: &[&str]) -> Policy {
        Policy::new(patterns).expect("patterns parse")
    }

    fn rule(p: &Policy, url: &str) -> Option<&'static str> {
        p.check_url(url).err().map(|r| r.rule.code())
    }

    #[test]
    fn default_policy_allows_loopback_only() {
        let p = Policy::default();
        for ok in ["http://127.0.0.1:7000", "http://127.9.9.9", "https://[::1]:8443", "http://localhost:7000", "http://LOCALHOST.:1"] {
            assert_eq!(rule(&p, ok), None, "{ok}");
        }
        for refused in ["http://10.0.0.1:7000", "http://crm-executor:7000", "https://mcp.example.com/mcp", "http://[fd00::1]:7000"] {
            assert_eq!(rule(&p, refused), Some("not_allowed"), "{refused}");
        }
    }

    #[test]
    fn name_patterns_with_scheme_and_port() {
        let p = policy(&["https://*.svc.cluster.local", "http://crm-executor:7000", "*.internal:443"]);
        assert_eq!(rule(&p, "https://billing.tools.svc.cluster.local"), None);
        assert_eq!(rule(&p, "https://billing.tools.svc.cluster.local:9443/mcp"), None);
        assert_eq!(rule(&p, "http://billing.tools.svc.cluster.local"), Some("not_allowed"), "scheme");
        assert_eq!(rule(&p, "https://svc.cluster.local"), Some("not_allowed"), "*. needs a label below");
        assert_eq!(rule(&p, "https://evilsvc.cluster.local"), Some("not_allowed"));
        assert_eq!(rule(&p, "http://crm-executor:7000"), None);
        assert_eq!(rule(&p, "http://crm-executor:7001"), Some("not_allowed"), "port");
        assert_eq!(rule(&p, "https://crm-executor:7000"), Some("not_allowed"), "scheme");
        assert_eq!(rule(&p, "https://a.internal"), None, "https defaults to 443");
        assert_eq!(rule(&p, "http://a.internal:443"), None, "any scheme");
        assert_eq!(rule(&p, "http://a.internal"), Some("not_allowed"), "http defaults to 80");
    }

    #[test]
    fn address_patterns_match_addresses_not_names() {
        let p = policy(&["10.0.0.0/8", "fd00::/8", "[fd00::/8]:7000", "http://192.168.1.10:*"]);
        assert_eq!(rule(&p, "http://10.1.2.3:7000"), None);
        assert_eq!(rule(&p, "http://[fd12::1]:1234"), None);
        assert_eq!(rule(&p, "http://192.168.1.10:9999"), None);
        assert_eq!(rule(&p, "https://192.168.1.10"), Some("not_allowed"));
        assert_eq!(rule(&p, "http://11.0.0.1"), Some("not_allowed"));
        assert_eq!(rule(&p, "http://crm.internal:7000"), Some("not_allowed"), "a name needs a name pattern");
        assert_eq!(rule(&p, "http://[::ffff:10.0.0.1]:7000"), None, "IPv4-mapped form of an allowed address");
    }

    #[test]
    fn always_refused_whatever_the_patterns() {
        let p = policy(&["*"]);
        for (url, code) in [
            ("http://169.254.169.254/latest/meta-data", "cloud_metadata"),
            ("http://169.254.170.2/v2/credentials", "cloud_metadata"),
            ("http://100.100.100.200", "cloud_metadata"),
            ("http://[fd00:ec2::254]", "cloud_metadata"),
            ("http://metadata.google.internal/computeMetadata/v1", "cloud_metadata"),
            ("http://METADATA.GOOG.", "cloud_metadata"),
            ("http://169.254.1.1:7000", "link_local"),
            ("http://[fe80::1]:7000", "link_local"),
            ("http://0.0.0.0:7000", "unspecified"),
            ("http://[::]:7000", "unspecified"),
            ("http://224.0.0.1", "multicast"),
            ("http://255.255.255.255", "multicast"),
            ("http://[::ffff:169.254.169.254]", "cloud_metadata"),
            ("http://[::ffff:a9fe:101]", "link_local"),
            ("http://[::ffff:0.0.0.0]:7000", "unspecified"),
            ("http://[::169.254.169.254]", "cloud_metadata"),
            ("http://[64:ff9b::169.254.169.254]", "cloud_metadata"),
        ] {
            assert_eq!(rule(&p, url), Some(code), "{url}");
        }
        assert_eq!(rule(&p, "http://anything.example:1"), None);
        assert_eq!(rule(&p, "http://8.8.8.8"), None);
    }

    #[test]
    fn resolver_shorthands_for_addresses_are_not_names() {
        let p = policy(&["*"]);
        for url in ["http://2852039166/", "http://0xa9fea9fe/", "http://169.254.43518/", "http://127.1:7000", "http://a%2eb/"] {
            assert_eq!(rule(&p, url), Some("bad_url"), "{url}");
        }
    }

    #[test]
    fn refusals_never_repeat_the_url() {
        let p = Policy::default();
        let r = p.check_url("https://user:s3cret-pass@crm.example.com:8443/path?token=s3cret-query").unwrap_err();
        let text = r.to_string();
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.starts_with("crm.example.com:8443 is refused: it is not in the outbound allowlist"), "{text}");
        let r = Policy::default().check_url("ftp://user:s3cret@host/").unwrap_err();
        assert!(!r.to_string().contains("s3cret"), "{r}");
    }

    #[test]
    fn resolved_addresses_are_checked() {
        let p = policy(&["*.example.com"]);
        assert!(p.check_address("a.example.com:80", "10.1.2.3".parse().unwrap()).is_ok());
        assert!(p.check_address("a.example.com:80", "203.0.113.7".parse().unwrap()).is_ok());
        let code = |ip: &str| p.check_address("a.example.com:80", ip.parse().unwrap()).err().map(|r| r.rule.code());
        assert_eq!(code("169.254.169.254"), Some("cloud_metadata"));
        assert_eq!(code("::ffff:169.254.169.254"), Some("cloud_metadata"));
        assert_eq!(code("fe80::1"), Some("link_local"));
        assert_eq!(code("127.0.0.1"), Some("loopback_address"));
        assert_eq!(code("::1"), Some("loopback_address"));
        assert_eq!(code("::ffff:127.0.0.1"), Some("loopback_address"));
        let with_loopback = policy(&["*.example.com", "127.0.0.0/8"]);
        assert!(with_loopback.check_address("a.example.com:80", "127.0.0.1".parse().unwrap()).is_ok());
        assert!(with_loopback.check_address("a.example.com:80", "::1".parse().unwrap()).is_err());
    }

    #[test]
    fn invalid_patterns_are_refused_with_the_reason() {
        for bad in [
            "",
            "ftp://x",
            "http://",
            "*.",
            "a*.example.com",
            "foo.*",
            "10.0.0.0/33",
            "host:0",
            "host:99999",
            "host:x",
            "[::1",
            "[::1]x",
            "http://a/b",
            "user@host",
            "host?x",
            "2130706433",
        ] {
            let err = Policy::new(&[bad]).expect_err(bad);
            assert_eq!(err.pattern, bad.trim());
            assert!(err.to_string().contains("--outbound-allow"), "{err}");
        }
        for good in [
            "*",
            "*:443",
            "https://*",
            "localhost",
            "::1",
            "[::1]:7000",
            "10.0.0.0/8",
            "fd00::/8",
            "[fd00::/8]:7000",
            "10.0.0.0/8:7000",
            "HTTPS://API.Example.COM.",
            "*.svc.cluster.local",
            "http://crm_exec:7000",
        ] {
            Policy::new(&[good]).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
    }
}
