//! The searchable text of a tool: the six fields of SPEC §5 and the part of them that comes
//! from its input schema.

use std::slice;

use serde_json::Value;

use super::SearchDoc;

mod from_text;
pub use from_text::schema_fields_of_text;

/// The six searchable fields of `doc`, in priority order (index 0 is field 1, the local name).
pub fn searchable_fields(doc: &SearchDoc) -> [&[String]; 6] {
    [
        slice::from_ref(&doc.name),
        slice::from_ref(&doc.description),
        slice::from_ref(&doc.group),
        &doc.property_names,
        &doc.schema_descriptions,
        slice::from_ref(&doc.additional_search_text),
    ]
}

/// Property names and `description` strings found at any depth of an input schema.
///
/// Descends only through schema keywords (properties, items, combinators, local
/// definitions, …), so `default`, `examples`, `enum`, `const` and `title` values are never
/// read, and never follows `$ref`. Iterative, so a deep schema cannot overflow the stack.
pub fn schema_fields(schema: &Value) -> (Vec<String>, Vec<String>) {
    let mut names = Vec::new();
    let mut descriptions = Vec::new();
    let mut pending = vec![schema];
    while let Some(node) = pending.pop() {
        // Boolean schemas carry no text.
        let Value::Object(schema) = node else {
            continue;
        };
        if let Some(Value::String(description)) = schema.get("description") {
            descriptions.push(description.clone());
        }
        for (keyword, value) in schema {
            match (holds(keyword), value) {
                (Holds::Properties, Value::Object(properties)) => {
                    for (name, subschema) in properties {
                        names.push(name.clone());
                        pending.push(subschema);
                    }
                }
                // Values that are not objects are skipped when popped.
                (Holds::SchemaValues, Value::Object(schemas)) => pending.extend(schemas.values()),
                (Holds::Schemas, Value::Array(schemas)) => pending.extend(schemas),
                (Holds::Schemas | Holds::Schema, schema) => pending.push(schema),
                _ => {}
            }
        }
    }
    (names, descriptions)
}

/// What a keyword's value holds, for the walk.
#[derive(Clone, Copy)]
enum Holds {
    /// One schema.
    Schema,
    /// An object of schemas (its keys are not property names).
    SchemaValues,
    /// Property names, each with its schema.
    Properties,
    /// An array of schemas, or one schema.
    Schemas,
    /// The schema's description, when a string.
    Description,
    /// Nothing the walk reads.
    Nothing,
}

