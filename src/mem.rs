//! Approximate heap sizes of the structures caches keep, so that caches can be bounded in
//! bytes (SPEC §10). Estimates count what the allocator hands out for vectors, strings and
//! hash tables, from their capacities; `tests/catalog_size.rs` checks them against a
//! counting allocator.

use std::collections::HashMap;

/// Bytes a vector's buffer takes.
pub fn vec<T>(v: &[T], capacity: usize) -> usize {
    capacity.max(v.len()) * size_of::<T>()
}

/// Bytes a hash table's buckets take (keys, values and a control byte each; hashbrown keeps
/// one bucket in eight free), not counting what keys and values own themselves.
pub fn table<K, V, S>(m: &HashMap<K, V, S>) -> usize {
    let buckets = if m.capacity() == 0 { 0 } else { (m.capacity() * 8 / 7).next_power_of_two() };
    buckets * (size_of::<K>() + size_of::<V>() + 1)
}

/// Bytes a string owns (its buffer, rounded as allocators round).
pub fn text(s: &str) -> usize {
    if s.is_empty() { 0 } else { s.len().next_multiple_of(8) }
}

/// Bytes a parsed JSON value owns (`serde_json` with ordered maps).
pub fn json(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::String(s) => text(s),
        Value::Array(a) => a.capacity() * size_of::<Value>() + a.iter().map(json).sum::<usize>(),
        // An ordered map: its entries vector and an index table of them.
        Value::Object(m) => m.len() * (size_of::<String>() + size_of::<Value>() + 8 + 16) + m.iter().map(|(k, v)| text(k) + json(v)).sum::<usize>(),
        _ => 0,
    }
}
