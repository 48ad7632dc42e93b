//! Arguments validation (`invoke::validate::check_arguments`).
//!
//! Input: one mode byte, then the body. Even: text, `<schema JSON> NUL <arguments JSON>`.
//! Odd: the body drives a small generator of schemas (types, properties, required,
//! combinators, `$ref`/`$defs`, patterns, formats, bounds, …) and of argument values made of
//! the same property names, so most arguments get deep into the schema.
//!
//! The schema is the input schema of a tool an MCP server lists (only parsed at preparation,
//! like any upstream schema). Checks: no panic; a schema that passes create-time validation
//! compiles; the verdict agrees with the validator's `is_valid` and is deterministic; an
//! error result is `invalid_arguments` with one to five errors, each naming a JSON pointer
//! that exists in the arguments, and a message naming the tool and the first pointer; a
//! schema that does not compile gives `tool_unavailable`; the search fields read from the
//! schema text equal the parsed value's, and its compact text parses to that value.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};
use toolrouter::catalog::schema::{check_input, parse};
use toolrouter::catalog::{AgentDefinition, Catalog, McpSource, SourceKind, ToolDeclaration, ToolGroup, ToolSource};
use toolrouter::invoke::validate::check_arguments;
use toolrouter::search::fields::{schema_fields, schema_fields_of_text};
use toolrouter_fuzz::{content_object, error_code};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    let (schema, arguments) = if mode % 2 == 0 {
        let Some(split) = body.iter().position(|&b| b == 0) else { return };
        let Ok(schema) = std::str::from_utf8(&body[..split]) else { return };
        let Ok(arguments) = serde_json::from_slice::<Value>(&body[split + 1..]) else { return };
        (schema.to_string(), arguments)
    } else {
        let mut u = Unstructured::new(body);
        let mut g = Generator { u: &mut u };
        let schema = g.root_schema();
        let arguments = if g.pick(8) == 0 { g.value(2) } else { g.object(3) };
        (schema.to_string(), arguments)
    };
    check(&schema, &arguments);
});

/// A catalog with one MCP source in group `g` whose server lists tool `t` with `schema`.
fn catalog_with(schema: &str) -> Catalog {
    let def = AgentDefinition {
        sources: vec![ToolSource {
            id: "mcp".into(),
            kind: SourceKind::Mcp(McpSource { url: "http://127.0.0.1:9".into(), ..McpSource::default() }),
            ..ToolSource::default()
        }],
        groups: BTreeMap::from([("g".to_string(), ToolGroup { description: "fuzz".into(), source_ids: vec!["mcp".into()] })]),
        ..AgentDefinition::default()
    };
    let tool = ToolDeclaration { name: "t".into(), input_schema: schema.into(), ..ToolDeclaration::default() };
    Catalog::compile(&def, &BTreeMap::from([("mcp".to_string(), vec![tool])]))
}

