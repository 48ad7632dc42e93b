//! Agent definitions as the domain knows them: plain data, serializable for the store.
//!
//! JSON values (schemas) are kept as the text the host sent, so an identical definition
//! serializes to identical bytes (idempotent create compares those bytes).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentDefinition {
    pub sources: Vec<ToolSource>,
    pub groups: BTreeMap<String, ToolGroup>,
    pub control: ControlConfig,
    pub instructions: String,
    /// How long deferred records may stay pending (`None`: no expiry). Left out of the stored
    /// form when unset, so definitions stored before it read back byte-identical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred_ttl: Option<Duration>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolSource {
    pub id: String,
    pub instructions: String,
    pub tool_configs: BTreeMap<String, ToolConfig>,
    pub kind: SourceKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Function(FunctionSource),
    Mcp(McpSource),
    Client(ClientSource),
}

impl Default for SourceKind {
    fn default() -> Self {
        SourceKind::Client(ClientSource::default())
    }
}

impl SourceKind {
    /// The tools declared in the definition (MCP tools and executor-listed tools come at
    /// preparation).
    pub fn declared_tools(&self) -> &[ToolDeclaration] {
        match self {
            SourceKind::Function(f) => &f.tools,
            SourceKind::Client(c) => &c.tools,
            SourceKind::Mcp(_) => &[],
        }
    }

    /// The same source without its declared tools (a compiled catalog keeps them prepared).
    pub fn without_tools(&self) -> SourceKind {
        match self {
            SourceKind::Function(f) => SourceKind::Function(FunctionSource {
                endpoint: f.endpoint.clone(),
                tools: Vec::new(),
                timeout: f.timeout,
                max_concurrency: f.max_concurrency,
            }),
            SourceKind::Client(_) => SourceKind::Client(ClientSource::default()),
            SourceKind::Mcp(m) => SourceKind::Mcp(m.clone()),
        }
    }

