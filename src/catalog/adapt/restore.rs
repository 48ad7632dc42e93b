//! Undoing strict mode's one change to arguments: the nulls it made the model send for
//! optional properties.

use serde_json::{Map, Value};

use super::{MAX_REF_DEPTH, resolve};

/// Removes the nulls strict mode sends for optional properties whose original schema does
/// not take null (the model had to send them), so the call validates and runs as the tool
/// expects. Other nulls stay: the original schema judges them.
pub fn restore_omitted(arguments: &mut Value, schema: &Value) {
    // Most calls carry no null: they are not walked against the schema.
    if let (true, Some(root)) = (has_null(arguments), schema.as_object()) {
        restore(arguments, root, root, 0);
    }
}

/// [`restore_omitted`] on a copy, made only when `arguments` has a null (most calls have none).
pub fn omitted_restored<'a>(arguments: &'a Value, schema: &Value) -> std::borrow::Cow<'a, Value> {
    if !has_null(arguments) {
        return std::borrow::Cow::Borrowed(arguments);
    }
    let mut restored = arguments.clone();
    restore_omitted(&mut restored, schema);
    std::borrow::Cow::Owned(restored)
}

fn has_null(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(o) => o.values().any(has_null),
        Value::Array(a) => a.iter().any(has_null),
        _ => false,
    }
}

fn restore(v: &mut Value, s: &Map<String, Value>, root: &Map<String, Value>, depth: usize) {
    if depth > MAX_REF_DEPTH {
        return;
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        if let Some(t) = resolve(root, r) {
            restore(v, t, root, depth + 1);
        }
        return;
    }
    match v {
        Value::Object(obj) => {
            // Object alternatives: a null goes when every alternative naming its key has it
            // optional and not nullable (strict mode made it required there too).
            for key in ["anyOf", "oneOf"] {
                if let Some(Value::Array(branches)) = s.get(key) {
                    let branches: Vec<&Map<String, Value>> = branches
                        .iter()
                        .filter_map(Value::as_object)
                        .map(|b| b.get("$ref").and_then(Value::as_str).and_then(|r| resolve(root, r)).unwrap_or(b))
                        .collect();
                    obj.retain(|k, x| {
                        let naming: Vec<&&Map<String, Value>> =
                            branches.iter().filter(|b| b.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(k))).collect();
                        !(x.is_null() && !naming.is_empty() && naming.iter().all(|b| omittable_null(b, k, root, depth)))
                    });
                }
            }
            let Some(props) = s.get("properties").and_then(Value::as_object) else {
                return;
            };
            obj.retain(|k, x| !(x.is_null() && props.contains_key(k) && omittable_null(s, k, root, depth)));
            for (k, x) in obj.iter_mut() {
                if let Some(p) = props.get(k).and_then(Value::as_object) {
                    restore(x, p, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.get("items").and_then(Value::as_object) {
                for x in items {
                    restore(x, item, root, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Is `key` of object schema `s` optional, with a schema that does not take null?
fn omittable_null(s: &Map<String, Value>, key: &str, root: &Map<String, Value>, depth: usize) -> bool {
    let required = s.get("required").and_then(Value::as_array).is_some_and(|r| r.iter().any(|n| n == key));
    !required && s.get("properties").and_then(|p| p.get(key)).and_then(Value::as_object).is_some_and(|p| !accepts_null_in(p, root, depth))
}

/// Does a schema take null (references followed in `root`)? Judged within a step budget:
/// past it, yes (the null is kept and the validator judges it).
pub(super) fn accepts_null_in(s: &Map<String, Value>, root: &Map<String, Value>, depth: usize) -> bool {
    let mut budget = 256usize;
    takes_null(s, root, depth, &mut budget)
}

fn takes_null(s: &Map<String, Value>, root: &Map<String, Value>, depth: usize, budget: &mut usize) -> bool {
    if *budget == 0 {
        return true;
    }
    *budget -= 1;
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        return match resolve(root, r) {
            Some(t) if depth < MAX_REF_DEPTH => takes_null(t, root, depth + 1, budget),
            // Unknown: keep the null and let the validator judge.
            _ => true,
        };
    }
    if let Some(c) = s.get("const") {
        return c.is_null();
    }
    if let Some(Value::Array(values)) = s.get("enum") {
        return values.contains(&Value::Null);
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = s.get(k) {
            return branches.iter().any(|b| b.as_object().is_none_or(|b| takes_null(b, root, depth + 1, budget)));
        }
    }
    match s.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => true,
    }
}
