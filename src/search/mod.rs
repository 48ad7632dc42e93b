//! Deterministic local search over a version's grouped tools (SPEC §5).
//!
//! The index is built once per immutable version and cached with the compiled catalog; a
//! query never rescans schemas.

pub mod embed;
pub mod fields;
pub mod hybrid;
pub mod keyword;
pub mod naive;
pub mod natural;
#[cfg(test)]
mod test_rng;
pub mod tokenize;
pub mod top;

/// The hash map of the indexes: foldhash, randomly seeded per process (the keys are tools'
/// text from tenants and upstream servers), several times faster than SipHash on short words.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Runs `f` on this thread's `scratch` (per-query state reused across queries and indexes).
/// It is taken out while in use, so a panic mid-query leaves a fresh one behind, not a dirty
/// one.
pub(crate) fn with_scratch<S: Default, R>(scratch: &'static std::thread::LocalKey<std::cell::RefCell<S>>, f: impl FnOnce(&mut S) -> R) -> R {
    scratch.with(|cell| {
        let mut state = cell.take();
        let result = f(&mut state);
        cell.replace(state);
        result
    })
}

/// What the index knows of one grouped tool. Documents are numbered by their position in the
/// slice given to the index builder.
#[derive(Debug, Clone, Default)]
pub struct SearchDoc {
    /// (1) local tool name.
    pub name: String,
    /// (2) the full tool description.
    pub description: String,
    /// (3) the group identifier.
    pub group: String,
    /// The canonical (registered) name, e.g. `my_utools__select`; used for exact-name
    /// matches and as the final tie-break (bytewise ascending).
    pub canonical: String,
    /// (4) input property names at any depth (see `fields::schema_fields`); a compiled
    /// catalog's documents hold them as one space-separated string, which the indexes split
    /// as they split separate strings.
    pub property_names: Vec<String>,
    /// (5) every `description` string inside the input schema (newline-separated, as one
    /// string, in a compiled catalog's documents).
    pub schema_descriptions: Vec<String>,
    /// (6) `additional_search_text` (ranking only, never shown).
    pub additional_search_text: String,
}

/// A document's searchable texts, borrowed: what the keyword index reads, so a compiled
/// catalog indexes its tools without copying their text into [`SearchDoc`]s.
#[derive(Debug, Clone, Copy)]
pub struct DocText<'a> {
    /// The six fields in priority order, as `fields::searchable_fields` gives them.
    pub fields: [&'a [String]; 6],
    pub canonical: &'a str,
}

impl DocText<'_> {
    pub fn name(&self) -> &str {
        self.fields[0].first().map_or("", String::as_str)
    }

    pub fn group(&self) -> &str {
        self.fields[2].first().map_or("", String::as_str)
    }

    /// An owned copy, for the indexes that keep [`SearchDoc`]s.
    pub fn to_doc(&self) -> SearchDoc {
        // Fields 1, 2, 3 and 6 hold one string, or none for an empty one.
        let one = |field: &[String]| field.first().cloned().unwrap_or_default();
        let [name, description, group, property_names, schema_descriptions, additional] = self.fields;
        SearchDoc {
            name: one(name),
            description: one(description),
            group: one(group),
            canonical: self.canonical.to_owned(),
            property_names: property_names.to_vec(),
            schema_descriptions: schema_descriptions.to_vec(),
            additional_search_text: one(additional),
        }
    }
}

/// A document the keyword index can read.
pub trait Searchable {
    fn text(&self) -> DocText<'_>;
}

impl Searchable for SearchDoc {
    fn text(&self) -> DocText<'_> {
        DocText { fields: fields::searchable_fields(self), canonical: &self.canonical }
    }
}

impl Searchable for DocText<'_> {
    fn text(&self) -> DocText<'_> {
        *self
    }
}

/// One ranked candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// Index of the document in the slice the index was built from.
    pub doc: u32,
    /// The query equals the local or canonical name (trimmed, case-insensitive).
    pub exact: bool,
    /// Number of distinct query keywords that matched.
    pub matched: u32,
    /// Sum of the matched keywords' strength points.
    pub score: u32,
}
