//! The discovery answers of SPEC §5: ranking, detail, paging and the byte budget over the
//! exact compact JSON the model receives. The typed Discovery RPCs and the JSON control tools
//! both call these functions.

use serde::Serialize;
use serde_json::value::RawValue;

use crate::call::ModelFault;
use crate::catalog::{Catalog, PreparedTool, Ranking};
use crate::error::Error;
use crate::search::hybrid::{self, Fusion};
use crate::telemetry::Search;

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1_024;
/// Longest summary description, in characters.
pub const SUMMARY_CHARS: usize = 280;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DetailRequest {
    #[default]
    Auto,
    Summary,
    Full,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    Summary,
    Full,
}

impl Detail {
    pub fn as_str(self) -> &'static str {
        match self {
            Detail::Summary => "summary",
            Detail::Full => "full",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct DiscoverRequest {
    pub query: String,
    pub group: Option<String>,
    pub detail: DetailRequest,
    pub limit: Option<u32>,
    pub offset: u32,
}

#[derive(Debug, Clone, Default)]
pub struct ListToolsRequest {
    pub group: Option<String>,
    pub full: bool,
    pub limit: Option<u32>,
    pub offset: u32,
}

/// One page of tools and the JSON object the model receives for it.
#[derive(Debug, Clone)]
pub struct ToolPage {
    pub detail: Detail,
    pub tools: Vec<u32>,
    pub total: u32,
    pub next_offset: Option<u32>,
    pub json: String,
}

#[derive(Debug, Clone)]
pub struct GroupPage {
    /// Indices into `Catalog::groups`.
    pub groups: Vec<usize>,
    pub total: u32,
    pub next_offset: Option<u32>,
    pub json: String,
}

#[derive(Debug, Clone)]
pub struct Described {
    pub tool: u32,
    pub json: String,
}

/// Faults the model can correct; shown to it as error results.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    #[error("unknown group {0:?}")]
    UnknownGroup(String),
    #[error("no tool {tool:?} in group {group:?}")]
    UnknownTool { group: String, tool: String },
    #[error("the full definition of {name} is {size} bytes, over the {budget}-byte budget")]
    TooLarge { name: String, size: usize, budget: usize },
    #[error("{message}")]
    BadArgument { field: &'static str, message: String },
}

impl DiscoveryError {
    /// The fault the model sees through the control tools.
    pub fn fault(&self, catalog: &Catalog) -> ModelFault {
        let message = self.model_message(catalog);
        match self {
            DiscoveryError::UnknownGroup(_) => ModelFault::UnknownGroup { message },
            DiscoveryError::UnknownTool { .. } => ModelFault::UnknownTool { message },
            DiscoveryError::TooLarge { .. } => ModelFault::TooLarge { message },
            DiscoveryError::BadArgument { .. } => ModelFault::invalid_arguments(message),
        }
    }

    /// The error a typed Discovery RPC answers with, carrying the same message.
    pub fn error(&self, catalog: &Catalog) -> Error {
        let message = self.model_message(catalog);
        match self {
            DiscoveryError::UnknownGroup(_) | DiscoveryError::UnknownTool { .. } => Error::NotFound(message),
            DiscoveryError::TooLarge { .. } => Error::FailedPrecondition(message),
            DiscoveryError::BadArgument { field, .. } => Error::invalid(*field, message),
        }
    }

    /// The message written for the model: what was wrong and what to do next.
    pub fn model_message(&self, catalog: &Catalog) -> String {
        let c = &catalog.control;
        match self {
            DiscoveryError::UnknownGroup(g) => {
                format!("There is no tool group {g:?}. Call {} to see the available groups, then retry with one of them.", c.list_groups)
            }
            DiscoveryError::UnknownTool { group, tool } => format!(
                "There is no tool {tool:?} in group {group:?}. Call {} with a short keyword query (and group={group:?}) to find the right tool, or refresh discovery if it was removed.",
                c.discover
            ),
            DiscoveryError::TooLarge { name, size, budget } => format!(
                "The complete definition of {name} is {size} bytes, more than the {budget}-byte response budget, so it cannot be returned in full. Use detail=\"summary\" to list it, call {} for it alone, or ask the operator to expose it directly.",
                c.describe
            ),
            DiscoveryError::BadArgument { message, .. } => message.clone(),
        }
    }
}

#[derive(Serialize)]
struct SummaryEntry<'a> {
    group: &'a str,
    tool: &'a str,
    name: &'a str,
    description: &'a str,
}

#[derive(Serialize)]
struct FullEntry<'a> {
    group: &'a str,
    tool: &'a str,
    name: &'a str,
    description: &'a str,
    parameters_json_schema: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    kind: &'a str,
    requires_approval: bool,
}

