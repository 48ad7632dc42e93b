//! Keyword splitting shared by queries and indexed fields (SPEC §5).
//!
//! Text splits at every non-alphanumeric char (whitespace, punctuation, `_`, `-`) and at
//! camelCase boundaries inside an alphanumeric run; pieces are lower-cased.

use std::collections::HashSet;
use std::ops::Range;

/// Lower-cases char by char. Field text, substring runs and tokens all use this one rule so
/// they agree byte for byte (`str::to_lowercase` treats a final sigma by context).
pub(crate) fn lowercase(s: &str) -> String {
    if s.is_ascii() {
        return s.to_ascii_lowercase();
    }
    s.chars().flat_map(char::to_lowercase).collect()
}

/// The query's keywords: split, lower-cased, de-duplicated, in order of first appearance.
pub fn keywords(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for_each_token(text, |token| {
        if seen.insert(token.to_owned()) {
            out.push(token.to_owned());
        }
    });
    out
}

/// Every token of `text`, split and lower-cased like [`keywords`], duplicates kept.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, |token| out.push(token.to_owned()));
    out
}

/// The form compared for exact-name matches: trimmed and lower-cased, separators preserved.
pub fn normalize_exact(s: &str) -> String {
    lowercase(s.trim())
}

/// Calls `emit` with each token of `text` without allocating per token.
pub(crate) fn for_each_token(text: &str, mut emit: impl FnMut(&str)) {
    let mut word = String::new();
    if text.is_ascii() {
        // The common case, on bytes: ASCII case and digit classes equal the Unicode ones.
        for run in ascii_alphanumeric_runs(text) {
            for_each_piece(run.as_bytes(), |piece| {
                word.clear();
                word.push_str(&run[piece]);
                word.make_ascii_lowercase();
                emit(&word);
            });
        }
        return;
    }
    let mut chars: Vec<char> = Vec::new();
    for run in alphanumeric_runs(text) {
        chars.clear();
        chars.extend(run.chars());
        for_each_piece(&chars, |piece| emit_piece(&chars[piece], &mut word, &mut emit));
    }
}

/// How the index uses a string of a field: as a whole-word token, as a substring run (a
/// maximal alphanumeric run of the lower-cased text), or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Uses {
    pub token: bool,
    pub run: bool,
}

/// Calls `emit` with every token and every run of `text`, each with its uses; a run that
/// is a single token comes once, with both uses, so the index looks it up once.
pub(crate) fn for_each_term(text: &str, mut emit: impl FnMut(&str, Uses)) {
    const TOKEN: Uses = Uses { token: true, run: false };
    const RUN: Uses = Uses { token: false, run: true };
    if !text.is_ascii() {
        // Lower-casing may move run boundaries (`İ`), so runs and tokens come apart.
        for_each_token(text, |token| emit(token, TOKEN));
        for run in alphanumeric_runs(&lowercase(text)) {
            emit(run, RUN);
        }
        return;
    }
    let mut lowered = String::new();
    let mut pieces: Vec<Range<usize>> = Vec::new();
    for run in ascii_alphanumeric_runs(text) {
        // Without an upper-case letter a run is one piece (a camelCase boundary starts with
        // one) and already lower-cased: most runs of prose.
        if !run.bytes().any(|b| b.is_ascii_uppercase()) {
            emit(run, Uses { token: true, run: true });
            continue;
        }
        lowered.clear();
        lowered.push_str(run);
        lowered.make_ascii_lowercase();
        pieces.clear();
        for_each_piece(run.as_bytes(), |piece| pieces.push(piece));
        if pieces.len() == 1 {
            emit(&lowered, Uses { token: true, run: true });
            continue;
        }
        emit(&lowered, RUN);
        for piece in &pieces {
            emit(&lowered[piece.clone()], TOKEN);
        }
    }
}

/// Maximal runs of alphanumeric chars; an all-alphanumeric keyword found in a text lies
/// inside one of them.
pub(crate) fn alphanumeric_runs(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|run| !run.is_empty())
}

/// [`alphanumeric_runs`] of ASCII text, scanning bytes rather than decoding chars.
fn ascii_alphanumeric_runs(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        let start = at + bytes[at..].iter().position(u8::is_ascii_alphanumeric)?;
        let len = bytes[start..].iter().position(|b| !b.is_ascii_alphanumeric());
        at = len.map_or(bytes.len(), |len| start + len);
        Some(&text[start..at])
    })
}

/// The case and digit classes camelCase splitting looks at.
trait Cased: Copy {
    fn lower(self) -> bool;
    fn upper(self) -> bool;
    fn digit(self) -> bool;
}

impl Cased for char {
    fn lower(self) -> bool {
        self.is_lowercase()
    }
    fn upper(self) -> bool {
        self.is_uppercase()
    }
    fn digit(self) -> bool {
        self.is_numeric()
    }
}

impl Cased for u8 {
    fn lower(self) -> bool {
        self.is_ascii_lowercase()
    }
    fn upper(self) -> bool {
        self.is_ascii_uppercase()
    }
    fn digit(self) -> bool {
        self.is_ascii_digit()
    }
}

/// Calls `piece` with the index range of each camelCase piece of an alphanumeric run.
fn for_each_piece<T: Cased>(run: &[T], mut piece: impl FnMut(Range<usize>)) {
    let mut start = 0;
    for i in 1..run.len() {
        if camel_boundary(run, i) {
            piece(start..i);
            start = i;
        }
    }
    piece(start..run.len());
}

