//! A per-query scan implementing SPEC §5 ranking literally: the benchmark baseline and the
//! test oracle for [`super::keyword::KeywordIndex`].

use super::fields::searchable_fields;
use super::tokenize::{keywords, lowercase, normalize_exact, tokens};
use super::{Hit, SearchDoc};

/// Ranks `docs` for `query` by tokenizing and scanning every document.
pub fn naive_search(docs: &[SearchDoc], query: &str, group: Option<&str>) -> Vec<Hit> {
    let in_scope = (0u32..).zip(docs).filter(|(_, doc)| group.is_none_or(|g| doc.group == g));
    let mut hits: Vec<Hit> = if query.trim().is_empty() {
        in_scope.map(|(doc, _)| hit(doc, false, 0, 0)).collect()
    } else {
        let exact_name = normalize_exact(query);
        let keywords = keywords(query);
        in_scope
            .filter_map(|(id, doc)| {
                let exact = lowercase(&doc.name) == exact_name || lowercase(&doc.canonical) == exact_name;
                let (matched, score) = keyword_strengths(doc, &keywords);
                (exact || matched > 0).then(|| hit(id, exact, matched, score))
            })
            .collect()
    };
    hits.sort_by(|a, b| {
        b.exact
            .cmp(&a.exact)
            .then(b.matched.cmp(&a.matched))
            .then(b.score.cmp(&a.score))
            .then_with(|| {
                let canonical = |h: &Hit| docs[h.doc as usize].canonical.as_bytes();
                canonical(a).cmp(canonical(b))
            })
            .then(a.doc.cmp(&b.doc))
    });
    hits
}

/// (distinct keywords matched, sum of their strongest strength points) for one document.
fn keyword_strengths(doc: &SearchDoc, keywords: &[String]) -> (u32, u32) {
    let fields: Vec<(u32, Vec<String>, Vec<String>)> = (1u32..)
        .zip(searchable_fields(doc))
        .map(|(priority, texts)| {
            let lowered = texts.iter().map(|t| lowercase(t)).collect();
            let words = texts.iter().flat_map(|t| tokens(t)).collect();
            (priority, lowered, words)
        })
        .collect();
    let mut matched = 0;
    let mut score = 0;
    for keyword in keywords {
        let best = fields
            .iter()
            .map(|(priority, lowered, words)| {
                if words.contains(keyword) {
                    13 - priority
                } else if lowered.iter().any(|text| text.contains(keyword.as_str())) {
                    7 - priority
                } else {
                    0
                }
            })
            .max()
            .unwrap_or(0);
        if best > 0 {
            matched += 1;
            score += best;
        }
    }
    (matched, score)
}

fn hit(doc: u32, exact: bool, matched: u32, score: u32) -> Hit {
    Hit { doc, exact, matched, score }
}
