//! The compiled form of one immutable version: prepared tools, lookup tables and the search
//! index. Built once per version and cached (SPEC §10); validators compile on first use.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use jsonschema::Validator;
use serde_json::Value;
use serde_json::value::RawValue;

use super::adapt::Adapted;
use super::definition::*;
use super::names::{canonical_name, tool_name_problem};
use super::schema;
use super::validate::MAX_EXPOSED_NAME;
use crate::search::hybrid::Vectors;
use crate::search::keyword::KeywordIndex;
use crate::search::natural::{NaturalConfig, NaturalIndex};
use crate::search::{DocText, SearchDoc, fields};

mod reuse;
use reuse::{distinct_fresh, prepare_all, reused_schemas, unchanged_docs};

/// Randomly seeded per process: schema texts come from tenants and upstream servers.
type RandomState = foldhash::fast::RandomState;

/// A tool after preparation, grouped or direct.
#[derive(Debug)]
pub struct PreparedTool {
    pub group: Option<String>,
    pub local: String,
    /// Canonical name for grouped tools; the local name for direct tools.
    pub name: String,
    pub description: String,
    /// Its input schema, shared by every tool of the version (and of versions compiled from
    /// it) declaring the same schema text.
    schema: Arc<Schema>,
    pub output_schema_json: Option<Box<RawValue>>,
    pub source: usize,
    pub kind: ToolKind,
    pub requires_approval: bool,
    pub idempotent: bool,
    pub codeact_callable: bool,
    pub timeout: Option<Duration>,
    pub pin: bool,
    pub additional_search_text: String,
    /// The catalog's byte count, which lazily built parts add to.
    bytes: Arc<AtomicUsize>,
}

/// One distinct input schema: its compact text and search fields, kept; its parsed value,
/// validator and provider dialects built on first use, once for all tools sharing it.
#[derive(Debug)]
struct Schema {
    /// Compact JSON text, key order kept.
    json: Box<RawValue>,
    /// Property names at any depth, space-separated (`search::fields::schema_fields`); a
    /// `String` (kept to its length), so the keyword index can borrow it as a field.
    property_names: String,
    /// `description` strings inside the schema, newline-separated.
    descriptions: String,
    value: OnceLock<Value>,
    validator: OnceLock<Result<Arc<Validator>, String>>,
    adapted: OnceLock<Arc<Adapted>>,
}

/// `s` as a one-string field, or no string when empty.
#[allow(clippy::ptr_arg)] // the field is a slice of `String`s: this one
fn nonempty(s: &String) -> &[String] {
    if s.is_empty() { &[] } else { std::slice::from_ref(s) }
}

fn fitted(mut s: String) -> String {
    s.shrink_to_fit();
    s
}

/// A compiled validator takes about this many bytes per byte of its schema's text (measured
/// by `tests/catalog_size.rs`; rounded up).
const VALIDATOR_BYTES_PER_SCHEMA_BYTE: usize = 20;

impl Schema {
    /// Parses declared schema text, keeping only its compact form and search fields: read in
    /// one pass of the parser when it can be (no `Value` built), else from the parsed value.
    fn prepare(text: &str) -> Result<Schema, String> {
        let (json, names, descriptions) = match fields::schema_fields_of_text(text) {
            Some((names, descriptions)) => (schema::compact_unique(text), names.join(" "), descriptions.join("\n")),
            None => {
                let value = schema::parse(text)?;
                let (names, descriptions) = fields::schema_fields(&value);
                (schema::compact(text, &value), names.join(" "), descriptions.join("\n"))
            }
        };
        Ok(Schema {
            json,
            property_names: fitted(names),
            descriptions: fitted(descriptions),
            value: OnceLock::new(),
            validator: OnceLock::new(),
            adapted: OnceLock::new(),
        })
    }

    fn heap_bytes(&self) -> usize {
        use crate::mem::text;
        size_of::<Schema>() + text(self.json.get()) + text(&self.property_names) + text(&self.descriptions)
    }
}

impl PreparedTool {
    /// Compact JSON text of the input schema.
    pub fn input_schema_json(&self) -> &RawValue {
        &self.schema.json
    }

    /// The input schema, parsed on first use.
    pub fn input_schema(&self) -> &Value {
        self.schema.value.get_or_init(|| {
            let value: Value = serde_json::from_str(self.schema.json.get()).unwrap_or_else(|_| serde_json::json!({"type": "object"}));
            self.bytes.fetch_add(crate::mem::json(&value), Ordering::Relaxed);
            value
        })
    }

