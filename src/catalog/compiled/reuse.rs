//! What a compile reuses from its predecessor (schemas, unchanged search documents), and
//! the work it splits across threads.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use super::{Catalog, PreparedTool, RandomState, Schema, ToolDeclaration};
use crate::threads::on_threads;

/// Fewer new schemas are prepared on the calling thread.
const PARALLEL_FROM_SCHEMAS: usize = 256;

/// [`Schema::prepare`] of each text, in order; split across threads when there are many.
pub(super) fn prepare_all(texts: &[&str]) -> Vec<Result<Schema, String>> {
    on_threads(texts, PARALLEL_FROM_SCHEMAS, |_, text| Schema::prepare(text))
}

/// Per kept declaration, its reused schema, or the place of its text among the distinct texts
/// to prepare (returned in first-use order). Texts are hashed on several threads first (a
/// large catalog's schemas are most of its bytes); the map of distinct texts then hashes
/// those hashes.
pub(super) fn distinct_fresh<'d>(
    decls: &[(&str, &'d ToolDeclaration)],
    reused: &[Option<&Arc<Schema>>],
) -> (Vec<Result<Arc<Schema>, usize>>, Vec<&'d str>) {
    let state = RandomState::default();
    let hashes = on_threads(decls, PARALLEL_FROM_SCHEMAS, |i, (_, decl)| match reused.get(i).copied().flatten() {
        Some(_) => 0,
        None => state.hash_one(decl.input_schema.as_str()),
    });
    let mut slots = Vec::with_capacity(decls.len());
    let mut fresh: Vec<&str> = Vec::new();
    // Sized up front: growing would move every entry again.
    let mut fresh_at: HashMap<Hashed, usize, RandomState> =
        HashMap::with_capacity_and_hasher(decls.len() - reused.iter().flatten().count(), RandomState::default());
    for (i, ((_, decl), hash)) in decls.iter().zip(hashes).enumerate() {
        slots.push(match reused.get(i).copied().flatten() {
            Some(schema) => Ok(schema.clone()),
            None => Err(*fresh_at.entry(Hashed { hash, text: decl.input_schema.as_str() }).or_insert_with(|| {
                fresh.push(decl.input_schema.as_str());
                fresh.len() - 1
            })),
        });
    }
    (slots, fresh)
}

/// A text with its hash computed beforehand; equal when the texts are.
struct Hashed<'a> {
    hash: u64,
    text: &'a str,
}

impl PartialEq for Hashed<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.text == other.text
    }
}

impl Eq for Hashed<'_> {}

impl Hash for Hashed<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Per kept declaration (source id, declaration), `previous`'s schema when it declared the
/// same text for the same source and tool. Found at the same position when the tools line
/// up (a recompile mostly), else by name; the texts are compared on several threads (most of
/// a recompile's time is reading them).
pub(super) fn reused_schemas<'p>(previous: &'p Catalog, decls: &[(&str, &ToolDeclaration)]) -> Vec<Option<&'p Arc<Schema>>> {
    let same = |schema: &Arc<Schema>, decl: &ToolDeclaration| schema.json.get() == decl.input_schema;
    let at_place = |i: usize, &(source, decl): &(&str, &ToolDeclaration)| match previous.tools.get(i) {
        Some(t) if t.local == decl.name && previous.sources[t.source].id == source => Ok(Some(&t.schema).filter(|s| same(s, decl))),
        _ => Err(()),
    };
    let found = on_threads(decls, PARALLEL_FROM_SCHEMAS, at_place);
    if found.iter().all(Result::is_ok) {
        return found.into_iter().map(|f| f.unwrap_or_default()).collect();
    }
    let by_name: HashMap<(&str, &str), &Arc<Schema>, RandomState> =
        previous.tools.iter().map(|t| ((previous.sources[t.source].id.as_str(), t.local.as_str()), &t.schema)).collect();
    found
        .into_iter()
        .zip(decls)
        .map(|(found, &(source, decl))| found.unwrap_or_else(|()| by_name.get(&(source, decl.name.as_str())).copied().filter(|s| same(s, decl))))
        .collect()
}

/// Per search document of a new version, `previous`'s document with the same searchable
/// text, if any (its index segment can then be kept); and whether every document has the
/// canonical name of `previous`'s document of the same number (its name tables can then be
/// kept: canonical names are injective, so the same one is the same group and local name).
pub(super) fn unchanged_docs(tools: &[PreparedTool], grouped: &[u32], previous: &Catalog) -> (Vec<Option<u32>>, bool) {
    let mut same_names = grouped.len() == previous.grouped.len();
    let mut doc_of_tool: Option<Vec<u32>> = None;
    let was = (0u32..)
        .zip(grouped)
        .map(|(doc, &t)| {
            let tool = &tools[t as usize];
            // Mostly at the same position; else looked up by canonical name.
            let old = match previous.grouped.get(doc as usize) {
                Some(&o) if previous.tools[o as usize].name == tool.name => doc,
                _ => {
                    same_names = false;
                    let o = previous.by_canonical(&tool.name)?;
                    let doc_of_tool = doc_of_tool.get_or_insert_with(|| {
                        let mut inverse = vec![u32::MAX; previous.tools.len()];
                        for (d, &t) in (0u32..).zip(&previous.grouped) {
                            inverse[t as usize] = d;
                        }
                        inverse
                    });
                    doc_of_tool[o as usize]
                }
            };
            previous.doc_tool(old).same_search_text(tool).then_some(old)
        })
        .collect();
    (was, same_names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(name: &str, schema: &str) -> ToolDeclaration {
        ToolDeclaration { name: name.into(), input_schema: schema.into(), ..Default::default() }
    }

    #[test]
    fn each_distinct_new_schema_text_is_prepared_once_in_first_use_order() {
        let a = r#"{"type":"object"}"#;
        let b = r#"{"type":"object","properties":{"x":{"type":"string"}}}"#;
        let decls = [decl("one", b), decl("two", a), decl("three", b), decl("four", a), decl("five", "{}")];
        let decls: Vec<(&str, &ToolDeclaration)> = decls.iter().map(|d| ("src", d)).collect();
        // Enough declarations for the texts to be hashed on several threads too.
        let many: Vec<(&str, &ToolDeclaration)> = decls.iter().cycle().take(5 * PARALLEL_FROM_SCHEMAS).copied().collect();
        for decls in [&decls, &many] {
            let (slots, fresh) = distinct_fresh(decls, &[]);
            assert_eq!(fresh, [b, a, "{}"]);
            let at: Vec<usize> = slots.into_iter().map(|s| s.expect_err("nothing reused")).collect();
            assert_eq!(at, [0, 1, 0, 1, 2].repeat(decls.len() / 5));
        }
    }

    #[test]
    fn texts_with_the_same_hash_stay_distinct() {
        let (a, b) = (Hashed { hash: 7, text: "{}" }, Hashed { hash: 7, text: r#"{"type":"object"}"# });
        assert!(a != b, "equal hashes, different texts");
        assert!(a == Hashed { hash: 7, text: "{}" });
        let mut map: HashMap<Hashed, usize, RandomState> = HashMap::default();
        map.insert(a, 0);
        map.insert(b, 1);
        assert_eq!(map.len(), 2);
    }
}
