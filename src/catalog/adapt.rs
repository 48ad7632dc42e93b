//! Input schemas adapted to what a provider accepts (issue 16): OpenAI's strict mode and
//! Gemini's schema subset. An adaptation is deterministic (the same schema gives the same
//! bytes, so prompt caches stay warm) and never tighter than the original where it matters:
//! calls are still validated against the original schema, so a keyword a provider does not
//! take is dropped and its meaning written into the description, never silently lost.
//! [`restore_omitted`] undoes strict mode's one change to arguments: nulls sent for optional
//! properties the original schema does not let be null.

use serde_json::{Map, Value, json};

/// Strict mode's limits (OpenAI Structured Outputs): properties in all, object nesting, enum
/// values in all.
const STRICT_MAX_PROPERTIES: usize = 5000;
const STRICT_MAX_DEPTH: usize = 10;
const STRICT_MAX_ENUM_VALUES: usize = 1000;
/// `$ref`s followed while inlining (Gemini) or restoring (arguments) before giving up.
const MAX_REF_DEPTH: usize = 16;

/// String formats strict mode takes.
const STRICT_FORMATS: &[&str] = &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// Keywords that describe rather than constrain: dropped without a note.
const ANNOTATIONS: &[&str] =
    &["$schema", "$id", "$comment", "$anchor", "examples", "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding"];

/// A tool's input schema in each provider's dialect (computed once per tool and version).
#[derive(Debug)]
pub struct Adapted {
    /// Compact JSON of OpenAI's strict-mode schema, or why the tool is offered non-strict.
    pub strict: Result<String, String>,
    /// Compact JSON of Gemini's subset.
    pub gemini: String,
    /// What Gemini's subset could not keep (moved into descriptions, or cut).
    pub gemini_notes: Vec<String>,
    /// Does Gemini's schema declare any parameter (a function without declares none)?
    pub gemini_parameters: bool,
}

impl Adapted {
    pub fn of(schema: &Value) -> Adapted {
        let (gemini, gemini_notes) = gemini(schema);
        let gemini_parameters = gemini.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
        Adapted { strict: openai_strict(schema).map(|s| s.to_string()), gemini: gemini.to_string(), gemini_notes, gemini_parameters }
    }

    pub fn heap_bytes(&self) -> usize {
        let strict = match &self.strict {
            Ok(s) | Err(s) => s.len(),
        };
        strict + self.gemini.len() + self.gemini_notes.iter().map(|n| n.len() + 24).sum::<usize>() + std::mem::size_of::<Self>()
    }
}

/// The schema for OpenAI's strict mode, or why it cannot be made faithfully (the tool is then
/// offered non-strict).
pub fn openai_strict(schema: &Value) -> Result<Value, String> {
    let root = schema.as_object().ok_or("the schema is not an object")?;
    if !is_object_root(root) {
        return Err("its root is not a plain object schema".into());
    }
    let mut cx = StrictCx { root, properties: 0, enum_values: 0 };
    let mut out = cx.node(root, 0, "")?;
    // `definitions` (draft 7) and `$defs` become one `$defs` (references are rewritten).
    let mut adapted = Map::new();
    for defs_key in ["$defs", "definitions"] {
        if let Some(defs) = root.get(defs_key) {
            let defs = defs.as_object().ok_or("its definitions are not an object")?;
            for (name, def) in defs {
                let def = def.as_object().ok_or_else(|| format!("definition {name:?} is not an object schema"))?;
                if adapted.insert(name.clone(), Value::Object(cx.node(def, 1, name)?)).is_some() {
                    return Err(format!("definition {name:?} is in both $defs and definitions"));
                }
            }
        }
    }
    if !adapted.is_empty() {
        out.insert("$defs".into(), Value::Object(adapted));
    }
    Ok(Value::Object(out))
}

struct StrictCx<'a> {
    root: &'a Map<String, Value>,
    properties: usize,
    enum_values: usize,
}

