//! TEMPORARY placeholder while the real index is written in another worktree.
use super::{Hit, SearchDoc};
pub struct KeywordIndex { n: usize, canon: Vec<String>, groups: Vec<String>, names: Vec<String> }
impl KeywordIndex {
    pub fn build(docs: &[SearchDoc]) -> KeywordIndex {
        KeywordIndex { n: docs.len(), canon: docs.iter().map(|d| d.canonical.clone()).collect(), groups: docs.iter().map(|d| d.group.clone()).collect(), names: docs.iter().map(|d| d.name.to_lowercase()).collect() }
    }
    pub fn len(&self) -> usize { self.n }
    pub fn search(&self, query: &str, group: Option<&str>) -> Vec<Hit> {
        let q = query.trim().to_lowercase();
        let mut v: Vec<Hit> = (0..self.n as u32).filter(|&d| group.is_none_or(|g| self.groups[d as usize] == g)).filter_map(|d| {
            let exact = self.names[d as usize] == q || self.canon[d as usize].to_lowercase() == q;
            let m = self.names[d as usize].contains(&q) && !q.is_empty();
            (q.is_empty() || exact || m).then_some(Hit { doc: d, exact, matched: m as u32, score: 0 })
        }).collect();
        v.sort_by(|a, b| b.exact.cmp(&a.exact).then(b.matched.cmp(&a.matched)).then(self.canon[a.doc as usize].cmp(&self.canon[b.doc as usize])));
        v
    }
    pub fn search_top(&self, query: &str, group: Option<&str>, k: usize) -> (Vec<Hit>, usize) {
        let mut v = self.search(query, group); let n = v.len(); v.truncate(k); (v, n)
    }
}