fn check(schema: &str, arguments: &Value) {
    let catalog = catalog_with(schema);
    let Some(tool) = catalog.tools.first() else {
        // Preparation skips a tool whose schema is not JSON, and says so.
        assert!(parse(schema).is_err(), "tool skipped: {:?}", catalog.diagnostics);
        assert!(schema_fields_of_text(schema).is_none(), "fields read from text that is not JSON: {schema:?}");
        return;
    };
    // Preparation read the search fields from the text in one pass when it could: they are
    // the parsed value's, in order, and the compact text is the same value.
    let value = parse(schema).expect("a prepared tool's schema parses");
    if let Some((names, descriptions)) = schema_fields_of_text(schema) {
        let (parsed_names, parsed_descriptions) = schema_fields(&value);
        assert!(names == parsed_names && descriptions == parsed_descriptions, "fields of {schema}");
    }
    assert_eq!(tool.input_schema(), &value, "compact text of {schema}");
    let accepted_at_create = check_input(tool.input_schema()).is_ok();
    let verdict = check_arguments(tool, arguments);
    assert_eq!(verdict, check_arguments(tool, arguments), "not deterministic");
    let validator = match tool.validator() {
        Ok(v) => v,
        Err(_) => {
            assert!(!accepted_at_create, "a schema accepted at create time does not compile: {schema}");
            let result = verdict.expect_err("no validator, no call").render();
            assert_eq!(error_code(&result.content_json), "tool_unavailable");
            return;
        }
    };
    let Err(fault) = verdict else {
        assert!(validator.is_valid(arguments), "accepted but not valid: {arguments} for {schema}");
        return;
    };
    assert!(!validator.is_valid(arguments), "rejected but valid: {arguments} for {schema}");
    let result = fault.render();
    assert!(result.is_error);
    assert_eq!(error_code(&result.content_json), "invalid_arguments");
    let content = content_object(&result.content_json);
    let errors = content["errors"].as_array().expect("an errors list");
    assert!((1..=5).contains(&errors.len()), "{} errors", errors.len());
    for e in errors {
        let pointer = e["pointer"].as_str().expect("a pointer");
        assert!(e["expected"].is_string(), "{e}");
        assert!(pointer == "/" || arguments.pointer(pointer).is_some(), "pointer {pointer:?} not in {arguments}");
    }
    let message = content["message"].as_str().expect("a message");
    let first = errors[0]["pointer"].as_str().expect("a pointer");
    assert!(message.contains(&tool.name) && message.contains(&format!("at {first} ")), "{message}");
}

const NAMES: &[&str] = &["a", "b", "id", "x y", "~1", "a/b", "", "é", "items", "$ref"];
const TYPES: &[&str] = &["object", "string", "integer", "number", "boolean", "array", "null"];
const PATTERNS: &[&str] = &["^a", "[0-9]+", "\\p{L}+$", "(a|b)*c", "^$", "\\d{2,}", "^[^/]*$", "(?i)ID"];
const FORMATS: &[&str] = &[
    "email",
    "idn-email",
    "date-time",
    "date",
    "time",
    "duration",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uri-template",
    "ipv4",
    "ipv6",
    "hostname",
    "idn-hostname",
    "uuid",
    "regex",
    "json-pointer",
    "relative-json-pointer",
    "unknown-format",
];
const STRINGS: &[&str] = &[
    "",
    "a",
    "abc",
    "12",
    "x y",
    "é",
    "\u{0}",
    "a@example.com",
    "2024-02-30T25:00:00Z",
    "2024-01-01T00:00:00Z",
    "P1D",
    "::1",
    "256.1.1.1",
    "http://[::1]:80/p?q#f",
    "../a",
    "/a/~2",
    "0/a",
    "(",
    "[a-",
    "550e8400-e29b-41d4-a716-446655440000",
    "xn--",
    "-a-.com",
    "{a}",
];
const NUMBERS: &[f64] = &[0.0, -0.0, 1.0, -1.0, 0.1, 0.3, 2.5, 1e308, -1e308, 1e-308, 3.0, 9007199254740993.0];
const INTEGERS: &[i64] = &[0, 1, -1, 2, 7, 100, i64::MAX, i64::MIN];

/// Builds schemas and values from the fuzz input; out of input, every choice is the first.
struct Generator<'a, 'b> {
    u: &'a mut Unstructured<'b>,
}

impl Generator<'_, '_> {
    fn pick(&mut self, n: usize) -> usize {
        self.u.choose_index(n).unwrap_or(0)
    }

