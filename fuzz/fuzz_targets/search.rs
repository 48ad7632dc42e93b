//! Query tokenizer and discovery (SPEC §5).
//!
//! Input: 4 option bytes, then UTF-8 text (lossy). Byte 0: catalog (bits 0–1: keyword with a
//! 1 KiB budget, keyword, natural, flat), `detail` (bits 2–3: absent, auto, summary, full) and
//! operation (bits 4–5: discover, list_tools, list_tool_groups, describe); byte 1: group (mod
//! 11, see `GROUPS`); bytes 2 and 3: `limit` and `offset` (space or NUL: absent or 0, a digit:
//! its value, 255: beyond u32, else the byte). The text up to the first NUL is the query;
//! after it, each line `group<TAB>name<TAB>description<TAB>prop,prop<TAB>desc|desc<TAB>extra`
//! is a search document of an ad-hoc catalog.
//!
//! - The query goes through the control tools of a fixed catalog (keyword ranking with the
//!   smallest byte budget, keyword with the defaults, natural ranking, flat `tool_search`)
//!   and each page must equal the one restated here from SPEC §5: candidates ranked like
//!   `naive_search` (or exact names then the natural ranker), `limit`/`offset`, the byte
//!   budget filled in rank order, `total`, `next_offset`, and `detail=auto`.
//! - Over the ad-hoc documents the keyword index must agree with `naive_search`, and the
//!   natural ranker must keep exact names first, order by score, and give the same ranking
//!   whatever `k` is asked for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};
use toolrouter::catalog::names::canonical_name;
use toolrouter::catalog::{Catalog, Profile, Ranking};
use toolrouter::control::discovery::{Detail, MAX_QUERY_BYTES, SUMMARY_CHARS, entry_json};
use toolrouter::control::{answer_discovery, parse_control_call};
use toolrouter::search::keyword::KeywordIndex;
use toolrouter::search::naive::naive_search;
use toolrouter::search::natural::{NaturalConfig, NaturalIndex};
use toolrouter::search::tokenize::{keywords, tokens};
use toolrouter::search::{Hit, SearchDoc};
use toolrouter_fuzz::{content_object, error_code, search_catalogs};

/// Group arguments tried: absent, empty (= all), each group, wrong case, unknown.
const GROUPS: &[Option<&str>] = &[
    None,
    Some(""),
    Some("crm"),
    Some("billing"),
    Some("my_tools"),
    Some("a_"),
    Some("a_u"),
    Some("a"),
    Some("knowledge"),
    Some("CRM"),
    Some("nope"),
];

fuzz_target!(|data: &[u8]| {
    let mut header = [0u8; 4];
    let split = data.len().min(4);
    header[..split].copy_from_slice(&data[..split]);
    let text = String::from_utf8_lossy(&data[split..]);
    let (query, docs_text) = text.split_once('\0').unwrap_or((&text, ""));

    check_tokens(query);
    let catalog = &search_catalogs()[usize::from(header[0] & 3)];
    let options = Options::from_header(header);
    match (catalog.control.profile, header[0] >> 4 & 3) {
        (Profile::Flat, _) => check_tool_search(catalog, query, &options),
        (_, 0) => check_discover(catalog, query, &options),
        (_, 1) => check_list_tools(catalog, &options),
        (_, 2) => check_list_groups(catalog, &options),
        _ => check_describe(catalog, query, &options),
    }
    if !docs_text.is_empty() {
        check_ad_hoc_catalog(query, docs_text);
    }
});

struct Options {
    group: Option<&'static str>,
    detail: Option<&'static str>,
    /// The JSON value sent as `limit`.
    limit: Option<u64>,
    offset: u64,
}

impl Options {
    fn from_header(h: [u8; 4]) -> Options {
        Options {
            detail: [None, Some("auto"), Some("summary"), Some("full")][usize::from(h[0] >> 2 & 3)],
            group: GROUPS[usize::from(h[1]) % GROUPS.len()],
            limit: match h[2] {
                0 | b' ' => None,
                b'0'..=b'9' => Some(u64::from(h[2] - b'0')),
                255 => Some(1 << 40),
                n => Some(u64::from(n)),
            },
            offset: match h[3] {
                0 | b' ' => 0,
                b'0'..=b'9' => u64::from(h[3] - b'0'),
                255 => u64::from(u32::MAX) + 5,
                n => u64::from(n),
            },
        }
    }