    /// The argument validator, compiled on first use.
    pub fn validator(&self) -> Result<Arc<Validator>, String> {
        self.schema
            .validator
            .get_or_init(|| {
                let built = schema::build(self.input_schema()).map(Arc::new);
                if built.is_ok() {
                    self.bytes.fetch_add(self.schema.json.get().len() * VALIDATOR_BYTES_PER_SCHEMA_BYTE, Ordering::Relaxed);
                }
                built
            })
            .clone()
    }

    /// The input schema in each provider's dialect, adapted on first use.
    pub fn adapted(&self) -> Arc<Adapted> {
        self.schema
            .adapted
            .get_or_init(|| {
                let a = Adapted::of(self.input_schema());
                self.bytes.fetch_add(a.heap_bytes(), Ordering::Relaxed);
                Arc::new(a)
            })
            .clone()
    }

    /// Whether `other` is indexed exactly as this tool is (same [`PreparedTool::search_text`]).
    fn same_search_text(&self, other: &PreparedTool) -> bool {
        self.name == other.name
            && self.local == other.local
            && self.group == other.group
            && self.description == other.description
            && self.additional_search_text == other.additional_search_text
            && (Arc::ptr_eq(&self.schema, &other.schema)
                || (self.schema.property_names == other.schema.property_names && self.schema.descriptions == other.schema.descriptions))
    }

    /// The tool as the search indexes see it (grouped tools), borrowed: one string per
    /// field, which the indexes split at the separators as between strings.
    fn search_text(&self) -> DocText<'_> {
        DocText {
            fields: [
                std::slice::from_ref(&self.local),
                std::slice::from_ref(&self.description),
                self.group.as_slice(),
                nonempty(&self.schema.property_names),
                nonempty(&self.schema.descriptions),
                std::slice::from_ref(&self.additional_search_text),
            ],
            canonical: &self.name,
        }
    }
}

#[derive(Debug, Clone)]
pub struct PreparedSource {
    pub id: String,
    pub instructions: String,
    pub kind: SourceKind,
    pub group: Option<String>,
}

#[derive(Debug, Clone)]
pub struct GroupInfo {
    pub name: String,
    pub description: String,
    /// Tool indices ordered by canonical name.
    pub tools: Vec<u32>,
}

pub struct Catalog {
    pub control: ResolvedControl,
    pub instructions: String,
    /// How long deferred records may stay pending (`None`: no expiry).
    pub deferred_ttl: Option<Duration>,
    pub sources: Vec<PreparedSource>,
    pub tools: Vec<PreparedTool>,
    /// Search document number → tool index.
    pub grouped: Vec<u32>,
    /// Grouped tool indices ordered by canonical name.
    pub grouped_by_name: Vec<u32>,
    /// Ordered by group name.
    pub groups: Vec<GroupInfo>,
    pub direct: Vec<u32>,
    pub pinned: Vec<u32>,
    pub diagnostics: Vec<String>,
    /// Sources whose tools could not be listed this time (set by the registry).
    pub unavailable: Vec<String>,
    pub index: KeywordIndex,
    natural: OnceLock<NaturalIndex>,
    /// The tools' embeddings, set once computed (hybrid search; `registry::embeddings`).
    vectors: OnceLock<Vectors>,
    /// Handed to the embedder and not finished (so it is queued once).
    embedding_queued: AtomicBool,
    /// `heap_bytes`: measured at compile, grown when the natural index or a validator is
    /// built (shared with the tools).
    bytes: Arc<AtomicUsize>,
    group_index: HashMap<String, usize>,
    direct_by_name: HashMap<String, u32>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("tools", &self.tools.len()).finish_non_exhaustive()
    }
}

/// Whether `source` exposes its tool `decl` (an MCP source may allow only some).
fn kept(source: &ToolSource, decl: &ToolDeclaration) -> bool {
    match &source.kind {
        SourceKind::Mcp(m) => m.allowed_tools.is_empty() || m.allowed_tools.contains(&decl.name),
        _ => true,
    }
}

