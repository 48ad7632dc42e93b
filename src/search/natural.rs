//! TEMPORARY placeholder.
use super::SearchDoc;
#[derive(Debug, Clone, Default)]
pub struct NaturalConfig;
pub struct NaturalIndex(Vec<String>);
impl NaturalIndex {
    pub fn build(docs: &[SearchDoc], _cfg: &NaturalConfig) -> Self { NaturalIndex(docs.iter().map(|d| d.name.clone()).collect()) }
    pub fn search(&self, query: &str, _group: Option<&str>, k: usize) -> (Vec<(u32, f32)>, usize) {
        let v: Vec<(u32,f32)> = self.0.iter().enumerate().filter(|(_, n)| query.contains(n.as_str())).map(|(i,_)| (i as u32, 1.0)).collect(); let n=v.len(); (v.into_iter().take(k).collect(), n)
    }
}