impl StrictCx<'_> {
    fn node(&mut self, s: &Map<String, Value>, depth: usize, at: &str) -> Result<Map<String, Value>, String> {
        let here = if at.is_empty() { "the root".to_string() } else { format!("{at:?}") };
        if depth > STRICT_MAX_DEPTH {
            return Err(format!("its objects nest deeper than {STRICT_MAX_DEPTH} levels"));
        }
        let mut out = Map::new();
        let mut notes = Vec::new();
        let object = if depth == 0 && at.is_empty() { is_object_root(s) } else { is_object_schema(s) };
        for (k, v) in s {
            match k.as_str() {
                "type" | "description" | "enum" | "const" | "pattern" | "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum"
                | "multipleOf" | "minItems" | "maxItems" | "title" => {
                    if k == "enum" {
                        self.enum_values += v.as_array().map_or(0, Vec::len);
                    }
                    out.insert(k.clone(), v.clone());
                }
                "$ref" => {
                    let r = v.as_str().ok_or("a $ref is not a string")?;
                    out.insert(k.clone(), Value::String(r.replace("#/definitions/", "#/$defs/")));
                }
                "format" if v.as_str().is_some_and(|f| STRICT_FORMATS.contains(&f)) => {
                    out.insert(k.clone(), v.clone());
                }
                "properties" | "required" | "additionalProperties" => {}
                "$defs" | "definitions" if depth == 0 && at.is_empty() => {}
                "$defs" | "definitions" => return Err(format!("{here} has definitions below the root")),
                "items" => {
                    let items = v.as_object().ok_or_else(|| format!("{here} has tuple or boolean items"))?;
                    out.insert(k.clone(), Value::Object(self.node(items, depth + 1, at)?));
                }
                "anyOf" | "oneOf" => {
                    let branches = v.as_array().ok_or_else(|| format!("{here} has a malformed {k}"))?;
                    let mut adapted = Vec::with_capacity(branches.len());
                    for b in branches {
                        let b = b.as_object().ok_or_else(|| format!("{here} has a boolean {k} branch"))?;
                        adapted.push(Value::Object(self.node(b, depth + 1, at)?));
                    }
                    if k == "oneOf" {
                        notes.push("exactly one of the alternatives".to_string());
                    }
                    out.insert("anyOf".into(), Value::Array(adapted));
                }
                "allOf"
                | "not"
                | "if"
                | "then"
                | "else"
                | "dependentSchemas"
                | "prefixItems"
                | "contains"
                | "unevaluatedProperties"
                | "unevaluatedItems"
                | "propertyNames"
                | "patternProperties" => {
                    return Err(format!("{here} uses {k}, which strict mode cannot express"));
                }
                _ if ANNOTATIONS.contains(&k.as_str()) || k.starts_with("x-") => {}
                // minLength, maxLength, uniqueItems, default, a format strict mode lacks…
                _ => notes.push(format!("{k}: {}", compact(v))),
            }
        }
        if s.get("type").is_some_and(|t| t == "array" || t.as_array().is_some_and(|ts| ts.contains(&json!("array")))) && !s.contains_key("items") {
            return Err(format!("{here} is an array without items, which strict mode cannot express"));
        }
        if object {
            let props = s.get("properties").map(|p| p.as_object().ok_or_else(|| format!("{here} has malformed properties"))).transpose()?;
            match s.get("additionalProperties") {
                None | Some(Value::Bool(false)) => {}
                Some(Value::Bool(true)) if props.is_some_and(|p| !p.is_empty()) => {}
                Some(_) => return Err(format!("{here} accepts properties it does not name (a map), which strict mode cannot express")),
            }
            let Some(props) = props.filter(|p| !p.is_empty()) else {
                // Only the root may be closed: a tool without parameters takes `{}`.
                if s.get("additionalProperties") != Some(&Value::Bool(false)) && (depth > 0 || !at.is_empty()) {
                    return Err(format!("{here} is a free-form object, which strict mode cannot express"));
                }
                out.insert("properties".into(), json!({}));
                out.insert("required".into(), json!([]));
                out.insert("additionalProperties".into(), Value::Bool(false));
                out.insert("type".into(), json!("object"));
                return Ok(with_notes(out, &notes));
            };
            let required: Vec<&str> =
                s.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            let mut adapted = Map::new();
            for (name, p) in props {
                self.properties += 1;
                let p = p.as_object().ok_or_else(|| format!("property {name:?} is not an object schema"))?;
                let mut a = self.node(p, depth + 1, name)?;
                if !required.contains(&name.as_str()) && !accepts_null_in(p, self.root, 0) {
                    a = nullable(a);
                }
                adapted.insert(name.clone(), Value::Object(a));
            }
            out.insert("properties".into(), Value::Object(adapted));
            out.insert("required".into(), Value::Array(props.keys().map(|k| Value::String(k.clone())).collect()));
            out.insert("additionalProperties".into(), Value::Bool(false));
            if !out.contains_key("type") {
                out.insert("type".into(), json!("object"));
            }
        }
        if self.properties > STRICT_MAX_PROPERTIES {
            return Err(format!("it has over {STRICT_MAX_PROPERTIES} properties"));
        }
        if self.enum_values > STRICT_MAX_ENUM_VALUES {
            return Err(format!("it has over {STRICT_MAX_ENUM_VALUES} enum values"));
        }
        let mut out = with_notes(out, &notes);
        // A `$ref` stands alone in strict mode: what was next to it goes, bar the description.
        if out.contains_key("$ref") && out.len() > 1 {
            let r = out.remove("$ref").expect("checked");
            let description = out.remove("description");
            out = Map::from_iter([("anyOf".to_string(), json!([{ "$ref": r }]))]);
            if let Some(d) = description {
                out.insert("description".into(), d);
            }
        }
        // Every other node needs a type: taken from its enum or const values, else refused.
        if !out.contains_key("type") && !out.contains_key("$ref") && !out.contains_key("anyOf") {
            let values: Vec<&Value> = match (out.get("enum"), out.get("const")) {
                (Some(Value::Array(e)), _) => e.iter().collect(),
                (_, Some(c)) => vec![c],
                _ => Vec::new(),
            };
            let with_null = values.contains(&&Value::Null);
            let values: Vec<&Value> = values.into_iter().filter(|v| !v.is_null()).collect();
            let t = json_type_of(&values).ok_or_else(|| format!("{here} accepts values of any type, which strict mode cannot express"))?;
            out.insert("type".into(), if with_null { json!([t, "null"]) } else { json!(t) });
        }
        Ok(out)
    }
}