/// Declaration `decl` of source `source` (number `si`, in `group`, listed at preparation or
/// declared) as a tool, or why it is skipped. `schema` is its prepared input schema.
fn draft(
    source: &ToolSource,
    si: usize,
    group: Option<&str>,
    from_listing: bool,
    decl: &ToolDeclaration,
    schema: Result<Arc<Schema>, String>,
    bytes: &Arc<AtomicUsize>,
) -> Result<PreparedTool, String> {
    // Listed tools were not validated at create time: check them here.
    if from_listing && let Some(problem) = tool_name_problem(&decl.name) {
        return Err(problem.to_string());
    }
    let schema = schema.map_err(|e| format!("input schema {e}"))?;
    let output = if decl.output_schema.trim().is_empty() {
        None
    } else {
        schema::parse(&decl.output_schema).ok().map(|v| schema::compact(&decl.output_schema, &v))
    };
    let cfg = source.tool_configs.get(&decl.name);
    let star = source.tool_configs.get("*");
    let pin = cfg.map(|c| c.pin).unwrap_or(false) || star.map(|c| c.pin).unwrap_or(false);
    let mut search_text = String::new();
    for c in [star, cfg].into_iter().flatten() {
        if !c.additional_search_text.is_empty() {
            if !search_text.is_empty() {
                search_text.push(' ');
            }
            search_text.push_str(&c.additional_search_text);
        }
    }
    let (mut approval, mut idempotent, mut codeact) = (decl.requires_approval, decl.idempotent, decl.codeact_callable);
    let mut timeout = decl.timeout;
    match &source.kind {
        SourceKind::Mcp(m) => {
            approval |= matches_list(&m.approval_required, &decl.name);
            idempotent |= matches_list(&m.idempotent_tools, &decl.name);
            codeact |= matches_list(&m.codeact_callable, &decl.name);
            timeout = timeout.or(m.timeout);
        }
        SourceKind::Function(f) => timeout = timeout.or(f.timeout),
        SourceKind::Client(_) => {}
    }
    Ok(PreparedTool {
        group: group.map(str::to_string),
        local: decl.name.clone(),
        name: match group {
            Some(g) => canonical_name(g, &decl.name),
            None => decl.name.clone(),
        },
        description: decl.description.clone(),
        schema,
        output_schema_json: output,
        source: si,
        kind: source.kind.kind(),
        requires_approval: approval,
        idempotent,
        codeact_callable: codeact,
        timeout,
        // Only grouped tools are pinned; the serial pass may unpin a listed one.
        pin: pin && group.is_some(),
        additional_search_text: search_text,
        bytes: bytes.clone(),
    })
}

fn matches_list(list: &[String], tool: &str) -> bool {
    list.iter().any(|n| n == "*" || n == tool)
}

impl Catalog {
    /// Compiles a validated definition. `listed` holds the tools read from executors and MCP
    /// servers at preparation, by source id; declared tools are used for the other sources.
    pub fn compile(def: &AgentDefinition, listed: &BTreeMap<String, Vec<ToolDeclaration>>) -> Catalog {
        Self::compile_from(def, listed, None)
    }