/// The first paragraph of a description, at most `SUMMARY_CHARS` characters.
pub fn summary_description(description: &str) -> std::borrow::Cow<'_, str> {
    let text = description.trim();
    let mut end = text.len();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim().is_empty() && offset > 0 {
            end = offset;
            break;
        }
        offset += line.len();
    }
    let para = text[..end].trim_end();
    if para.chars().count() <= SUMMARY_CHARS {
        return para.into();
    }
    let cut: String = para.chars().take(SUMMARY_CHARS - 1).collect();
    format!("{}…", cut.trim_end()).into()
}

/// Source instructions shown with a full entry (when instructions are enabled).
pub fn tool_instructions<'a>(catalog: &'a Catalog, t: &PreparedTool) -> Option<&'a str> {
    let text = catalog.sources[t.source].instructions.as_str();
    (catalog.control.instructions && !text.trim().is_empty()).then_some(text)
}

pub fn entry_json(catalog: &Catalog, i: u32, detail: Detail) -> String {
    let t = catalog.tool(i);
    let group = t.group.as_deref().unwrap_or("");
    let result = match detail {
        Detail::Summary => {
            serde_json::to_string(&SummaryEntry { group, tool: &t.local, name: &t.name, description: &summary_description(&t.description) })
        }
        Detail::Full => serde_json::to_string(&FullEntry {
            group,
            tool: &t.local,
            name: &t.name,
            description: &t.description,
            parameters_json_schema: t.input_schema_json(),
            output_schema: t.output_schema_json.as_deref(),
            instructions: tool_instructions(catalog, t),
            kind: t.kind.as_str(),
            requires_approval: t.requires_approval,
        }),
    };
    result.expect("entries serialize")
}

fn resolve_limit(limit: Option<u32>, default: u32, max: u32) -> Result<u32, DiscoveryError> {
    match limit {
        None => Ok(default.min(max)),
        Some(0) => {
            Err(DiscoveryError::BadArgument { field: "limit", message: format!("limit must be at least 1 (at most {max}); omit it for the default") })
        }
        Some(n) => Ok(n.min(max)),
    }
}

fn check_group<'a>(catalog: &Catalog, group: &'a Option<String>) -> Result<Option<&'a str>, DiscoveryError> {
    match group.as_deref() {
        None | Some("") => Ok(None),
        Some(g) if catalog.group(g).is_some() => Ok(Some(g)),
        Some(g) => Err(DiscoveryError::UnknownGroup(g.to_string())),
    }
}

/// Ranked candidates: the best `k` tool indices, the size of the whole candidate set, and
/// whether that whole set is one exact-name match.
fn rank(catalog: &Catalog, query: &str, group: Option<&str>, k: usize, qv: Option<&[f32]>) -> (Vec<u32>, usize, bool) {
    let natural = catalog.control.ranking == Ranking::Natural && !query.trim().is_empty();
    if !natural {
        let (hits, total) = catalog.index.search_top(query, group, k);
        let single_exact = total == 1 && hits.first().is_some_and(|h| h.exact);
        return (hits.iter().map(|h| catalog.grouped[h.doc as usize]).collect(), total, single_exact);
    }
    rank_natural(catalog, query, group, k, qv)
}

