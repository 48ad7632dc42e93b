use super::*;

fn strict(s: Value) -> Value {
    openai_strict(&s).unwrap()
}

#[test]
fn strict_mode_requires_every_property_and_makes_the_optional_ones_nullable() {
    let s = strict(json!({
        "type": "object",
        "properties": {
            "q": {"type": "string", "minLength": 2},
            "limit": {"type": "integer", "default": 10},
            "kind": {"enum": ["a", "b"], "type": "string"},
            "at": {"$ref": "#/$defs/place"}
        },
        "required": ["q"],
        "$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    }));
    assert_eq!(
        s,
        json!({
            "type": "object",
            "properties": {
                "q": {"type": "string", "description": "(minLength: 2)"},
                "limit": {"type": ["integer", "null"], "description": "(default: 10)"},
                "kind": {"enum": ["a", "b", null], "type": ["string", "null"]},
                "at": {"anyOf": [{"$ref": "#/$defs/place"}, {"type": "null"}]}
            },
            "required": ["q", "limit", "kind", "at"],
            "additionalProperties": false,
            "$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}
        })
    );
}

#[test]
fn strict_mode_refuses_what_it_cannot_express() {
    for (s, why) in [
        (json!({"type": "object", "properties": {"meta": {"type": "object"}}}), "free-form"),
        (json!({"type": "object", "additionalProperties": {"type": "string"}}), "a map"),
        (json!({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}}), "allOf"),
        (json!({"anyOf": [{"type": "object"}]}), "root"),
    ] {
        let e = openai_strict(&s).unwrap_err();
        assert!(e.contains(why), "{s}: {e}");
    }
}

#[test]
fn gemini_inlines_references_and_has_no_type_arrays() {
    let (g, notes) = gemini(&json!({
        "type": "object",
        "properties": {
            "name": {"type": ["string", "null"], "description": "Who."},
            "size": {"type": "integer", "exclusiveMinimum": 0},
            "node": {"$ref": "#/$defs/node"},
            "mode": {"enum": [1, 2]}
        },
        "required": ["name"],
        "additionalProperties": false,
        "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}}
    }));
    assert_eq!(g["properties"]["name"], json!({"nullable": true, "type": "STRING", "description": "Who."}));
    assert_eq!(g["properties"]["size"], json!({"type": "INTEGER", "minimum": 0, "description": "(exclusiveMinimum: 0)"}));
    assert_eq!(g["properties"]["node"]["properties"]["child"]["type"], "OBJECT");
    assert_eq!(g["properties"]["mode"], json!({"description": "(one of [1,2])"}));
    assert_eq!(g["propertyOrdering"], json!(["name", "size", "node", "mode"]));
    assert!(!g.to_string().contains("$ref") && !g.to_string().contains("$defs"), "{g}");
    assert!(notes.iter().any(|n| n.contains("recursive")), "{notes:?}");
    let (_, notes) = gemini(&json!({"type": "object", "properties": {"first-name": {"type": "string"}}}));
    assert_eq!(notes, ["unsupported property name \"first-name\""]);
}

#[test]
fn the_same_schema_adapts_to_the_same_bytes() {
    let s = json!({"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "number", "uniqueItems": true}}});
    assert_eq!(strict(s.clone()).to_string(), strict(s.clone()).to_string());
    assert_eq!(gemini(&s).0.to_string(), gemini(&s).0.to_string());
    assert_eq!(
        strict(s).to_string(),
        r#"{"type":"object","properties":{"b":{"type":["string","null"]},"a":{"type":["number","null"],"description":"(uniqueItems: true)"}},"required":["b","a"],"additionalProperties":false}"#
    );
}

#[test]
fn strict_nulls_for_optional_properties_are_removed_and_other_nulls_kept() {
    let schema = json!({
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "limit": {"type": "integer"},
            "note": {"type": ["string", "null"]},
            "at": {"$ref": "#/$defs/place"},
            "list": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string"}}}}
        },
        "required": ["q"],
        "$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}, "required": ["city"]}}
    });
    let mut args = json!({"q": null, "limit": null, "note": null, "at": {"city": "Oslo", "zip": null}, "list": [{"x": null}]});
    restore_omitted(&mut args, &schema);
    assert_eq!(args, json!({"q": null, "note": null, "at": {"city": "Oslo"}, "list": [{}]}));
    let alternatives = json!({"type": "object", "properties": {"pay": {"anyOf": [
        {"type": "object", "properties": {"card": {"type": "string"}, "cvc": {"type": "string"}, "memo": {"type": "string"}}, "required": ["card"]},
        {"type": "object", "properties": {"iban": {"type": "string"}, "memo": {"type": ["string", "null"]}}, "required": ["iban"]}
    ]}}});
    let mut args = json!({"pay": {"card": "4242", "cvc": null, "memo": null}});
    restore_omitted(&mut args, &alternatives);
    assert_eq!(args, json!({"pay": {"card": "4242", "memo": null}}), "memo takes null in one alternative: kept");
    // The copying form: the arguments themselves when they hold no null, else restored.
    let plain = json!({"q": "x", "at": {"city": "Oslo"}});
    assert!(matches!(omitted_restored(&plain, &schema), std::borrow::Cow::Borrowed(a) if std::ptr::eq(a, &plain)));
    let nulls = json!({"q": "x", "limit": null});
    assert_eq!(omitted_restored(&nulls, &schema).into_owned(), json!({"q": "x"}));
}

#[test]
fn adaptation_stays_bounded_on_references_that_fan_out() {
    // d0 → d1 → … → d15, each with 8 references to the next: 8^16 nodes if inlined.
    let mut defs = Map::new();
    for i in 0..16 {
        let props: Map<String, Value> = (0..8).map(|k| (format!("p{k}"), json!({"$ref": format!("#/$defs/d{}", i + 1)}))).collect();
        defs.insert(format!("d{i}"), json!({"type": "object", "properties": props}));
    }
    defs.insert("d16".into(), json!({"type": "string"}));
    let schema = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs});
    let (_, notes) = gemini(&schema);
    assert!(notes.iter().any(|n| n.starts_with("unsupported size")), "{notes:?}");
    let mut args = json!({"x": null});
    restore_omitted(&mut args, &schema);
    assert_eq!(args, json!({}));
}

#[test]
fn strict_mode_gives_every_node_a_type_and_a_ref_no_siblings() {
    let s = strict(json!({"type": "object", "properties": {
        "at": {"$ref": "#/$defs/p", "description": "Where."},
        "kind": {"enum": ["a", "b"]},
        "n": {"const": 3}
    }, "required": ["at", "kind", "n"], "$defs": {"p": {"type": "string"}}}));
    assert_eq!(s["properties"]["at"], json!({"anyOf": [{"$ref": "#/$defs/p"}], "description": "Where."}));
    assert_eq!(s["properties"]["kind"]["type"], "string");
    assert_eq!(s["properties"]["n"]["type"], "integer");
    let e = openai_strict(&json!({"type": "object", "properties": {"v": {"description": "anything"}}})).unwrap_err();
    assert!(e.contains("any type"), "{e}");
    let e = openai_strict(&json!({"type": "object", "properties": {"v": {"type": "array"}}})).unwrap_err();
    assert!(e.contains("without items"), "{e}");
}
