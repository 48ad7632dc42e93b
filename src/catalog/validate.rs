//! Every validation rule of SPEC §3, reported with field paths.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::definition::*;
use super::names::{canonical_name, group_name_problem, source_id_problem, tool_name_problem};
use super::schema;
use crate::error::FieldViolation;

pub const MAX_TOOL_DESCRIPTION: usize = 8_192;
pub const MAX_GROUP_DESCRIPTION: usize = 512;
pub const MAX_EXPOSED_NAME: usize = 64;

/// Validates a definition; `Ok(())` or every violation found.
pub fn validate(def: &AgentDefinition) -> Result<(), Vec<FieldViolation>> {
    let mut v = Violations::default();
    let source_index = check_sources(def, &mut v);
    let group_of = check_groups(def, &source_index, &mut v);
    check_grouped_names(def, &group_of, &mut v);
    check_control(def, &group_of, &mut v);
    if v.0.is_empty() { Ok(()) } else { Err(v.0) }
}

#[derive(Default)]
struct Violations(Vec<FieldViolation>);

impl Violations {
    fn add(&mut self, field: impl Into<String>, description: impl Into<String>) {
        self.0.push(FieldViolation::new(field, description));
    }
}

fn source_path(i: usize) -> String {
    format!("definition.sources[{i}]")
}

fn kind_field(kind: &SourceKind) -> &'static str {
    match kind {
        SourceKind::Function(_) => "function",
        SourceKind::Mcp(_) => "mcp",
        SourceKind::Client(_) => "client",
    }
}

fn check_sources<'a>(def: &'a AgentDefinition, v: &mut Violations) -> HashMap<&'a str, usize> {
    let mut index = HashMap::new();
    for (i, source) in def.sources.iter().enumerate() {
        let path = source_path(i);
        if let Some(p) = source_id_problem(&source.id) {
            v.add(format!("{path}.id"), p);
        } else if index.insert(source.id.as_str(), i).is_some() {
            v.add(format!("{path}.id"), format!("duplicate source id {:?}", source.id));
        }
        let kpath = format!("{path}.{}", kind_field(&source.kind));
        match &source.kind {
            SourceKind::Function(f) => {
                check_endpoint(&f.endpoint, &format!("{kpath}.endpoint"), v);
                check_max_concurrency(f.max_concurrency, &kpath, v);
            }
            SourceKind::Mcp(m) => {
                check_endpoint(&m.url, &format!("{kpath}.url"), v);
                check_max_concurrency(m.max_concurrency, &kpath, v);
                for (name, b) in &m.headers {
                    let hp = format!("{kpath}.headers[{name:?}]");
                    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_') {
                        v.add(hp.clone(), "a header name has only ASCII letters, digits, '-' and '_'");
                    }
                    match &b.value {
                        HeaderValue::From(from) => {
                            let ok = from == "context.run_id" || from.strip_prefix("identity.").is_some_and(|c| !c.is_empty());
                            if !ok {
                                v.add(format!("{hp}.from"), "use \"context.run_id\" or \"identity.<claim>\"");
                            }
                        }
                        HeaderValue::Secret(s) if s.is_empty() => v.add(format!("{hp}.secret"), "name the operator secret to use"),
                        HeaderValue::Secret(_) => {}
                    }
                    if m.oauth.is_some() && name.eq_ignore_ascii_case("authorization") {
                        v.add(hp.clone(), "an oauth source sends each user's own token as Authorization: bind no header of that name");
                    }
                }
                if let Some(o) = &m.oauth {
                    let op = format!("{kpath}.oauth");
                    if !o.client_secret.is_empty() && o.client_id.is_empty() {
                        v.add(format!("{op}.client_secret"), "a client secret belongs to a client_id: set client_id too");
                    }
                    for (i, s) in o.scopes.iter().enumerate() {
                        if s.is_empty() || s.len() > 256 || !s.bytes().all(|c| c.is_ascii_graphic() && c != b'"' && c != b'\\') {
                            v.add(format!("{op}.scopes[{i}]"), "a scope is 1 to 256 visible ASCII characters, without quotes or backslashes");
                        }
                    }
                    if o.client_id.len() > 512 {
                        v.add(format!("{op}.client_id"), "at most 512 bytes");
                    }
                }
            }
            SourceKind::Client(_) => {}
        }
        let tools = source.kind.declared_tools();
        let mut names = HashSet::new();
        for (t, tool) in tools.iter().enumerate() {
            let tp = format!("{kpath}.tools[{t}]");
            check_tool(tool, &tp, v);
            if !names.insert(tool.name.as_str()) {
                v.add(format!("{tp}.name"), format!("duplicate tool name {:?} in this source", tool.name));
            }
        }
        let listed_later = matches!(&source.kind, SourceKind::Mcp(_)) || matches!(&source.kind, SourceKind::Function(f) if f.tools.is_empty());
        for (key, cfg) in &source.tool_configs {
            let cp = format!("{path}.tool_configs[{key:?}]");
            if key != "*" && !listed_later && !names.contains(key.as_str()) {
                v.add(cp.clone(), format!("no tool {key:?} in this source"));
            }
            if cfg.additional_search_text.chars().count() > MAX_TOOL_DESCRIPTION {
                v.add(format!("{cp}.additional_search_text"), format!("at most {MAX_TOOL_DESCRIPTION} characters"));
            }
        }
    }
    index
}

