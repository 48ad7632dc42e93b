//! Keyword splitting shared by queries and indexed fields (SPEC §5).
//!
//! Text splits at every non-alphanumeric char (whitespace, punctuation, `_`, `-`) and at
//! camelCase boundaries inside an alphanumeric run; pieces are lower-cased.

use std::collections::HashSet;

/// Lower-cases char by char. Field text, substring runs and tokens all use this one rule so
/// they agree byte for byte (`str::to_lowercase` treats a final sigma by context).
pub(crate) fn lowercase(s: &str) -> String {
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
    let mut run: Vec<char> = Vec::new();
    let mut word = String::new();
    for chunk in alphanumeric_runs(text) {
        run.clear();
        run.extend(chunk.chars());
        let mut start = 0;
        for i in 1..run.len() {
            if camel_boundary(&run, i) {
                emit_piece(&run[start..i], &mut word, &mut emit);
                start = i;
            }
        }
        emit_piece(&run[start..], &mut word, &mut emit);
    }
}

/// Maximal runs of alphanumeric chars; an all-alphanumeric keyword found in a text lies
/// inside one of them.
pub(crate) fn alphanumeric_runs(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|run| !run.is_empty())
}

/// Whether a new piece starts at `run[i]`: `customerName`, `HTTPServer`, `v2Api`.
fn camel_boundary(run: &[char], i: usize) -> bool {
    let (prev, cur) = (run[i - 1], run[i]);
    let next_is_lower = run.get(i + 1).is_some_and(|c| c.is_lowercase());
    cur.is_uppercase()
        && (prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_is_lower))
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
        assert_eq!(
            kw("get user-profile_data, now!\tplease.ok"),
            ["get", "user", "profile", "data", "now", "please", "ok"]
        );
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
        assert_eq!(
            kw("Straße-Ölwechsel 日本語"),
            ["straße", "ölwechsel", "日本語"]
        );
        assert_eq!(kw("ÉcoleNormale"), ["école", "normale"]);
    }

    #[test]
    fn tokens_are_alphanumeric_even_when_lower_casing_adds_marks() {
        assert_eq!(kw("İstanbul"), ["i", "stanbul"]);
    }

    #[test]
    fn punctuation_only_text_has_no_keywords() {
        assert!(kw(" -_.,;!? ").is_empty());
    }

    #[test]
    fn normalize_exact_trims_and_lower_cases_preserving_separators() {
        assert_eq!(normalize_exact("  Customer_Name \t"), "customer_name");
        assert_eq!(normalize_exact(" customer Name "), "customer name");
        assert_ne!(
            normalize_exact("customer name"),
            normalize_exact("customer_name")
        );
    }
}