    fn arguments(&self, query: Option<&str>, with: &[&str]) -> Value {
        let mut args = Map::new();
        if let Some(q) = query {
            args.insert("query".into(), q.into());
        }
        if with.contains(&"group") {
            if let Some(g) = self.group {
                args.insert("group".into(), g.into());
            }
        }
        if with.contains(&"detail") {
            if let Some(d) = self.detail {
                args.insert("detail".into(), d.into());
            }
        }
        if let Some(l) = self.limit {
            args.insert("limit".into(), l.into());
        }
        if with.contains(&"offset") {
            args.insert("offset".into(), self.offset.into());
        }
        Value::Object(args)
    }

    /// The offset as the control tools read it (clamped to u32).
    fn offset(&self) -> usize {
        self.offset.min(u64::from(u32::MAX)) as usize
    }

    /// The page size: the default for the detail, at most `max`; `None` for `limit=0`.
    fn limit(&self, default: u32, max: u32) -> Option<usize> {
        match self.limit {
            None => Some(default.min(max) as usize),
            Some(0) => None,
            Some(n) => Some(n.min(u64::from(max)) as usize),
        }
    }

    /// The group filter: `Ok(None)` for all groups, `Err` for an unknown group.
    fn group_filter(&self, catalog: &Catalog) -> Result<Option<&'static str>, ()> {
        match self.group {
            None | Some("") => Ok(None),
            Some(g) if catalog.group(g).is_some() => Ok(Some(g)),
            Some(_) => Err(()),
        }
    }
}

/// Tokens are non-empty and alphanumeric, keywords are the tokens without repeats in order,
/// and ASCII text splits the same on the fast path as on the general one.
fn check_tokens(text: &str) {
    let all = tokens(text);
    for t in &all {
        assert!(!t.is_empty() && t.chars().all(char::is_alphanumeric), "token {t:?} of {text:?}");
    }
    let mut dedup: Vec<String> = Vec::new();
    for t in &all {
        if !dedup.contains(t) {
            dedup.push(t.clone());
        }
    }
    assert_eq!(keywords(text), dedup, "keywords of {text:?}");
    if text.is_ascii() {
        let mut general = tokens(&format!("{text} é"));
        assert_eq!(general.pop().as_deref(), Some("é"));
        assert_eq!(all, general, "ASCII fast path of {text:?}");
    }
}

/// Calls a control tool as the model would and returns its parsed content, or the error code.
fn call(catalog: &Catalog, tool: &str, args: &Value) -> Result<String, String> {
    let parsed = parse_control_call(catalog, tool, args).expect("a control tool of this catalog");
    let result = match parsed {
        Ok(call) => answer_discovery(catalog, &call, None).expect("a discovery call").render(),
        Err(message) => return Err(format!("parse: {message}")),
    };
    if result.is_error {
        Err(error_code(&result.content_json))
    } else {
        content_object(&result.content_json);
        Ok(result.content_json)
    }
}

/// The SPEC §5 answer for ranked candidates: entries from `offset` in rank order while the
/// whole response fits the budget; `Err(first)` when the first entry cannot fit alone.
fn expected_page(catalog: &Catalog, ranked: &[u32], offset: usize, limit: usize, detail: Detail) -> Result<String, u32> {
    let page: Vec<u32> = ranked.iter().skip(offset).take(limit).copied().collect();
    let entries: Vec<String> = page.iter().map(|&i| checked_entry(catalog, i, detail)).collect();
    let total = ranked.len();
    let response = |n: usize| {
        let next = offset + n;
        let next = if next < total { next.to_string() } else { "null".into() };
        format!("{{\"detail\":\"{}\",\"tools\":[{}],\"total\":{total},\"next_offset\":{next}}}", detail.as_str(), entries[..n].join(","))
    };
    let budget = catalog.control.max_search_bytes as usize;
    let fits = (0..entries.len()).find(|&n| response(n + 1).len() > budget).unwrap_or(entries.len());
    if fits == 0 && !entries.is_empty() {
        return Err(page[0]);
    }
    let json = response(fits);
    assert!(json.len() <= budget);
    Ok(json)
}