    /// [`Catalog::compile`], reusing what `previous` (an earlier version of the same agent)
    /// already prepared for tools declared the same way.
    pub fn compile_from(def: &AgentDefinition, listed: &BTreeMap<String, Vec<ToolDeclaration>>, previous: Option<&Catalog>) -> Catalog {
        // Kept declarations in order, and the number of each one's source.
        let (mut decls, mut source_of): (Vec<(&str, &ToolDeclaration)>, Vec<usize>) = (Vec::new(), Vec::new());
        for (si, source) in def.sources.iter().enumerate() {
            let declared = listed.get(&source.id).map(|v| v.as_slice()).unwrap_or(source.kind.declared_tools());
            for decl in declared.iter().filter(|decl| kept(source, decl)) {
                decls.push((source.id.as_str(), decl));
                source_of.push(si);
            }
        }
        // Each kept declaration's schema, in declaration order: its predecessor's when the same
        // source and tool declare the same text again, else one of the distinct new texts, each
        // parsed and compacted once, up front on several threads (most of a compile).
        let reused = previous.map(|p| reused_schemas(p, &decls)).unwrap_or_default();
        let (slots, fresh) = distinct_fresh(&decls, &reused);
        drop(reused);
        let prepared: Vec<Result<Arc<Schema>, String>> = prepare_all(&fresh).into_iter().map(|p| p.map(Arc::new)).collect();
        let control = def.control.resolve();
        let mut group_of: HashMap<&str, &str> = HashMap::new();
        for (g, group) in &def.groups {
            for id in &group.source_ids {
                group_of.insert(id.as_str(), g.as_str());
            }
        }
        // Per source: its group, and whether its tools were listed at preparation.
        let group_names: Vec<Option<&str>> = def.sources.iter().map(|s| group_of.get(s.id.as_str()).copied()).collect();
        let from_listing: Vec<bool> = def.sources.iter().map(|s| listed.contains_key(&s.id)).collect();
        let bytes = Arc::new(AtomicUsize::new(0));
        let mut diagnostics = Vec::new();
        let sources: Vec<PreparedSource> = def
            .sources
            .iter()
            .zip(&group_names)
            .map(|(source, group)| PreparedSource {
                id: source.id.clone(),
                instructions: source.instructions.clone(),
                // Its tools are the prepared ones: the declarations are not kept twice.
                kind: source.kind.without_tools(),
                group: group.map(str::to_string),
            })
            .collect();
        let mut tools: Vec<PreparedTool> = Vec::with_capacity(decls.len());
        // Names taken so far, borrowed from the definition: (group, local name) stands for the
        // canonical name, which is injective (group names cannot contain `__`).
        let mut seen_grouped: HashSet<(&str, &str), RandomState> = HashSet::default();
        let mut seen_direct: HashSet<&str, RandomState> = HashSet::default();
        // Exposed names (SPEC §3) validation checked for declared tools; listed tools must
        // not take one of them, nor one another listed tool took first (gathered only when a
        // source is listed: a pass over every tool).
        let mut exposed = if from_listing.contains(&true) { declared_exposed_names(def, listed, &group_of, &control) } else { HashSet::new() };
        for ((&si, &(source_id, decl)), slot) in source_of.iter().zip(&decls).zip(slots) {
            let source = &def.sources[si];
            let schema = slot.or_else(|at| prepared[at].clone());
            // All but the choices that depend on the tools before it (names taken, exposed).
            let mut tool = match draft(source, si, group_names[si], from_listing[si], decl, schema, &bytes) {
                Ok(tool) => tool,
                Err(skipped) => {
                    diagnostics.push(format!("source {source_id:?}: tool {:?} skipped: {skipped}", decl.name));
                    continue;
                }
            };
            let fresh = match group_names[si] {
                Some(g) => seen_grouped.insert((g, decl.name.as_str())),
                None => seen_direct.insert(decl.name.as_str()),
            };
            if !fresh {
                diagnostics.push(match &tool.group {
                    Some(g) => format!("source {source_id:?}: tool {:?} skipped: local name already used in group {g:?}", decl.name),
                    None => format!("source {source_id:?}: tool {:?} skipped: direct name already used", decl.name),
                });
                continue;
            }
            if from_listing[si] {
                let taken = exposed.contains(&tool.name);
                if tool.group.is_none() && taken {
                    diagnostics.push(format!("source {source_id:?}: tool {:?} skipped: its name is already exposed to the model", decl.name));
                    continue;
                }
                if tool.group.is_some() && tool.pin && (taken || tool.name.len() > MAX_EXPOSED_NAME) {
                    diagnostics.push(format!(
                        "source {source_id:?}: tool {:?} not pinned: its canonical name {:?} is already exposed or longer than {MAX_EXPOSED_NAME} characters",
                        decl.name, tool.name
                    ));
                    tool.pin = false;
                }
                if tool.group.is_none() || tool.pin {
                    exposed.insert(tool.name.clone());
                }
            }
            tools.push(tool);
        }
        drop((decls, prepared));

        let mut grouped = Vec::new();
        let mut direct = Vec::new();
        let mut pinned = Vec::new();
        let mut direct_by_name = HashMap::new();
        for (i, t) in tools.iter().enumerate() {
            let i = i as u32;
            match &t.group {
                Some(_) => {
                    grouped.push(i);
                    if t.pin {
                        pinned.push(i);
                    }
                }
                None => {
                    direct.push(i);
                    direct_by_name.insert(t.name.clone(), i);
                }
            }
        }
        // Unchanged documents (by searchable text) and whether every grouped tool kept its
        // canonical name at its place.
        let unchanged = previous.map(|previous| unchanged_docs(&tools, &grouped, previous));
        // The same names for the same tool indices: the same order, and the same members of
        // each group that is still there.
        let same_order = match (previous, &unchanged) {
            (Some(previous), Some((_, true))) if previous.grouped == grouped => Some(previous),
            _ => None,
        };
        let docs: Vec<DocText> = grouped.iter().map(|&t| tools[t as usize].search_text()).collect();
        let index = match (previous, unchanged) {
            (Some(previous), Some((was, same_names))) => KeywordIndex::update(&docs, &previous.index, &was, same_names),
            _ => KeywordIndex::build(&docs),
        };
        drop(docs);
        let grouped_by_name = match same_order {
            Some(previous) => previous.grouped_by_name.clone(),
            // The index sorted its documents (the grouped tools, in order) by canonical name.
            None => index.by_canonical().iter().map(|&doc| grouped[doc as usize]).collect(),
        };
        let mut groups: Vec<GroupInfo> =
            def.groups.iter().map(|(name, g)| GroupInfo { name: name.clone(), description: g.description.clone(), tools: Vec::new() }).collect();
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        let group_index: HashMap<String, usize> = groups.iter().enumerate().map(|(i, g)| (g.name.clone(), i)).collect();
        match same_order {
            Some(previous) => {
                for group in &mut groups {
                    group.tools = previous.group(&group.name).map(|g| g.tools.clone()).unwrap_or_default();
                }
            }
            None => {
                for &t in &grouped_by_name {
                    if let Some(g) = &tools[t as usize].group {
                        groups[group_index[g]].tools.push(t);
                    }
                }
            }
        }
        let catalog = Catalog {
            control,
            instructions: def.instructions.clone(),
            deferred_ttl: def.deferred_ttl,
            sources,
            tools,
            grouped,
            grouped_by_name,
            groups,
            direct,
            pinned,
            diagnostics,
            unavailable: Vec::new(),
            index,
            natural: OnceLock::new(),
            vectors: OnceLock::new(),
            embedding_queued: AtomicBool::new(false),
            bytes,
            group_index,
            direct_by_name,
        };
        catalog.bytes.store(catalog.measure(), Ordering::Relaxed);
        catalog
    }