fn holds(keyword: &str) -> Holds {
    match keyword {
        "description" => Holds::Description,
        "properties" => Holds::Properties,
        // Keys here are regexes or definition names, not property names. Draft-7
        // `dependencies` mixes schemas with lists of required names: only the objects are
        // schemas, as anywhere a schema is expected.
        "patternProperties" | "$defs" | "definitions" | "dependentSchemas" | "dependencies" => Holds::SchemaValues,
        // Object form (one schema) or array form (tuple) across drafts.
        "items" | "prefixItems" | "allOf" | "anyOf" | "oneOf" => Holds::Schemas,
        "additionalProperties"
        | "unevaluatedProperties"
        | "propertyNames"
        | "additionalItems"
        | "unevaluatedItems"
        | "contains"
        | "not"
        | "if"
        | "then"
        | "else" => Holds::Schema,
        _ => Holds::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sorted(mut v: Vec<String>) -> Vec<String> {
        v.sort();
        v
    }

    #[test]
    fn collects_top_level_property_names_and_descriptions() {
        let (names, descriptions) = schema_fields(&json!({
            "type": "object",
            "description": "Lookup input.",
            "properties": {
                "customer_id": {"type": "integer", "description": "Numeric customer ID."}
            }
        }));
        assert_eq!(names, ["customer_id"]);
        assert_eq!(sorted(descriptions), ["Lookup input.", "Numeric customer ID."]);
    }

    #[test]
    fn collects_nested_objects_items_and_combinators() {
        let (names, descriptions) = schema_fields(&json!({
            "properties": {
                "address": {"type": "object", "properties": {"street": {"description": "d1"}}},
                "lines": {"type": "array", "items": {"properties": {"sku": {}}}},
                "pair": {"items": [{"properties": {"left": {}}}, {"description": "d2"}]},
                "tuple": {"prefixItems": [{"properties": {"first": {}}}]},
                "choice": {"anyOf": [{"properties": {"email": {}}}, {"properties": {"phone": {}}}]},
                "both": {"allOf": [{"properties": {"a1": {}}}], "oneOf": [{"properties": {"o1": {}}}]},
                "neg": {"not": {"properties": {"n1": {}}}},
                "cond": {
                    "if": {"properties": {"i1": {}}},
                    "then": {"properties": {"t1": {}}},
                    "else": {"properties": {"e1": {}}}
                },
                "map": {
                    "additionalProperties": {"properties": {"ap": {}}},
                    "patternProperties": {"^x-": {"properties": {"pp": {}}}},
                    "dependentSchemas": {"map": {"properties": {"ds": {}}}}
                }
            }
        }));
        assert_eq!(
            sorted(names),
            [
                "a1", "address", "ap", "both", "choice", "cond", "ds", "e1", "email", "first", "i1", "left", "lines", "map", "n1", "neg", "o1",
                "pair", "phone", "pp", "sku", "street", "t1", "tuple"
            ]
        );
        assert_eq!(sorted(descriptions), ["d1", "d2"]);
    }

    #[test]
    fn scans_defs_contents_but_not_definition_names() {
        let (names, descriptions) = schema_fields(&json!({
            "$defs": {"Money": {"properties": {"amount": {"description": "In cents."}}}},
            "definitions": {"Address": {"properties": {"zip": {}}}}
        }));
        assert_eq!(sorted(names), ["amount", "zip"]);
        assert_eq!(descriptions, ["In cents."]);
    }

    #[test]
    fn ignores_defaults_examples_enums_consts_and_titles() {
        let (names, descriptions) = schema_fields(&json!({
            "title": "Title text",
            "properties": {
                "mode": {
                    "enum": ["fast"],
                    "default": {"description": "in default"},
                    "examples": [{"properties": {"ex": {}}}],
                    "const": "constant",
                    "title": "Mode title"
                }
            }
        }));
        assert_eq!(names, ["mode"]);
        assert!(descriptions.is_empty());
    }

    #[test]
    fn never_expands_refs() {
        let (names, descriptions) = schema_fields(&json!({
            "properties": {"target": {"$ref": "#/$defs/Hidden"}},
            "$comment": {"properties": {"not_a_schema": {}}}
        }));
        assert_eq!(names, ["target"]);
        assert!(descriptions.is_empty());
    }

    #[test]
    fn a_property_named_description_is_a_property_name() {
        let (names, descriptions) = schema_fields(&json!({
            "properties": {"description": {"type": "string", "description": "Free text."}}
        }));
        assert_eq!(names, ["description"]);
        assert_eq!(descriptions, ["Free text."]);
    }

    #[test]
    fn only_string_descriptions_in_schema_position_count() {
        let (_, descriptions) = schema_fields(&json!({
            "description": {"nested": "object"},
            "properties": {"a": {"description": 5}}
        }));
        assert!(descriptions.is_empty());
    }

    #[test]
    fn deep_schemas_do_not_overflow_the_stack() {
        let depth = 5_000;
        let mut schema = json!({"description": "leaf"});
        for _ in 0..depth {
            // Built by hand: `json!` would serialize the inner value recursively.
            let properties = serde_json::Map::from_iter([("p".to_owned(), schema)]);
            let wrapper = [("properties".to_owned(), Value::Object(properties))];
            schema = Value::Object(serde_json::Map::from_iter(wrapper));
        }
        // A small stack that recursion of this depth would overflow.
        let (names, descriptions) = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn_scoped(scope, || schema_fields(&schema))
                .expect("spawn")
                .join()
                .expect("no overflow")
        });
        assert_eq!(names.len(), depth);
        assert_eq!(descriptions, ["leaf"]);
        // serde_json drops values recursively; keep that outside what this test measures.
        std::mem::forget(schema);
    }

    #[test]
    fn searchable_fields_are_in_priority_order() {
        let doc = SearchDoc {
            name: "n".into(),
            description: "d".into(),
            group: "g".into(),
            property_names: vec!["p".into()],
            schema_descriptions: vec!["s".into()],
            additional_search_text: "a".into(),
            ..SearchDoc::default()
        };
        let fields = searchable_fields(&doc).map(|f| f.join(""));
        assert_eq!(fields, ["n", "d", "g", "p", "s", "a"]);
    }
}