    fn from<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[self.pick(items.len())]
    }

    fn flag(&mut self) -> bool {
        self.pick(2) == 1
    }

    fn number(&mut self) -> Value {
        if self.flag() { json!(INTEGERS[self.pick(INTEGERS.len())]) } else { json!(NUMBERS[self.pick(NUMBERS.len())]) }
    }

    fn small(&mut self) -> Value {
        json!(self.pick(4))
    }

    /// A schema with local definitions the subschemas may `$ref`.
    fn root_schema(&mut self) -> Value {
        let mut root = match self.schema(3) {
            Value::Object(obj) => obj,
            other => return other,
        };
        if self.flag() {
            let d = self.schema(2);
            root.insert("$defs".into(), json!({"d": d}));
        }
        if self.pick(4) == 0 {
            root.insert("type".into(), json!("object"));
        }
        Value::Object(root)
    }

    fn schemas(&mut self, depth: u32) -> Value {
        let n = 1 + self.pick(3);
        Value::Array((0..n).map(|_| self.schema(depth)).collect())
    }

    fn schema(&mut self, depth: u32) -> Value {
        if depth == 0 || self.pick(10) == 0 {
            return match self.pick(4) {
                0 => json!(true),
                1 => json!(false),
                2 => json!({"$ref": "#/$defs/d"}),
                _ => json!({"type": self.from(TYPES)}),
            };
        }
        let mut s = Map::new();
        for _ in 0..1 + self.pick(4) {
            let d = depth - 1;
            let (key, value) = match self.pick(30) {
                0 => ("type", json!(self.from(TYPES))),
                1 => ("type", json!([self.from(TYPES), self.from(TYPES)])),
                2 => {
                    let props: Map<String, Value> = (0..1 + self.pick(3)).map(|_| (self.from(NAMES).to_string(), self.schema(d))).collect();
                    ("properties", Value::Object(props))
                }
                3 => ("required", json!((0..1 + self.pick(3)).map(|_| self.from(NAMES)).collect::<Vec<_>>())),
                4 => ("additionalProperties", if self.flag() { json!(false) } else { self.schema(d) }),
                5 => ("items", self.schema(d)),
                6 => ("prefixItems", self.schemas(d)),
                7 => ("anyOf", self.schemas(d)),
                8 => ("oneOf", self.schemas(d)),
                9 => ("allOf", self.schemas(d)),
                10 => ("not", self.schema(d)),
                11 => ("if", self.schema(d)),
                12 => ("then", self.schema(d)),
                13 => ("else", self.schema(d)),
                14 => ("enum", json!([self.value(1), self.value(1)])),
                15 => ("const", self.value(2)),
                16 => ("pattern", json!(self.from(PATTERNS))),
                17 => ("format", json!(self.from(FORMATS))),
                18 => (["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"][self.pick(4)], self.number()),
                19 => ("multipleOf", json!([0.1, 0.01, 3.0, 1e-10, 7.5][self.pick(5)])),
                20 => (["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"][self.pick(6)], self.small()),
                21 => ("propertyNames", self.schema(d)),
                22 => ("patternProperties", json!({self.from(PATTERNS): self.schema(d)})),
                23 => ("dependentRequired", json!({self.from(NAMES): [self.from(NAMES)]})),
                24 => ("dependentSchemas", json!({self.from(NAMES): self.schema(d)})),
                25 => (["unevaluatedProperties", "unevaluatedItems"][self.pick(2)], if self.flag() { json!(false) } else { self.schema(d) }),
                26 => ("contains", self.schema(d)),
                27 => (["minContains", "maxContains"][self.pick(2)], self.small()),
                28 => ("uniqueItems", json!(self.flag())),
                _ => ("$ref", json!(["#/$defs/d", "#", "#/properties/a"][self.pick(3)])),
            };
            s.insert(key.into(), value);
        }
        Value::Object(s)
    }

    fn object(&mut self, depth: u32) -> Value {
        Value::Object((0..self.pick(4)).map(|_| (self.from(NAMES).to_string(), self.value(depth))).collect())
    }

    fn value(&mut self, depth: u32) -> Value {
        match self.pick(if depth == 0 { 5 } else { 7 }) {
            0 => Value::Null,
            1 => json!(self.flag()),
            2 => self.number(),
            3 | 4 => json!(self.from(STRINGS)),
            5 => Value::Array((0..self.pick(4)).map(|_| self.value(depth - 1)).collect()),
            _ => self.object(depth - 1),
        }
    }
}