    pub fn tool(&self, i: u32) -> &PreparedTool {
        &self.tools[i as usize]
    }

    pub fn group(&self, name: &str) -> Option<&GroupInfo> {
        self.group_index.get(name).map(|&i| &self.groups[i])
    }

    /// A grouped tool by group and local name (through the canonical name, which is
    /// injective because group names cannot contain `__`).
    pub fn grouped_tool(&self, group: &str, local: &str) -> Option<u32> {
        self.group(group)?;
        self.by_canonical(&canonical_name(group, local))
    }

    pub fn by_canonical(&self, name: &str) -> Option<u32> {
        let at = self.grouped_by_name.binary_search_by(|&t| self.tools[t as usize].name.as_str().cmp(name)).ok()?;
        Some(self.grouped_by_name[at])
    }

    pub fn direct_tool(&self, name: &str) -> Option<u32> {
        self.direct_by_name.get(name).copied()
    }

    /// Does the catalog have MCP sources (whose tools can change upstream)?
    pub fn has_mcp_sources(&self) -> bool {
        self.sources.iter().any(|s| matches!(s.kind, SourceKind::Mcp(_)))
    }

    /// Whether the model sees control tools: at least one grouped tool survived preparation,
    /// or a grouped source is only unavailable for now (its tools come back once it answers;
    /// the tool list does not shrink meanwhile).
    pub fn has_grouped(&self) -> bool {
        !self.grouped.is_empty() || self.sources.iter().any(|s| s.group.is_some() && self.unavailable.contains(&s.id))
    }

    /// Search documents whose local or canonical name equals the query (trimmed,
    /// case-insensitive), within `group` if given, by canonical name.
    pub fn exact_matches(&self, query: &str, group: Option<&str>) -> Vec<u32> {
        let mut docs: Vec<u32> = self.index.exact_docs(query).iter().copied().filter(|&d| group.is_none_or(|g| self.doc_group(d) == g)).collect();
        docs.sort_unstable_by(|&a, &b| self.doc_tool(a).name.cmp(&self.doc_tool(b).name));
        docs
    }

    /// The grouped tool of search document `doc`.
    pub fn doc_tool(&self, doc: u32) -> &PreparedTool {
        self.tool(self.grouped[doc as usize])
    }

    /// The group of search document `doc`.
    pub fn doc_group(&self, doc: u32) -> &str {
        self.doc_tool(doc).group.as_deref().unwrap_or_default()
    }

    /// The search documents, one per grouped tool in `grouped` order, made on demand (the
    /// catalog keeps their text once, in its tools).
    pub fn search_docs(&self) -> Vec<SearchDoc> {
        self.grouped.iter().map(|&t| self.tool(t).search_text().to_doc()).collect()
    }