/// The one JSON Schema type all these values have (integers count as numbers when mixed).
fn json_type_of(values: &[&Value]) -> Option<&'static str> {
    let kind = |v: &Value| match v {
        Value::String(_) => "string",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Null => "null",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let mut out: Option<&'static str> = None;
    for v in values {
        let k = kind(v);
        out = Some(match (out, k) {
            (None, k) => k,
            (Some(a), b) if a == b => a,
            (Some("integer"), "number") | (Some("number"), "integer") => "number",
            _ => return None,
        });
    }
    out
}

/// A schema that also takes null (strict mode makes optional properties required but
/// nullable).
fn nullable(mut s: Map<String, Value>) -> Map<String, Value> {
    if s.contains_key("$ref") || s.contains_key("const") || s.contains_key("anyOf") || !(s.contains_key("type") || s.contains_key("enum")) {
        if let Some(Value::Array(branches)) = s.get_mut("anyOf") {
            branches.push(json!({"type": "null"}));
            // A type next to the alternatives must let null through too.
            match s.get_mut("type") {
                Some(Value::String(t)) => {
                    let t = std::mem::take(t);
                    s.insert("type".into(), json!([t, "null"]));
                }
                Some(Value::Array(ts)) if !ts.contains(&json!("null")) => ts.push(json!("null")),
                _ => {}
            }
            return s;
        }
        let description = s.remove("description");
        let mut out = Map::new();
        if let Some(d) = description {
            out.insert("description".into(), d);
        }
        out.insert("anyOf".into(), json!([Value::Object(s), {"type": "null"}]));
        return out;
    }
    match s.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            s.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(ts)) => ts.push(json!("null")),
        _ => {}
    }
    if let Some(Value::Array(values)) = s.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    s
}