fn check_endpoint(url: &str, field: &str, v: &mut Violations) {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !r.contains(char::is_whitespace) => {}
        _ => v.add(field, "an http:// or https:// URL with a host is required"),
    }
}

fn check_max_concurrency(n: u32, path: &str, v: &mut Violations) {
    if n > 10_000 {
        v.add(format!("{path}.max_concurrency"), "at most 10000 (0 = server default)");
    }
}

fn check_tool(tool: &ToolDeclaration, path: &str, v: &mut Violations) {
    if let Some(p) = tool_name_problem(&tool.name) {
        v.add(format!("{path}.name"), p);
    }
    if tool.description.chars().count() > MAX_TOOL_DESCRIPTION {
        v.add(format!("{path}.description"), format!("at most {MAX_TOOL_DESCRIPTION} characters"));
    }
    match schema::parse(&tool.input_schema).and_then(|s| schema::check_input(&s)) {
        Ok(()) => {}
        Err(e) => v.add(format!("{path}.input_schema_json"), e),
    }
    if !tool.output_schema.trim().is_empty()
        && let Err(e) = schema::parse(&tool.output_schema).and_then(|s| schema::check(&s))
    {
        v.add(format!("{path}.output_schema_json"), e);
    }
}

/// Returns source index → group name.
fn check_groups(def: &AgentDefinition, source_index: &HashMap<&str, usize>, v: &mut Violations) -> BTreeMap<usize, String> {
    let mut group_of = BTreeMap::new();
    for (name, group) in &def.groups {
        let gp = format!("definition.groups[{name:?}]");
        if let Some(p) = group_name_problem(name) {
            v.add(gp.clone(), p);
        }
        if group.description.trim().is_empty() {
            v.add(format!("{gp}.description"), "a group description must not be blank");
        } else if group.description.chars().count() > MAX_GROUP_DESCRIPTION {
            v.add(format!("{gp}.description"), format!("at most {MAX_GROUP_DESCRIPTION} characters"));
        }
        if group.source_ids.is_empty() {
            v.add(format!("{gp}.source_ids"), "a group needs at least one source");
        }
        for (k, id) in group.source_ids.iter().enumerate() {
            let sp = format!("{gp}.source_ids[{k}]");
            match source_index.get(id.as_str()) {
                None => v.add(sp, format!("unknown source id {id:?}")),
                Some(&i) => {
                    if let Some(other) = group_of.insert(i, name.clone()) {
                        let what = if &other == name {
                            "listed twice in this group".to_string()
                        } else {
                            format!("already in group {other:?}: a source belongs to at most one group")
                        };
                        v.add(sp, format!("source {id:?} {what}"));
                    }
                }
            }
        }
    }
    group_of
}

fn check_grouped_names(def: &AgentDefinition, group_of: &BTreeMap<usize, String>, v: &mut Violations) {
    // (group, local) → first place seen
    let mut seen: HashMap<(&str, &str), String> = HashMap::new();
    for (&i, group) in group_of {
        let source = &def.sources[i];
        for (t, tool) in source.kind.declared_tools().iter().enumerate() {
            let here = format!("{}.{}.tools[{t}].name", source_path(i), kind_field(&source.kind));
            if let Some(first) = seen.get(&(group.as_str(), tool.name.as_str())) {
                if !first.starts_with(&format!("{}.", source_path(i))) {
                    v.add(here, format!("local name {:?} is already used in group {group:?} by {first}", tool.name));
                }
            } else {
                seen.insert((group.as_str(), tool.name.as_str()), here);
            }
        }
    }
}