    /// The natural-language index, built on first use (its bytes then count in
    /// [`Catalog::heap_bytes`]).
    pub fn natural(&self) -> &NaturalIndex {
        self.natural.get_or_init(|| {
            let index = NaturalIndex::build(&self.search_docs(), &NaturalConfig::default());
            self.bytes.fetch_add(index.heap_bytes(), Ordering::Relaxed);
            index
        })
    }

    /// The tools' embeddings (in search-document order), once all are computed.
    pub fn vectors(&self) -> Option<&Vectors> {
        self.vectors.get()
    }

    /// Sets the embeddings (once; later calls are ignored). Their bytes count in
    /// [`Catalog::heap_bytes`].
    pub fn set_vectors(&self, vectors: Vectors) {
        assert_eq!(vectors.len(), self.grouped.len(), "one embedding per search document");
        let bytes = vectors.heap_bytes();
        if self.vectors.set(vectors).is_ok() {
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Marks the catalog queued for embedding; false if it already was.
    pub fn queue_embedding(&self) -> bool {
        !self.embedding_queued.swap(true, Ordering::AcqRel)
    }

    /// Lets it be queued again (its embedding failed or was dropped).
    pub fn unqueue_embedding(&self) {
        self.embedding_queued.store(false, Ordering::Release);
    }

    /// Approximate bytes the catalog owns, its lazily built parts once built: what the
    /// compiled-catalog cache charges for it.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// What compiling owned, measured once at the end of `compile`.
    fn measure(&self) -> usize {
        use crate::mem::{table, text, vec};
        let tool = |t: &PreparedTool| {
            size_of::<PreparedTool>()
                + t.group.as_deref().map_or(0, text)
                + text(&t.local)
                + text(&t.name)
                + text(&t.description)
                + t.output_schema_json.as_deref().map_or(0, |o| text(o.get()))
                + text(&t.additional_search_text)
        };
        // Shared schemas count once (and in each version that shares them), with the
        // reference counts of their `Arc`.
        let mut seen = std::collections::HashSet::new();
        let schemas: usize =
            self.tools.iter().filter(|t| seen.insert(Arc::as_ptr(&t.schema))).map(|t| 2 * size_of::<usize>() + t.schema.heap_bytes()).sum();
        let names = |m: &HashMap<String, u32>| table(m) + m.keys().map(|k| text(k)).sum::<usize>();
        size_of::<Catalog>()
            + self.tools.iter().map(tool).sum::<usize>()
            + schemas
            + self.sources.iter().map(|s| size_of::<PreparedSource>() + text(&s.id) + text(&s.instructions)).sum::<usize>()
            + vec(&self.grouped, self.grouped.capacity())
            + vec(&self.grouped_by_name, self.grouped_by_name.capacity())
            + self
                .groups
                .iter()
                .map(|g| size_of::<GroupInfo>() + text(&g.name) + text(&g.description) + vec(&g.tools, g.tools.capacity()))
                .sum::<usize>()
            + vec(&self.direct, self.direct.capacity())
            + vec(&self.pinned, self.pinned.capacity())
            + self.diagnostics.iter().map(|d| text(d)).sum::<usize>()
            + self.index.heap_bytes()
            + table(&self.group_index)
            + names(&self.direct_by_name)
    }
}

/// The control tool names and the names of declared direct and pinned tools (the sources
/// whose tools are not listed at preparation), all checked by validation.
fn declared_exposed_names(
    def: &AgentDefinition,
    listed: &BTreeMap<String, Vec<ToolDeclaration>>,
    group_of: &HashMap<&str, &str>,
    control: &ResolvedControl,
) -> HashSet<String> {
    let mut names: HashSet<String> = control.exposed_names().into_iter().map(String::from).collect();
    for source in def.sources.iter().filter(|s| !listed.contains_key(&s.id)) {
        let pinned = |tool: &str| [tool, "*"].iter().any(|k| source.tool_configs.get(*k).is_some_and(|c| c.pin));
        for decl in source.kind.declared_tools() {
            match group_of.get(source.id.as_str()) {
                None => {
                    names.insert(decl.name.clone());
                }
                Some(g) if pinned(&decl.name) => {
                    names.insert(canonical_name(g, &decl.name));
                }
                Some(_) => {}
            }
        }
    }
    names
}

#[cfg(test)]
mod tests;