/// The schema in Gemini's subset (an OpenAPI 3.0 Schema object: no `$ref`, no type arrays,
/// string enums only), and what could not be kept.
pub fn gemini(schema: &Value) -> (Value, Vec<String>) {
    let mut notes = Vec::new();
    let root = schema.as_object().cloned().unwrap_or_default();
    let out = GeminiCx { root: &root, stack: Vec::new(), notes: &mut notes, nodes: 0 }.node(&root);
    (Value::Object(out), notes)
}

/// Fields of Gemini's `Schema` kept as they are.
const GEMINI_KEEP: &[&str] = &[
    "description",
    "title",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
];

struct GeminiCx<'a> {
    root: &'a Map<String, Value>,
    stack: Vec<String>,
    notes: &'a mut Vec<String>,
    /// Nodes written so far: inlining references can multiply a small schema.
    nodes: usize,
}

/// Gemini schemas grow as references are inlined; past this many nodes the tool is offered
/// with `parametersJsonSchema` instead.
const GEMINI_MAX_NODES: usize = 5_000;

impl GeminiCx<'_> {
    fn node(&mut self, s: &Map<String, Value>) -> Map<String, Value> {
        self.nodes += 1;
        if self.nodes > GEMINI_MAX_NODES {
            if self.nodes == GEMINI_MAX_NODES + 1 {
                self.notes.push(format!("unsupported size: over {GEMINI_MAX_NODES} nodes with references inlined"));
            }
            return Map::new();
        }
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            return self.inline(r, s);
        }
        let mut out = Map::new();
        let mut notes = Vec::new();
        for (k, v) in s {
            match k.as_str() {
                "type" => self.types(v, &mut out),
                _ if GEMINI_KEEP.contains(&k.as_str()) => {
                    out.insert(k.clone(), v.clone());
                }
                "default" => {
                    out.insert(k.clone(), v.clone());
                }
                "enum" => match v.as_array() {
                    Some(values) if values.iter().all(|x| x.is_string() || x.is_null()) => {
                        out.insert(k.clone(), Value::Array(values.iter().filter(|x| x.is_string()).cloned().collect()));
                        if values.contains(&Value::Null) {
                            out.insert("nullable".into(), Value::Bool(true));
                        }
                    }
                    _ => notes.push(format!("one of {}", compact(v))),
                },
                "const" => match v {
                    Value::String(_) => {
                        out.insert("enum".into(), json!([v]));
                    }
                    _ => notes.push(format!("always {}", compact(v))),
                },
                "exclusiveMinimum" | "exclusiveMaximum" if v.is_number() => {
                    let bound = if k == "exclusiveMinimum" { "minimum" } else { "maximum" };
                    out.entry(bound).or_insert_with(|| v.clone());
                    notes.push(format!("{k}: {v}"));
                }
                "properties" => {
                    let props = v.as_object().cloned().unwrap_or_default();
                    if let Some(bad) = props.keys().find(|n| !gemini_property_name(n)) {
                        self.notes.push(format!("unsupported property name {bad:?}"));
                    }
                    let adapted: Map<String, Value> = props.iter().map(|(n, p)| (n.clone(), Value::Object(self.child(p)))).collect();
                    let ordering = Value::Array(props.keys().map(|n| Value::String(n.clone())).collect());
                    // Merged with what an `allOf` before it brought.
                    merge(&mut out, Map::from_iter([(k.clone(), Value::Object(adapted)), ("propertyOrdering".to_string(), ordering)]));
                }
                "required" => merge(&mut out, Map::from_iter([(k.clone(), v.clone())])),
                "items" => match v {
                    Value::Object(items) => {
                        out.insert(k.clone(), Value::Object(self.node(items)));
                    }
                    _ => self.notes.push(format!("unsupported items: {}", compact(v))),
                },
                "anyOf" | "oneOf" => {
                    let branches: Vec<Value> = v.as_array().map(|b| b.iter().map(|b| Value::Object(self.child(b))).collect()).unwrap_or_default();
                    let (nulls, rest): (Vec<Value>, Vec<Value>) = branches.into_iter().partition(|b| b == &json!({"type": "NULL"}));
                    if !nulls.is_empty() {
                        out.insert("nullable".into(), Value::Bool(true));
                    }
                    match rest.len() {
                        0 => {}
                        1 => {
                            for (bk, bv) in rest[0].as_object().into_iter().flatten() {
                                out.entry(bk.clone()).or_insert_with(|| bv.clone());
                            }
                        }
                        _ => {
                            out.insert("anyOf".into(), Value::Array(rest));
                        }
                    }
                    if k == "oneOf" {
                        notes.push("exactly one of the alternatives".into());
                    }
                }
                "allOf" => match v.as_array() {
                    // Object parts merge: their properties and required lists together.
                    Some(parts) => {
                        for part in parts.iter().filter_map(Value::as_object) {
                            let part = self.node(part);
                            merge(&mut out, part);
                        }
                    }
                    None => notes.push(format!("allOf: {}", compact(v))),
                },
                "additionalProperties" if v == &Value::Bool(false) || v == &Value::Bool(true) => {}
                "$defs" | "definitions" => {}
                _ if ANNOTATIONS.contains(&k.as_str()) || k.starts_with("x-") => {}
                _ => notes.push(format!("{k}: {}", compact(v))),
            }
        }
        if out.contains_key("properties") && !out.contains_key("type") {
            out.insert("type".into(), json!("OBJECT"));
        }
        if out.contains_key("enum") && !out.contains_key("type") {
            out.insert("type".into(), json!("STRING"));
        }
        if out.get("type") == Some(&json!("ARRAY")) && !out.contains_key("items") {
            self.notes.push("unsupported array without items".into());
        }
        // `required` names only properties that are there.
        let names: Vec<String> = out.get("properties").and_then(Value::as_object).map(|p| p.keys().cloned().collect()).unwrap_or_default();
        if let Some(Value::Array(required)) = out.get_mut("required") {
            required.retain(|r| r.as_str().is_some_and(|r| names.iter().any(|n| n == r)));
            if required.is_empty() {
                out.remove("required");
            }
        }
        if !notes.is_empty() {
            self.notes.extend(notes.iter().cloned());
        }
        with_notes(out, &notes)
    }

    fn child(&mut self, v: &Value) -> Map<String, Value> {
        match v {
            Value::Object(o) => self.node(o),
            // `true`/`{}`: anything; Gemini needs a type, and a string is the least wrong.
            _ => Map::from_iter([("type".to_string(), json!("STRING"))]),
        }
    }

    /// A type or a type array: one type, `nullable` for "null", `anyOf` for several.
    fn types(&mut self, v: &Value, out: &mut Map<String, Value>) {
        let names: Vec<&str> = match v {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let (nulls, real): (Vec<&str>, Vec<&str>) = names.into_iter().partition(|t| *t == "null");
        if !nulls.is_empty() && !real.is_empty() {
            out.insert("nullable".into(), Value::Bool(true));
        }
        match real.as_slice() {
            [] if !nulls.is_empty() => {
                out.insert("type".into(), json!("NULL"));
            }
            [] => {}
            [one] => {
                out.insert("type".into(), json!(one.to_ascii_uppercase()));
            }
            many => {
                out.insert("anyOf".into(), Value::Array(many.iter().map(|t| json!({"type": t.to_ascii_uppercase()})).collect()));
            }
        }
    }

    /// A local `$ref` replaced by its target; a recursive one is cut to an object described
    /// in words (Gemini has no references).
    fn inline(&mut self, r: &str, s: &Map<String, Value>) -> Map<String, Value> {
        let name = r.rsplit('/').next().unwrap_or(r).to_string();
        let target = resolve(self.root, r);
        let mut out = match target {
            Some(t) if !self.stack.contains(&r.to_string()) && self.stack.len() < MAX_REF_DEPTH => {
                self.stack.push(r.to_string());
                let out = self.node(t);
                self.stack.pop();
                out
            }
            Some(_) => {
                self.notes.push(format!("recursive {r} cut"));
                Map::from_iter([("type".to_string(), json!("OBJECT")), ("description".to_string(), json!(format!("A {name} (recursive).")))])
            }
            None => {
                self.notes.push(format!("unresolved {r}"));
                Map::from_iter([("type".to_string(), json!("OBJECT"))])
            }
        };
        // Keywords next to the $ref (a description, mostly) win over the target's.
        let mut siblings = s.clone();
        siblings.remove("$ref");
        if !siblings.is_empty() {
            for (k, v) in self.node(&siblings) {
                out.insert(k, v);
            }
        }
        out
    }
}