/// Pinned as `Catalog::compile` pins: by its own config or by `"*"` (SPEC §6).
fn is_pinned(source: &ToolSource, tool: &str) -> bool {
    [tool, "*"].iter().any(|key| source.tool_configs.get(*key).is_some_and(|c| c.pin))
}

fn check_control(def: &AgentDefinition, group_of: &BTreeMap<usize, String>, v: &mut Violations) {
    let c = &def.control;
    if c.max_results != 0 && !(1..=100).contains(&c.max_results) {
        v.add("definition.control.max_results", "between 1 and 100 (0 = default 50)");
    }
    if c.max_search_bytes != 0 && !(1_024..=32_768).contains(&c.max_search_bytes) {
        v.add("definition.control.max_search_bytes", "between 1024 and 32768 (0 = default 16384)");
    }
    if c.auto_pin.warmup_calls > 1_000_000 {
        v.add("definition.control.auto_pin.warmup_calls", "at most 1000000");
    }
    if c.auto_pin.max_hot > 32 {
        v.add("definition.control.auto_pin.max_hot", "at most 32");
    }
    if c.auto_pin.half_life.is_some_and(|h| h.is_zero()) {
        v.add("definition.control.auto_pin.half_life", "must be positive");
    }

    let resolved = c.resolve();
    // exposed name → where it comes from
    let mut exposed: HashMap<String, String> = HashMap::new();
    let controls: Vec<(&str, &str)> = match resolved.profile {
        Profile::Grouped => vec![
            ("discover", &resolved.discover),
            ("describe", &resolved.describe),
            ("call", &resolved.call),
            ("list_tools", &resolved.list_tools),
            ("list_groups", &resolved.list_groups),
        ],
        Profile::Flat => vec![("search", &resolved.search), ("call", &resolved.call)],
    };
    for (field, name) in controls {
        let fp = format!("definition.control.names.{field}");
        if let Some(p) = tool_name_problem(name) {
            v.add(fp, p);
            continue;
        }
        if let Some(other) = exposed.insert(name.to_string(), fp.clone()) {
            v.add(fp, format!("control tool name {name:?} is also used by {other}"));
        }
    }
    for (i, source) in def.sources.iter().enumerate() {
        let kp = format!("{}.{}", source_path(i), kind_field(&source.kind));
        let grouped = group_of.get(&i);
        for (t, tool) in source.kind.declared_tools().iter().enumerate() {
            let here = format!("{kp}.tools[{t}].name");
            let name = match grouped {
                None => tool.name.clone(),
                Some(g) if is_pinned(source, &tool.name) => canonical_name(g, &tool.name),
                Some(_) => continue,
            };
            if name.len() > MAX_EXPOSED_NAME {
                v.add(here.clone(), format!("exposed name {name:?} is longer than {MAX_EXPOSED_NAME} characters"));
            }
            if let Some(other) = exposed.get(&name) {
                v.add(here, format!("exposed name {name:?} collides with {other}"));
            } else {
                exposed.insert(name, here);
            }
        }
    }
}

// ----- security: schema size and depth limits (issue 6) -----

/// Nesting depth of JSON text (objects and arrays; a top-level object is 1), read without
/// parsing so deep input costs no recursion.
pub fn json_depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The schemas of a definition that are larger or deeper than allowed, checked before any
/// schema is parsed or compiled.
pub fn check_schema_limits(def: &AgentDefinition, max_bytes: usize, max_depth: usize) -> Vec<FieldViolation> {
    let mut v = Violations::default();
    for (i, source) in def.sources.iter().enumerate() {
        let kpath = format!("{}.{}", source_path(i), kind_field(&source.kind));
        for (t, tool) in source.kind.declared_tools().iter().enumerate() {
            for (field, text) in [("input_schema_json", &tool.input_schema), ("output_schema_json", &tool.output_schema)] {
                let path = format!("{kpath}.tools[{t}].{field}");
                if text.len() > max_bytes {
                    v.add(path, format!("the schema is {} bytes, over the {max_bytes}-byte limit", text.len()));
                } else if json_depth(text) > max_depth {
                    v.add(path, format!("the schema nests deeper than {max_depth} levels"));
                }
            }
        }
    }
    v.0
}

#[cfg(test)]
mod limit_tests {
    use super::json_depth;

    #[test]
    fn json_depth_counts_containers_and_ignores_brackets_in_strings() {
        assert_eq!(json_depth("{}"), 1);
        assert_eq!(json_depth(r#"{"a":[{"b":1}]}"#), 3);
        assert_eq!(json_depth(r#"{"a":"[[[{{\"]]"}"#), 1);
        assert_eq!(json_depth(""), 0);
    }
}
