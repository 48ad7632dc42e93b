//! The compiled-catalog cache is bounded in bytes by each catalog's own estimate of what it
//! owns (`Catalog::heap_bytes`): here that estimate is checked against what a counting
//! allocator saw the compile (and the lazily built natural index) keep.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicIsize, Ordering};

use serde_json::json;
use toolrouter::catalog::{AgentDefinition, Catalog, ClientSource, SourceKind, ToolDeclaration, ToolGroup, ToolSource};

/// The system allocator, counting the net bytes all threads hold (a compile prepares schemas
/// on several). The tests here take `SERIAL`, so one measures at a time.
struct Counting;

static NET: AtomicIsize = AtomicIsize::new(0);
static SERIAL: Mutex<()> = Mutex::new(());

fn count(delta: isize) {
    NET.fetch_add(delta, Ordering::Relaxed);
}

// SAFETY: every call is passed on to the system allocator unchanged; only an atomic counter
// is added to, which allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Net bytes `f` left allocated, and its result.
fn kept<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = NET.load(Ordering::Relaxed);
    let out = f();
    (out, (NET.load(Ordering::Relaxed) - before).max(0) as usize)
}

/// `n` tools in `groups` groups, with descriptions and nested schemas of realistic sizes.
fn definition(n: usize, groups: usize) -> AgentDefinition {
    let words = ["customer", "invoice", "refund", "payment", "order", "shipment", "address", "ticket", "account", "subscription"];
    let mut sources = Vec::new();
    let mut group_map = BTreeMap::new();
    for g in 0..groups {
        let tools = (0..n / groups)
            .map(|i| {
                let w = |k: usize| words[(i * 7 + g * 3 + k) % words.len()];
                // Distinct per tool (the catalog shares identical schemas).
                let schema = json!({
                    "type": "object",
                    "description": format!("Input of tool {i} of group {g}."),
                    "properties": {
                        format!("{}_id", w(0)): {"type": "integer", "description": format!("The {} to look up, as a numeric id.", w(0))},
                        "filter": {"type": "object", "properties": {
                            "status": {"type": "string", "enum": ["open", "closed", "pending"], "description": format!("Only {} in this status.", w(1))},
                            "since": {"type": "string", "format": "date-time"}
                        }},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100}
                    },
                    "required": [format!("{}_id", w(0))]
                });
                ToolDeclaration {
                    name: format!("{}_{}_{i}", w(0), w(2)),
                    description: format!(
                        "Looks up the {} of a {} and returns its {} with the related {}. Use it when the user asks about a {} by its id; it never changes anything.",
                        w(1), w(0), w(2), w(3), w(0)
                    ),
                    input_schema: schema.to_string(),
                    ..Default::default()
                }
            })
            .collect();
        let id = format!("source-{g}");
        sources.push(ToolSource { id: id.clone(), kind: SourceKind::Client(ClientSource { tools }), ..Default::default() });
        group_map.insert(format!("group{g}"), ToolGroup { description: format!("Tools of group {g}."), source_ids: vec![id] });
    }
    AgentDefinition { sources, groups: group_map, ..Default::default() }
}

#[test]
fn a_catalogs_own_estimate_of_its_bytes_is_close_to_what_the_allocator_saw() {
    let _serial = SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for (n, groups) in [(200, 4), (3_000, 20)] {
        let def = definition(n, groups);
        let (catalog, compiled) = kept(|| Catalog::compile(&def, &BTreeMap::new()));
        let estimate = catalog.heap_bytes();
        let ratio = estimate as f64 / compiled as f64;
        eprintln!("{n} tools: estimate {estimate} B, allocator {compiled} B (ratio {ratio:.2})");
        assert!((0.8..=1.6).contains(&ratio), "{n} tools: estimate {estimate} B against {compiled} B kept");

        let (_, natural) = kept(|| {
            catalog.natural();
        });
        let grown = catalog.heap_bytes() - estimate;
        let ratio = grown as f64 / natural as f64;
        eprintln!("{n} tools: natural index estimate {grown} B, allocator {natural} B (ratio {ratio:.2})");
        assert!((0.8..=1.6).contains(&ratio), "{n} tools: natural index estimate {grown} B against {natural} B kept");
    }
}

#[test]
fn a_validator_built_on_first_use_adds_about_its_bytes_to_the_estimate() {
    let _serial = SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let def = definition(1_000, 10);
    let catalog = Catalog::compile(&def, &BTreeMap::new());
    let before = catalog.heap_bytes();
    let (_, built) = kept(|| {
        for t in &catalog.tools {
            t.validator().expect("a valid schema");
        }
    });
    let grown = catalog.heap_bytes() - before;
    let ratio = grown as f64 / built as f64;
    eprintln!("validators: estimate {grown} B, allocator {built} B (ratio {ratio:.2})");
    assert!((0.9..=1.6).contains(&ratio), "validators: estimate {grown} B against {built} B kept");
}