/// A tool's entry, checked against the tool: summaries carry the first paragraph cut to
/// 280 characters and no schema; full entries the whole description and the schema.
fn checked_entry(catalog: &Catalog, i: u32, detail: Detail) -> String {
    let t = catalog.tool(i);
    let json = entry_json(catalog, i, detail);
    let entry = content_object(&json);
    assert_eq!(entry["group"], t.group.as_deref().unwrap_or(""));
    assert_eq!(entry["tool"], t.local.as_str());
    assert_eq!(entry["name"], t.name.as_str());
    let description = entry["description"].as_str().expect("a description");
    match detail {
        Detail::Summary => {
            assert_eq!(entry.len(), 4, "summary entry {json}");
            assert!(description.chars().count() <= SUMMARY_CHARS, "{description:?}");
            assert!(!description.lines().skip(1).any(|l| l.trim().is_empty()), "two paragraphs: {description:?}");
            let kept = description.strip_suffix('…').unwrap_or(description);
            assert!(t.description.trim().starts_with(kept), "{description:?} of {:?}", t.description);
        }
        Detail::Full => {
            assert_eq!(description, t.description);
            assert_eq!(&entry["parameters_json_schema"], t.input_schema());
        }
    }
    json
}

/// Compares a control tool's answer with the expected page or error.
fn assert_page(got: Result<String, String>, want: Result<String, u32>, catalog: &Catalog, what: &str) {
    match (got, want) {
        (Ok(got), Ok(want)) => assert_eq!(got, want, "{what}"),
        (Err(code), Err(first)) => {
            assert_eq!(code, "too_large", "{what}: first entry {}", catalog.tool(first).name)
        }
        (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
    }
}

/// Keyword ranking restated: `naive_search` over the catalog's documents.
fn keyword_ranking(catalog: &Catalog, query: &str, group: Option<&str>) -> (Vec<u32>, bool) {
    let hits: Vec<Hit> = naive_search(&catalog.search_docs(), query, group);
    let single_exact = hits.len() == 1 && hits[0].exact;
    (hits.iter().map(|h| catalog.grouped[h.doc as usize]).collect(), single_exact)
}

/// Natural ranking restated: exact names (by canonical name), then the ranker's order.
fn natural_ranking(catalog: &Catalog, query: &str, group: Option<&str>) -> (Vec<u32>, bool) {
    let exact = catalog.exact_matches(query, group);
    let (scored, total) = catalog.natural().search(query, group, usize::MAX);
    assert_eq!(scored.len(), total);
    check_natural_order(&scored, &exact, query);
    for k in [0, 1, 2, 5] {
        let (top, n) = catalog.natural().search(query, group, k);
        assert_eq!(n, total);
        assert_eq!(top[..], scored[..k.min(total)], "top {k} of {query:?}");
    }
    let mut docs = exact.clone();
    docs.extend(scored.iter().map(|&(d, _)| d).filter(|d| !exact.contains(d)));
    let single_exact = docs.len() == 1 && exact.len() == 1;
    (docs.into_iter().map(|d| catalog.grouped[d as usize]).collect(), single_exact)
}

/// Exact matches first, then scores descending (finite), each document once.
fn check_natural_order(scored: &[(u32, f32)], exact: &[u32], query: &str) {
    let mut seen = std::collections::HashSet::new();
    for &(d, s) in scored {
        assert!(seen.insert(d), "doc {d} twice for {query:?}");
        assert!(s.is_finite() && s >= 0.0, "score {s} for {query:?}");
    }
    let leading = scored.iter().take_while(|(d, _)| exact.contains(d)).count();
    assert!(scored[leading..].iter().all(|(d, _)| !exact.contains(d)), "exact match after others for {query:?}");
    for pair in scored[leading..].windows(2) {
        assert!(pair[0].1 >= pair[1].1, "scores out of order for {query:?}: {pair:?}");
    }
}

fn check_discover(catalog: &Catalog, query: &str, o: &Options) {
    let c = &catalog.control;
    let got = call(catalog, &c.discover, &o.arguments(Some(query), &["group", "detail", "offset"]));
    let what = format!("discover {query:?} group={:?} detail={:?} limit={:?} offset={}", o.group, o.detail, o.limit, o.offset);
    if query.len() > MAX_QUERY_BYTES {
        assert_eq!(got, Err("invalid_arguments".into()), "{what}");
        return;
    }
    let Ok(group) = o.group_filter(catalog) else {
        assert_eq!(got, Err("unknown_group".into()), "{what}");
        return;
    };
    let (Some(summary_limit), Some(full_limit)) = (o.limit(10, c.max_results), o.limit(5, c.max_results)) else {
        assert_eq!(got, Err("invalid_arguments".into()), "{what}");
        return;
    };
    let natural = c.ranking == Ranking::Natural && !query.trim().is_empty();
    let (ranked, single_exact) = if natural { natural_ranking(catalog, query, group) } else { keyword_ranking(catalog, query, group) };
    let detail = match o.detail {
        Some("summary") => Detail::Summary,
        Some("full") => Detail::Full,
        _ if single_exact => Detail::Full,
        _ => Detail::Summary,
    };
    let limit = if detail == Detail::Full { full_limit } else { summary_limit };
    assert_page(got, expected_page(catalog, &ranked, o.offset(), limit, detail), catalog, &what);
}

fn check_list_tools(catalog: &Catalog, o: &Options) {
    let c = &catalog.control;
    let got = call(catalog, &c.list_tools, &o.arguments(None, &["group", "detail", "offset"]));
    let what = format!("list_tools group={:?} detail={:?} limit={:?} offset={}", o.group, o.detail, o.limit, o.offset);
    if o.detail == Some("auto") {
        assert!(got.as_ref().is_err_and(|e| e.starts_with("parse:")), "{what}: {got:?}");
        return;
    }
    let Ok(group) = o.group_filter(catalog) else {
        assert_eq!(got, Err("unknown_group".into()), "{what}");
        return;
    };
    let full = o.detail == Some("full");
    let Some(limit) = o.limit(if full { 5 } else { 10 }, c.max_results) else {
        assert_eq!(got, Err("invalid_arguments".into()), "{what}");
        return;
    };
    let mut all: Vec<u32> = catalog.grouped.iter().copied().filter(|&i| group.is_none_or(|g| catalog.tool(i).group.as_deref() == Some(g))).collect();
    all.sort_by(|&a, &b| catalog.tool(a).name.as_bytes().cmp(catalog.tool(b).name.as_bytes()));
    let detail = if full { Detail::Full } else { Detail::Summary };
    assert_page(got, expected_page(catalog, &all, o.offset(), limit, detail), catalog, &what);
}

fn check_list_groups(catalog: &Catalog, o: &Options) {
    let c = &catalog.control;
    let got = call(catalog, &c.list_groups, &o.arguments(None, &["offset"]));
    let what = format!("list_tool_groups limit={:?} offset={}", o.limit, o.offset);
    let Some(limit) = o.limit(c.max_results, c.max_results) else {
        assert_eq!(got, Err("invalid_arguments".into()), "{what}");
        return;
    };
    let mut groups: Vec<(&str, &str)> = catalog.groups.iter().map(|g| (g.name.as_str(), g.description.as_str())).collect();
    groups.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let total = groups.len();
    let entries: Vec<String> = groups
        .iter()
        .skip(o.offset())
        .take(limit)
        .map(|(name, description)| {
            let count = catalog.grouped.iter().filter(|&&i| catalog.tool(i).group.as_deref() == Some(name)).count();
            json!({"group": name, "description": description, "tool_count": count}).to_string()
        })
        .collect();
    let response = |n: usize| {
        let next = o.offset() + n;
        let next = if next < total { next.to_string() } else { "null".into() };
        format!("{{\"groups\":[{}],\"total\":{total},\"next_offset\":{next}}}", entries[..n].join(","))
    };
    let budget = c.max_search_bytes as usize;
    let n = (0..entries.len()).find(|&n| response(n + 1).len() > budget).unwrap_or(entries.len());
    if n == 0 && !entries.is_empty() {
        assert_eq!(got, Err("too_large".into()), "{what}");
    } else {
        assert_eq!(got, Ok(response(n)), "{what}");
    }
}

fn check_describe(catalog: &Catalog, query: &str, o: &Options) {
    let c = &catalog.control;
    let group = o.group.unwrap_or("");
    let got = call(catalog, &c.describe, &json!({"group": group, "tool": query}));
    let what = format!("describe {group:?} {query:?}");
    if catalog.group(group).is_none() {
        assert_eq!(got, Err("unknown_group".into()), "{what}");
        return;
    }
    let tool = catalog.grouped.iter().copied().find(|&i| {
        let t = catalog.tool(i);
        t.group.as_deref() == Some(group) && t.local == query
    });
    let Some(i) = tool else {
        assert_eq!(got, Err("unknown_tool".into()), "{what}");
        return;
    };
    let json = format!("{{\"tool\":{}}}", checked_entry(catalog, i, Detail::Full));
    if json.len() > c.max_search_bytes as usize {
        assert_eq!(got, Err("too_large".into()), "{what}");
    } else {
        assert_eq!(got, Ok(json), "{what}");
    }
}

fn check_tool_search(catalog: &Catalog, query: &str, o: &Options) {
    let c = &catalog.control;
    let got = call(catalog, &c.search, &o.arguments(Some(query), &[]));
    let what = format!("tool_search {query:?} limit={:?}", o.limit);
    if query.len() > MAX_QUERY_BYTES {
        assert_eq!(got, Err("invalid_arguments".into()), "{what}");
        return;
    }
    let Some(limit) = o.limit(5, c.max_results) else {
        assert_eq!(got, Err("invalid_arguments".into()), "{what}");
        return;
    };
    let ranked = if query.trim().is_empty() {
        let mut all = catalog.grouped.clone();
        all.sort_by(|&a, &b| catalog.tool(a).name.as_bytes().cmp(catalog.tool(b).name.as_bytes()));
        all
    } else {
        natural_ranking(catalog, query, None).0
    };
    assert_page(got, expected_page(catalog, &ranked, 0, limit, Detail::Full), catalog, &what);
}

/// Documents from `group\tname\tdescription\tprops\tdescs\textra` lines.
fn parse_docs(text: &str) -> Vec<SearchDoc> {
    text.lines()
        .take(64)
        .map(|line| {
            let mut f = line.split('\t');
            let mut next = || f.next().unwrap_or("").to_string();
            let (group, name, description) = (next(), next(), next());
            let list = |s: String, sep: char| -> Vec<String> { if s.is_empty() { Vec::new() } else { s.split(sep).map(String::from).collect() } };
            let property_names = list(next(), ',');
            let schema_descriptions = list(next(), '|');
            let additional_search_text = next();
            SearchDoc {
                canonical: canonical_name(&group, &name),
                name,
                description,
                group,
                property_names,
                schema_descriptions,
                additional_search_text,
            }
        })
        .collect()
}

fn check_ad_hoc_catalog(query: &str, docs_text: &str) {
    let docs = parse_docs(docs_text);
    for doc in &docs {
        for text in [&doc.name, &doc.description, &doc.additional_search_text] {
            check_tokens(text);
        }
    }
    let index = KeywordIndex::build(&docs);
    assert_eq!(index.len(), docs.len());
    let natural = NaturalIndex::build(&docs, &NaturalConfig::default());
    let first_group = docs.first().map(|d| d.group.as_str());
    for group in [None, first_group, Some("unknown group")] {
        let all = index.search(query, group);
        assert_eq!(all, naive_search(&docs, query, group), "{query:?} in {group:?} over {docs:?}");
        for k in [0, 1, 3, 1_000] {
            let (top, total) = index.search_top(query, group, k);
            assert_eq!(total, all.len());
            assert_eq!(top, all[..k.min(all.len())], "{query:?} top {k}");
        }

        let key = query.trim().to_lowercase();
        let exact: Vec<u32> = (0u32..)
            .zip(&docs)
            .filter(|(_, d)| group.is_none_or(|g| d.group == g))
            .filter(|(_, d)| d.name.to_lowercase() == key || d.canonical.to_lowercase() == key)
            .map(|(i, _)| i)
            .collect();
        let (scored, total) = natural.search(query, group, usize::MAX);
        assert_eq!(scored.len(), total);
        assert!(exact.iter().all(|d| scored.iter().any(|(s, _)| s == d)), "exact match missing for {query:?}");
        for (d, _) in &scored {
            assert!(group.is_none_or(|g| docs[*d as usize].group == g), "doc {d} outside {group:?}");
        }
        check_natural_order(&scored, &exact, query);
        for k in [0, 1, 3] {
            let (top, n) = natural.search(query, group, k);
            assert_eq!(n, total);
            assert_eq!(top[..], scored[..k.min(total)], "natural top {k} of {query:?}");
        }
    }
}