/// The natural-language ranking, with the same exact-name precedence as §5: exact matches
/// first, then the ranker's order. With the query's embedding `qv` and the catalog's, the
/// lexical list is fused with the nearest tools (`search::hybrid`).
fn rank_natural(catalog: &Catalog, query: &str, group: Option<&str>, k: usize, qv: Option<&[f32]>) -> (Vec<u32>, usize, bool) {
    let exact = catalog.exact_matches(query, group);
    let want = k.saturating_add(exact.len());
    let (scored, n_natural) = match (qv, catalog.vectors()) {
        (Some(qv), Some(vectors)) => {
            let fusion = Fusion::default();
            let depth = want.max(fusion.depth);
            let (lexical, n_lexical) = catalog.natural().search(query, group, depth);
            let semantic = vectors.nearest(qv, depth, |d| group.is_none_or(|g| catalog.doc_group(d) == g));
            let only_semantic = semantic.iter().filter(|(d, _)| !lexical.iter().any(|(l, _)| l == d)).count();
            let mut fused = hybrid::fuse(&lexical, &semantic, &fusion);
            fused.truncate(want);
            (fused, n_lexical + only_semantic)
        }
        _ => catalog.natural().search(query, group, want),
    };
    let natural_only = scored.iter().filter(|(d, _)| !exact.contains(d)).count();
    let overlap = scored.len() - natural_only;
    let total = exact.len() + n_natural - overlap;
    let mut docs = exact.clone();
    docs.extend(scored.iter().map(|(d, _)| *d).filter(|d| !exact.contains(d)));
    docs.truncate(k);
    let single_exact = total == 1 && exact.len() == 1;
    (docs.into_iter().map(|d| catalog.grouped[d as usize]).collect(), total, single_exact)
}

/// `discover_tools` (SPEC §5), in a search span.
/// `qv`: the query's embedding, for hybrid natural ranking (`Registry::query_vector`).
pub fn discover(catalog: &Catalog, req: &DiscoverRequest, qv: Option<&[f32]>) -> Result<ToolPage, DiscoveryError> {
    let search = Search::start("discover_tools", crate::search::tokenize::keywords(&req.query).len());
    let page = discover_page(catalog, req, qv);
    if let Ok(p) = &page {
        search.found(p.total, p.tools.len());
    }
    page
}

fn discover_page(catalog: &Catalog, req: &DiscoverRequest, qv: Option<&[f32]>) -> Result<ToolPage, DiscoveryError> {
    if req.query.len() > MAX_QUERY_BYTES {
        return Err(DiscoveryError::BadArgument {
            field: "query",
            message: format!("The query is {} bytes; use at most {MAX_QUERY_BYTES} bytes of short keywords.", req.query.len()),
        });
    }
    let group = check_group(catalog, &req.group)?;
    let max = catalog.control.max_results;
    // The detail decides the default limit, and auto needs the candidate set: rank enough
    // for either.
    let summary_limit = resolve_limit(req.limit, 10, max)?;
    let full_limit = resolve_limit(req.limit, 5, max)?;
    let want = (req.offset as usize).saturating_add(summary_limit.max(full_limit) as usize);
    let (ranked, total, single_exact) = rank(catalog, &req.query, group, want, qv);
    let detail = match req.detail {
        DetailRequest::Summary => Detail::Summary,
        DetailRequest::Full => Detail::Full,
        DetailRequest::Auto if single_exact => Detail::Full,
        DetailRequest::Auto => Detail::Summary,
    };
    let limit = if detail == Detail::Full { full_limit } else { summary_limit };
    let page: Vec<u32> = ranked.into_iter().skip(req.offset as usize).take(limit as usize).collect();
    tool_page(catalog, &page, total, req.offset, detail)
}