/// Gemini's parameter names: a letter or `_`, then letters, digits and `_`; at most 64.
fn gemini_property_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && b.len() <= 64 && (b[0].is_ascii_alphabetic() || b[0] == b'_') && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

fn merge(into: &mut Map<String, Value>, part: Map<String, Value>) {
    for (k, v) in part {
        match (k.as_str(), into.get_mut(&k), v) {
            ("properties", Some(Value::Object(have)), Value::Object(more)) => have.extend(more),
            ("required" | "propertyOrdering", Some(Value::Array(have)), Value::Array(more)) => {
                have.extend(more.into_iter().filter(|m| !have.contains(m)).collect::<Vec<_>>())
            }
            (_, Some(_), _) => {}
            (_, None, v) => {
                into.insert(k, v);
            }
        }
    }
}

/// A local reference's target: `#`, `#/$defs/x`, `#/definitions/x`.
fn resolve<'a>(root: &'a Map<String, Value>, r: &str) -> Option<&'a Map<String, Value>> {
    if r == "#" {
        return Some(root);
    }
    let path = r.strip_prefix("#/")?;
    let mut at = root;
    for part in path.split('/') {
        let part = part.replace("~1", "/").replace("~0", "~");
        at = at.get(&part)?.as_object()?;
    }
    Some(at)
}

/// Is this an object schema: typed so, or untyped with object keywords (at the root, also
/// one that says nothing at all: tool arguments are an object).
fn is_object_schema(s: &Map<String, Value>) -> bool {
    match s.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        Some(_) => false,
        None => ["properties", "additionalProperties", "required"].iter().any(|k| s.contains_key(*k)),
    }
}

fn is_object_root(s: &Map<String, Value>) -> bool {
    is_object_schema(s) || !["type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const"].iter().any(|k| s.contains_key(*k))
}

/// The description with what the adaptation dropped, in the schema's key order.
fn with_notes(mut out: Map<String, Value>, notes: &[String]) -> Map<String, Value> {
    if notes.is_empty() {
        return out;
    }
    let extra = format!("({})", notes.join("; "));
    let text = match out.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => format!("{d} {extra}"),
        _ => extra,
    };
    out.insert("description".into(), Value::String(text));
    out
}

fn compact(v: &Value) -> String {
    const MAX: usize = 200;
    let text = v.to_string();
    if text.len() <= MAX {
        return text;
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

mod restore;
use restore::accepts_null_in;
pub use restore::{omitted_restored, restore_omitted};

#[cfg(test)]
mod tests;
