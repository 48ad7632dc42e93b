//! TEMPORARY placeholder.
pub fn schema_fields(schema: &serde_json::Value) -> (Vec<String>, Vec<String>) {
    let names = schema.get("properties").and_then(|p| p.as_object()).map(|o| o.keys().cloned().collect()).unwrap_or_default();
    (names, vec![])
}