/// Whether a new piece starts at `run[i]`: `customerName`, `HTTPServer`, `v2Api`.
fn camel_boundary<T: Cased>(run: &[T], i: usize) -> bool {
    let (prev, cur) = (run[i - 1], run[i]);
    let next_is_lower = run.get(i + 1).is_some_and(|c| c.lower());
    cur.upper() && (prev.lower() || prev.digit() || (prev.upper() && next_is_lower))
}

/// Lower-cases one camelCase piece. Lower-casing can produce a non-alphanumeric char (`İ`
/// gives `i` and a combining dot); it splits there too, so every token is alphanumeric.
fn emit_piece(piece: &[char], word: &mut String, emit: &mut impl FnMut(&str)) {
    word.clear();
    for c in piece.iter().flat_map(|c| c.to_lowercase()) {
        if c.is_alphanumeric() {
            word.push(c);
        } else if !word.is_empty() {
            emit(word);
            word.clear();
        }
    }
    if !word.is_empty() {
        emit(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kw(text: &str) -> Vec<String> {
        keywords(text)
    }

    #[test]
    fn splits_at_whitespace_punctuation_underscore_and_hyphen() {
        assert_eq!(kw("get user-profile_data, now!\tplease.ok"), ["get", "user", "profile", "data", "now", "please", "ok"]);
    }

    #[test]
    fn splits_lower_to_upper_camel_case() {
        assert_eq!(kw("customerName"), ["customer", "name"]);
    }

    #[test]
    fn splits_at_the_end_of_an_acronym() {
        assert_eq!(kw("HTTPServer"), ["http", "server"]);
        assert_eq!(kw("parseJSONBody"), ["parse", "json", "body"]);
    }

    #[test]
    fn splits_digit_to_upper() {
        assert_eq!(kw("v2Api"), ["v2", "api"]);
    }

    #[test]
    fn keeps_letter_digit_runs_whole() {
        assert_eq!(kw("oauth2"), ["oauth2"]);
        assert_eq!(kw("v2"), ["v2"]);
        assert_eq!(kw("HTTP2"), ["http2"]);
        assert_eq!(kw("2fa"), ["2fa"]);
    }

    #[test]
    fn keywords_are_lower_cased_and_deduplicated_in_first_appearance_order() {
        assert_eq!(kw("Name other NAME name_other"), ["name", "other"]);
    }

    #[test]
    fn tokens_keep_duplicates() {
        assert_eq!(tokens("pay Pay-pay"), ["pay", "pay", "pay"]);
    }

    #[test]
    fn splitting_is_unicode_aware() {
        assert_eq!(kw("Straße-Ölwechsel 日本語"), ["straße", "ölwechsel", "日本語"]);
        assert_eq!(kw("ÉcoleNormale"), ["école", "normale"]);
    }

    #[test]
    fn tokens_are_alphanumeric_even_when_lower_casing_adds_marks() {
        assert_eq!(kw("İstanbul"), ["i", "stanbul"]);
    }

    #[test]
    fn the_ascii_fast_path_splits_like_the_unicode_path() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let alphabet = b"aZ9_- .B2cHTTPsx";
        for _ in 0..2_000 {
            let text: String = (0..12)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    char::from(alphabet[(state % alphabet.len() as u64) as usize])
                })
                .collect();
            // A non-ASCII suffix sends the same text down the general path.
            let mut general = tokens(&format!("{text} é"));
            assert_eq!(general.pop().as_deref(), Some("é"));
            assert_eq!(tokens(&text), general, "{text:?}");
            let [reported, defined] = terms_both_ways(&text);
            assert_eq!(reported, defined, "{text:?}");
        }
    }

    /// (tokens, runs) as `for_each_term` reports them, and as defined, each sorted.
    fn terms_both_ways(text: &str) -> [(Vec<String>, Vec<String>); 2] {
        let (mut words, mut runs) = (Vec::new(), Vec::new());
        for_each_term(text, |term, uses| {
            if uses.token {
                words.push(term.to_owned());
            }
            if uses.run {
                runs.push(term.to_owned());
            }
        });
        let lowered = lowercase(text);
        let defined = (tokens(text), alphanumeric_runs(&lowered).map(str::to_owned).collect());
        [(words, runs), defined].map(|(mut words, mut runs): (Vec<String>, Vec<String>)| {
            words.sort();
            runs.sort();
            (words, runs)
        })
    }

    #[test]
    fn terms_are_the_tokens_and_the_lower_cased_runs() {
        for text in ["get customerName, HTTPServer v2 now", "Straße-ÖlWechsel İx", "a_B-c", ""] {
            let [reported, defined] = terms_both_ways(text);
            assert_eq!(reported, defined, "{text:?}");
        }
    }

    #[test]
    fn punctuation_only_text_has_no_keywords() {
        assert!(kw(" -_.,;!? ").is_empty());
    }

    #[test]
    fn normalize_exact_trims_and_lower_cases_preserving_separators() {
        assert_eq!(normalize_exact("  Customer_Name \t"), "customer_name");
        assert_eq!(normalize_exact(" customer Name "), "customer name");
        assert_ne!(normalize_exact("customer name"), normalize_exact("customer_name"));
    }
}
