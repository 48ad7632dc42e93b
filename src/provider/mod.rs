//! Providers' wire shapes (issue 16): the model tools as each API's tools parameter
//! ([`tools`]), the model's tool-call parts read into calls ([`calls`]), and results written
//! as what the host appends to the conversation ([`results`]). JSON in, JSON out: the edges
//! carry the text, nothing here knows a transport.

pub mod calls;
pub mod results;
pub mod tools;

use serde_json::Value;

/// A provider API whose shapes toolrouter speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    OpenAiChat,
    OpenAiResponses,
    Anthropic,
    Gemini,
    Mcp,
}

impl Format {
    /// Does this provider load deferred tools itself (`defer_loading`, tool references)?
    pub fn defers_loading(self) -> bool {
        matches!(self, Format::Anthropic | Format::OpenAiResponses)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Format::OpenAiChat => "TOOL_FORMAT_OPENAI_CHAT",
            Format::OpenAiResponses => "TOOL_FORMAT_OPENAI_RESPONSES",
            Format::Anthropic => "TOOL_FORMAT_ANTHROPIC",
            Format::Gemini => "TOOL_FORMAT_GEMINI",
            Format::Mcp => "TOOL_FORMAT_MCP",
        }
    }
}

/// A part of `provider_calls_json` that is not the format's shape: where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError {
    /// A path below the field, e.g. `[2].function.arguments`.
    pub path: String,
    pub message: String,
}

impl ShapeError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }
}

/// Gemini function names start with a letter or an underscore; toolrouter's may start with
/// a digit or a dash. Such a name gets a leading underscore, and so does a name that would
/// read back as one (`_1x` → `__1x`), so every name has its own Gemini name.
pub fn gemini_name(name: &str) -> std::borrow::Cow<'_, str> {
    if needs_escape(name) { format!("_{name}").into() } else { name.into() }
}

/// The toolrouter name of a Gemini function name (undoes [`gemini_name`]).
pub fn from_gemini_name(name: &str) -> &str {
    match name.strip_prefix('_') {
        Some(rest) if needs_escape(rest) => rest,
        _ => name,
    }
}

/// After its leading underscores, does the name go on with something other than a letter?
fn needs_escape(name: &str) -> bool {
    name.trim_start_matches('_').as_bytes().first().is_some_and(|b| !b.is_ascii_alphabetic())
}

/// The text a model reads for a result: a JSON string is its text, anything else its JSON.
pub fn result_text(content_json: &str) -> String {
    match serde_json::from_str::<Value>(content_json) {
        Ok(Value::String(s)) => s,
        _ => content_json.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemini_names_escape_a_leading_digit_or_dash_and_read_back() {
        for name in ["lookup", "_private", "1st", "-x", "a-b", "_1st", "__1st", "_-x", "_", "__"] {
            let g = gemini_name(name);
            assert!(g.as_bytes()[0].is_ascii_alphabetic() || g.starts_with('_'), "{g}");
            assert_eq!(from_gemini_name(&g), name);
        }
        assert_eq!(gemini_name("1st"), "_1st");
        assert_eq!(gemini_name("_1st"), "__1st");
        assert_ne!(gemini_name("_1st"), gemini_name("1st"));
    }

    #[test]
    fn a_json_string_result_is_its_text() {
        assert_eq!(result_text(r#""plain text""#), "plain text");
        assert_eq!(result_text(r#"{"a":1}"#), r#"{"a":1}"#);
        assert_eq!(result_text("not json"), "not json");
    }
}