    pub fn kind(&self) -> ToolKind {
        match self {
            SourceKind::Function(_) => ToolKind::Function,
            SourceKind::Mcp(_) => ToolKind::Mcp,
            SourceKind::Client(_) => ToolKind::Client,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Function,
    Mcp,
    Client,
}

impl ToolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Function => "function",
            ToolKind::Mcp => "mcp",
            ToolKind::Client => "client",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionSource {
    pub endpoint: String,
    /// Empty = ask the executor's `ListTools` at preparation.
    pub tools: Vec<ToolDeclaration>,
    pub timeout: Option<Duration>,
    pub max_concurrency: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientSource {
    pub tools: Vec<ToolDeclaration>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct McpSource {
    pub url: String,
    pub headers: BTreeMap<String, HeaderBinding>,
    pub allowed_tools: Vec<String>,
    pub timeout: Option<Duration>,
    pub max_concurrency: u32,
    pub approval_required: Vec<String>,
    pub idempotent_tools: Vec<String>,
    pub codeact_callable: Vec<String>,
    /// Per-user authorization (issue 17): each user's own token, obtained by consent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<McpOAuth>,
}

/// How a user's token for an MCP source is obtained (see the proto's `McpOAuth`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpOAuth {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Operator secret name of the client secret.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_secret: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderValue {
    /// `context.run_id`, `identity.<claim>`.
    From(String),
    /// Name of an operator secret.
    Secret(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeaderBinding {
    pub value: HeaderValue,
    pub prefix: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolDeclaration {
    pub name: String,
    pub description: String,
    /// JSON text; empty means `{"type":"object"}`.
    pub input_schema: String,
    /// JSON text; empty means none.
    pub output_schema: String,
    pub requires_approval: bool,
    pub idempotent: bool,
    pub codeact_callable: bool,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolConfig {
    pub pin: bool,
    pub additional_search_text: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolGroup {
    pub description: String,
    pub source_ids: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    #[default]
    Grouped,
    Flat,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ranking {
    #[default]
    Keyword,
    Natural,
}

/// Control configuration as given; zero/empty fields mean "default" (see `ResolvedControl`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlConfig {
    pub names: ControlNames,
    pub max_results: u32,
    pub max_search_bytes: u32,
    pub disable_instructions: bool,
    pub profile: Profile,
    pub ranking: Ranking,
    pub auto_pin: AutoPinConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlNames {
    pub discover: String,
    pub describe: String,
    pub call: String,
    pub list_tools: String,
    pub list_groups: String,
    pub search: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AutoPinConfig {
    pub disabled: bool,
    pub warmup_calls: u32,
    pub max_hot: u32,
    pub half_life: Option<Duration>,
}

pub const DEFAULT_MAX_RESULTS: u32 = 50;
pub const DEFAULT_MAX_SEARCH_BYTES: u32 = 16_384;
pub const DEFAULT_WARMUP_CALLS: u32 = 3;
pub const DEFAULT_MAX_HOT: u32 = 3;
pub const DEFAULT_HALF_LIFE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The control configuration with every default filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedControl {
    pub discover: String,
    pub describe: String,
    pub call: String,
    pub list_tools: String,
    pub list_groups: String,
    pub search: String,
    pub max_results: u32,
    pub max_search_bytes: u32,
    pub instructions: bool,
    pub profile: Profile,
    pub ranking: Ranking,
    pub auto_pin: Option<ResolvedAutoPin>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedAutoPin {
    pub warmup_calls: u32,
    pub max_hot: u32,
    pub half_life: Duration,
}

fn or_default(name: &str, default: &str) -> String {
    if name.is_empty() { default.to_string() } else { name.to_string() }
}

impl ControlConfig {
    pub fn resolve(&self) -> ResolvedControl {
        let n = &self.names;
        ResolvedControl {
            discover: or_default(&n.discover, "discover_tools"),
            describe: or_default(&n.describe, "describe_tool"),
            call: or_default(&n.call, "call_tool"),
            list_tools: or_default(&n.list_tools, "list_tools"),
            list_groups: or_default(&n.list_groups, "list_tool_groups"),
            search: or_default(&n.search, "tool_search"),
            max_results: if self.max_results == 0 { DEFAULT_MAX_RESULTS } else { self.max_results },
            max_search_bytes: if self.max_search_bytes == 0 { DEFAULT_MAX_SEARCH_BYTES } else { self.max_search_bytes },
            instructions: !self.disable_instructions,
            profile: self.profile,
            ranking: self.ranking,
            auto_pin: (!self.auto_pin.disabled).then(|| ResolvedAutoPin {
                warmup_calls: if self.auto_pin.warmup_calls == 0 { DEFAULT_WARMUP_CALLS } else { self.auto_pin.warmup_calls },
                max_hot: if self.auto_pin.max_hot == 0 { DEFAULT_MAX_HOT } else { self.auto_pin.max_hot },
                half_life: self.auto_pin.half_life.unwrap_or(DEFAULT_HALF_LIFE),
            }),
        }
    }
}

impl ResolvedControl {
    /// The control tool names exposed for the profile, in model-tool order.
    pub fn exposed_names(&self) -> Vec<&str> {
        self.exposed().collect()
    }

    /// Whether `name` is one of [`ResolvedControl::exposed_names`] (asked once per call: no
    /// list is built).
    pub fn exposes(&self, name: &str) -> bool {
        self.exposed().any(|n| n == name)
    }

    fn exposed(&self) -> impl Iterator<Item = &str> {
        let names = [&self.discover, &self.describe, &self.call, &self.list_groups, &self.list_tools, &self.search];
        let profile: &[usize] = match self.profile {
            Profile::Grouped => &[0, 1, 2, 3, 4],
            Profile::Flat => &[5, 2],
        };
        profile.iter().map(move |&i| names[i].as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_answers_exactly_the_exposed_names_of_each_profile() {
        for profile in [Profile::Grouped, Profile::Flat] {
            let c = ControlConfig { profile, names: ControlNames { call: "run_tool".into(), ..Default::default() }, ..Default::default() }.resolve();
            let all = ["discover_tools", "describe_tool", "run_tool", "call_tool", "list_tools", "list_tool_groups", "tool_search", "", "Run_tool"];
            for name in all {
                assert_eq!(c.exposes(name), c.exposed_names().contains(&name), "{profile:?} {name:?}");
            }
            assert!(c.exposes("run_tool"));
        }
    }
}