/// `list_tools` (SPEC §5): every tool (of a group) by canonical name.
pub fn list_tools(catalog: &Catalog, req: &ListToolsRequest) -> Result<ToolPage, DiscoveryError> {
    let group = check_group(catalog, &req.group)?;
    let detail = if req.full { Detail::Full } else { Detail::Summary };
    let limit = resolve_limit(req.limit, if req.full { 5 } else { 10 }, catalog.control.max_results)?;
    let all: &[u32] = match group {
        Some(g) => &catalog.group(g).expect("checked").tools,
        None => &catalog.grouped_by_name,
    };
    let start = (req.offset as usize).min(all.len());
    let end = start.saturating_add(limit as usize).min(all.len());
    tool_page(catalog, &all[start..end], all.len(), req.offset, detail)
}

/// Fills a page in rank order while the whole response fits the byte budget.
fn tool_page(catalog: &Catalog, ranked: &[u32], total: usize, offset: u32, detail: Detail) -> Result<ToolPage, DiscoveryError> {
    let budget = catalog.control.max_search_bytes as usize;
    let entries: Vec<String> = ranked.iter().map(|&i| entry_json(catalog, i, detail)).collect();
    let n = fit(&entries, budget, |count| tools_envelope(detail, total, next_offset(offset, count, total)));
    if n == 0 && !entries.is_empty() {
        return Err(DiscoveryError::TooLarge { name: catalog.tool(ranked[0]).name.clone(), size: entries[0].len(), budget });
    }
    let next = next_offset(offset, n, total);
    let (head, tail) = tools_envelope(detail, total, next);
    Ok(ToolPage { detail, tools: ranked[..n].to_vec(), total: total as u32, next_offset: next, json: join(&head, &entries[..n], &tail) })
}

fn next_offset(offset: u32, count: usize, total: usize) -> Option<u32> {
    let next = offset as usize + count;
    (next < total).then_some(next as u32)
}

fn tools_envelope(detail: Detail, total: usize, next: Option<u32>) -> (String, String) {
    (format!("{{\"detail\":\"{}\",\"tools\":[", detail.as_str()), format!("],\"total\":{total},\"next_offset\":{}}}", opt_json(next)))
}

fn opt_json(v: Option<u32>) -> String {
    v.map_or_else(|| "null".to_string(), |n| n.to_string())
}

fn join(head: &str, entries: &[String], tail: &str) -> String {
    let mut out = String::with_capacity(head.len() + tail.len() + entries.iter().map(|e| e.len() + 1).sum::<usize>());
    out.push_str(head);
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(e);
    }
    out.push_str(tail);
    out
}

/// How many leading entries fit, given the envelope for each count.
fn fit(entries: &[String], budget: usize, envelope: impl Fn(usize) -> (String, String)) -> usize {
    let mut body = 0;
    for (i, e) in entries.iter().enumerate() {
        body += e.len() + usize::from(i > 0);
        let (head, tail) = envelope(i + 1);
        if head.len() + body + tail.len() > budget {
            return i;
        }
    }
    entries.len()
}

/// `describe_tool` (SPEC §5): `{"tool": <full entry>}` within the budget.
pub fn describe(catalog: &Catalog, group: &str, tool: &str) -> Result<Described, DiscoveryError> {
    if catalog.group(group).is_none() {
        return Err(DiscoveryError::UnknownGroup(group.to_string()));
    }
    let i = catalog.grouped_tool(group, tool).ok_or_else(|| DiscoveryError::UnknownTool { group: group.into(), tool: tool.into() })?;
    let entry = entry_json(catalog, i, Detail::Full);
    let json = format!("{{\"tool\":{entry}}}");
    let budget = catalog.control.max_search_bytes as usize;
    if json.len() > budget {
        return Err(DiscoveryError::TooLarge { name: catalog.tool(i).name.clone(), size: entry.len(), budget });
    }
    Ok(Described { tool: i, json })
}

