//! What a compile reuses from its predecessor (schemas, unchanged search documents), and
//! the work it splits across threads.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Catalog, PreparedTool, RandomState, Schema, ToolDeclaration};
use crate::threads::on_threads;

/// Fewer new schemas are prepared on the calling thread.
const PARALLEL_FROM_SCHEMAS: usize = 256;

/// [`Schema::prepare`] of each text, in order; split across threads when there are many.
pub(super) fn prepare_all(texts: &[&str]) -> Vec<Result<Schema, String>> {
    on_threads(texts, PARALLEL_FROM_SCHEMAS, |_, text| Schema::prepare(text))
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
