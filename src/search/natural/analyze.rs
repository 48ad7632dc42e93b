//! Text analysis for the natural-language ranker: identifier-aware word splitting, stop words
//! and English (Porter2/Snowball) stemming. Deliberately separate from the SPEC §5 keyword
//! tokenizer: natural-language matching wants stems and drops filler, §5 must not.

use rust_stemmers::{Algorithm, Stemmer};

/// Function words dropped from tool text and queries alike. Sorted (binary search).
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "d",
    "did",
    "do",
    "does",
    "doing",
    "during",
    "each",
    "etc",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "ll",
    "m",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "nor",
    "of",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "own",
    "re",
    "s",
    "same",
    "she",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "until",
    "us",
    "ve",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Request boilerplate that says nothing about the wanted capability ("I need", "can you",
/// "please help me"). Dropped from queries only. Sorted (binary search).
const QUERY_STOP_WORDS: &[&str] = &[
    "able",
    "additionally",
    "also",
    "assist",
    "can",
    "could",
    "curious",
    "excited",
    "give",
    "glad",
    "hello",
    "help",
    "hey",
    "hi",
    "interested",
    "kindly",
    "know",
    "let",
    "like",
    "looking",
    "may",
    "might",
    "must",
    "need",
    "ok",
    "okay",
    "please",
    "possible",
    "provide",
    "shall",
    "should",
    "sure",
    "tell",
    "thank",
    "thanks",
    "want",
    "wanted",
    "wish",
    "wondering",
    "would",
];

/// Only this many leading words of a query are analysed: requests are far shorter, and a
/// pasted blob (a base64 image, a log) must not make one query cost milliseconds.
const MAX_QUERY_WORDS: usize = 256;

/// Calls `f` with each lower-cased word of `text`, at most `max` of them: non-alphanumerics
/// separate words, and so do the identifier boundaries lower→Upper (`customerName`),
/// acronym→word (`HTTPServer`) and digit→Upper (`v2Api`); a letter–digit run such as
/// `oauth2` stays whole. One buffer serves every word (no allocation per word).
pub(super) fn for_each_word(text: &str, max: usize, mut f: impl FnMut(&str)) {
    let mut chars = text.chars().peekable();
    let mut prev = ' ';
    let mut word = String::new();
    let mut count = 0;
    let mut emit = |word: &mut String, count: &mut usize| {
        if !word.is_empty() {
            f(word);
            word.clear();
            *count += 1;
        }
    };
    while let Some(c) = chars.next() {
        if count >= max {
            return;
        }
        if !c.is_alphanumeric() {
            emit(&mut word, &mut count);
        } else {
            // A non-empty `word` means `prev` is alphanumeric.
            let next_lower = chars.peek().is_some_and(|n| n.is_lowercase());
            if !word.is_empty() && c.is_uppercase() && (prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_lower)) {
                emit(&mut word, &mut count);
            }
            word.extend(c.to_lowercase());
        }
        prev = c;
    }
    if count < max {
        emit(&mut word, &mut count);
    }
}

fn is_stop(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

fn is_query_stop(word: &str) -> bool {
    QUERY_STOP_WORDS.binary_search(&word).is_ok()
}

/// Filters and stems words. Stateless after construction, so `Send + Sync`.
pub(super) struct Analyzer {
    stemmer: Option<Stemmer>,
    stop_words: bool,
}

impl Analyzer {
    pub(super) fn new(stem: bool, stop_words: bool) -> Self {
        Analyzer { stemmer: stem.then(|| Stemmer::create(Algorithm::English)), stop_words }
    }

    /// Whether a word of tool text is left out of the index.
    pub(super) fn is_doc_stop(&self, word: &str) -> bool {
        self.stop_words && is_stop(word)
    }

    /// Words of a query, in order, stop words and request boilerplate removed (not stemmed).
    /// A query made only of such words keeps them: a query about "help" still means something.
    pub(super) fn query_words(&self, text: &str) -> Vec<String> {
        let mut words = Vec::new();
        for_each_word(text, MAX_QUERY_WORDS, |w| words.push(w.to_owned()));
        let filler = |w: &String| self.stop_words && (is_stop(w) || is_query_stop(w));
        if !words.iter().all(filler) {
            words.retain(|w| !filler(w));
        }
        words
    }

    /// The index term of a (lower-case) word.
    pub(super) fn stem(&self, word: &str) -> String {
        match &self.stemmer {
            Some(s) => s.stem(word).into_owned(),
            None => word.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_word(text, usize::MAX, |w| out.push(w.to_owned()));
        out
    }

    #[test]
    fn splits_identifiers() {
        assert_eq!(words("get_current_stock_price"), ["get", "current", "stock", "price"]);
        assert_eq!(words("customerName"), ["customer", "name"]);
        assert_eq!(words("HTTPServer"), ["http", "server"]);
        assert_eq!(words("v2Api oauth2"), ["v2", "api", "oauth2"]);
        assert_eq!(words("crm__find-customer"), ["crm", "find", "customer"]);
        assert_eq!(words("ResearchHelper, l'état"), ["research", "helper", "l", "état"]);
    }

    #[test]
    fn stems_english() {
        let a = Analyzer::new(true, false);
        let words = ["papers", "parking", "generated", "searches", "running", "studies"];
        let stems: Vec<String> = words.iter().map(|w| a.stem(w)).collect();
        assert_eq!(stems, ["paper", "park", "generat", "search", "run", "studi"]);
        assert_eq!(Analyzer::new(false, false).stem("papers"), "papers");
    }

    #[test]
    fn drops_stop_words_and_query_boilerplate() {
        let a = Analyzer::new(true, true);
        assert_eq!(a.query_words("Can you please help me find the weather?"), ["find", "weather"]);
        // Boilerplate is query-only: a tool may well be about "help".
        let kept: Vec<String> = words("Help for the CLI").into_iter().filter(|w| !a.is_doc_stop(w)).collect();
        assert_eq!(kept, ["help", "cli"]);
        // A query of filler only keeps its words rather than matching nothing.
        assert_eq!(a.query_words("help me"), ["help", "me"]);
    }

    #[test]
    fn long_queries_are_cut() {
        let a = Analyzer::new(true, true);
        assert_eq!(a.query_words(&"weather ".repeat(10_000)).len(), MAX_QUERY_WORDS);
    }

    #[test]
    fn word_lists_are_sorted_and_unique() {
        for list in [STOP_WORDS, QUERY_STOP_WORDS] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
    }
}