#[derive(Serialize)]
struct GroupEntry<'a> {
    group: &'a str,
    description: &'a str,
    tool_count: usize,
}

/// `list_tool_groups` (SPEC §5), by group name. The default limit is `max_results`: groups
/// are few and the model usually wants them all.
pub fn list_groups(catalog: &Catalog, limit: Option<u32>, offset: u32) -> Result<GroupPage, DiscoveryError> {
    let max = catalog.control.max_results;
    let limit = resolve_limit(limit, max, max)?;
    let total = catalog.groups.len();
    let start = (offset as usize).min(total);
    let end = start.saturating_add(limit as usize).min(total);
    let entries: Vec<String> = catalog.groups[start..end]
        .iter()
        .map(|g| {
            serde_json::to_string(&GroupEntry { group: &g.name, description: &g.description, tool_count: g.tools.len() }).expect("entries serialize")
        })
        .collect();
    let envelope = |count: usize| {
        ("{\"groups\":[".to_string(), format!("],\"total\":{total},\"next_offset\":{}}}", opt_json(next_offset(offset, count, total))))
    };
    let budget = catalog.control.max_search_bytes as usize;
    let n = fit(&entries, budget, envelope);
    if n == 0 && !entries.is_empty() {
        return Err(DiscoveryError::TooLarge { name: catalog.groups[start].name.clone(), size: entries[0].len(), budget });
    }
    let (head, tail) = envelope(n);
    Ok(GroupPage {
        groups: (start..start + n).collect(),
        total: total as u32,
        next_offset: next_offset(offset, n, total),
        json: join(&head, &entries[..n], &tail),
    })
}

/// Flat profile `tool_search(query, limit)`: full entries of the best matches, within the
/// budget, ranked by the natural-language ranker (exact names first). In a search span.
pub fn tool_search(catalog: &Catalog, query: &str, limit: Option<u32>, qv: Option<&[f32]>) -> Result<ToolPage, DiscoveryError> {
    let search = Search::start("tool_search", crate::search::tokenize::keywords(query).len());
    let page = tool_search_page(catalog, query, limit, qv);
    if let Ok(p) = &page {
        search.found(p.total, p.tools.len());
    }
    page
}

/// The tools `tool_search` finds, best first (the deferred-loading search: the provider loads
/// their definitions itself, so no page is written). In a search span.
pub fn tool_search_hits(catalog: &Catalog, query: &str, limit: Option<u32>, qv: Option<&[f32]>) -> Result<Vec<u32>, DiscoveryError> {
    let search = Search::start("tool_search", crate::search::tokenize::keywords(query).len());
    let (ranked, total) = rank_tool_search(catalog, query, limit, qv)?;
    search.found(total as u32, ranked.len());
    Ok(ranked)
}

fn tool_search_page(catalog: &Catalog, query: &str, limit: Option<u32>, qv: Option<&[f32]>) -> Result<ToolPage, DiscoveryError> {
    let (ranked, total) = rank_tool_search(catalog, query, limit, qv)?;
    tool_page(catalog, &ranked, total, 0, Detail::Full)
}

/// The best `limit` matches of a flat-profile search (exact names first), and how many matched.
fn rank_tool_search(catalog: &Catalog, query: &str, limit: Option<u32>, qv: Option<&[f32]>) -> Result<(Vec<u32>, usize), DiscoveryError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(DiscoveryError::BadArgument {
            field: "query",
            message: format!("The query is {} bytes; use at most {MAX_QUERY_BYTES} bytes.", query.len()),
        });
    }
    let limit = resolve_limit(limit, 5, catalog.control.max_results)?;
    let (ranked, total) = if query.trim().is_empty() {
        let all = &catalog.grouped_by_name;
        (all[..all.len().min(limit as usize)].to_vec(), all.len())
    } else {
        let (ranked, total, _) = rank_natural(catalog, query, None, limit as usize, qv);
        (ranked, total)
    };
    Ok((ranked, total))
}
