//! [`schema_fields`](super::schema_fields) read straight from schema text: one pass of the
//! JSON parser that keeps only the schema positions' descriptions and property names (most
//! of a compile's schema work was building, then dropping, the whole `Value`).

use std::borrow::Cow;
use std::fmt;
use std::hash::BuildHasher;

use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};

use super::{Holds, holds};

/// Property names and descriptions, borrowed from the schema text unless escaped there.
pub type TextFields<'a> = (Vec<Cow<'a, str>>, Vec<Cow<'a, str>>);

/// Property names and descriptions of the schema in `text`, in the order `schema_fields`
/// gives them for the parsed text; `None` when `text` is not one JSON value, or repeats a key
/// in an object (which parsing resolves: the caller parses the value then).
pub fn schema_fields_of_text(text: &str) -> Option<TextFields<'_>> {
    let mut skeleton = Skeleton::default();
    let mut reader = serde_json::Deserializer::from_str(text);
    let root = SchemaAt(&mut skeleton).deserialize(&mut reader).ok()?;
    reader.end().ok()?;
    // The walk of `schema_fields`, over the schema objects only.
    let (mut names, mut descriptions) = (Vec::new(), Vec::new());
    let mut skeleton = skeleton.nodes;
    let mut pending: Vec<u32> = root.into_iter().collect();
    while let Some(node) = pending.pop() {
        let node = std::mem::take(&mut skeleton[node as usize]);
        descriptions.extend(node.description);
        for step in node.steps {
            match step {
                Step::Name(name) => names.push(name),
                Step::Schema(child) => pending.push(child),
            }
        }
    }
    Some((names, descriptions))
}

/// The schema objects met, by number.
#[derive(Default)]
struct Skeleton<'de> {
    nodes: Vec<Node<'de>>,
}

/// A schema object: its `description` string, and in key order what the walk takes from it.
#[derive(Default)]
struct Node<'de> {
    description: Option<Cow<'de, str>>,
    steps: Vec<Step<'de>>,
}

enum Step<'de> {
    Name(Cow<'de, str>),
    /// A schema object below this one.
    Schema(u32),
}

/// The scalar `visit_*` methods of a visitor that finds nothing in numbers, booleans and
/// null: each returns `$nothing`.
macro_rules! no_text_in_scalars {
    ($nothing:expr) => {
        fn visit_bool<E: Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($nothing)
        }
        fn visit_i64<E: Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($nothing)
        }
        fn visit_u64<E: Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($nothing)
        }
        fn visit_f64<E: Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($nothing)
        }
        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok($nothing)
        }
    };
}

/// A string as the parser has it: borrowed from the text unless it held escapes.
struct Text<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// Keys of one object, checked for repeats: pairwise while few, then by a sorted copy. Kept
/// as hashes: a collision only sends the text to the parser, which is never wrong.
#[derive(Default)]
struct Keys(Vec<u64>);

impl Keys {
    fn add<E: Error>(&mut self, key: &str) -> Result<(), E> {
        let hash = foldhash::fast::FixedState::default().hash_one(key);
        if self.0.len() < 16 && self.0.contains(&hash) {
            return Err(E::custom("a repeated key"));
        }
        self.0.push(hash);
        Ok(())
    }

    fn finish<E: Error>(mut self) -> Result<(), E> {
        if self.0.len() > 16 {
            self.0.sort_unstable();
            if self.0.windows(2).any(|w| w[0] == w[1]) {
                return Err(E::custom("a repeated key"));
            }
        }
        Ok(())
    }
}

/// Any value, read for its repeated keys only.
struct Checked;

impl<'de> DeserializeSeed<'de> for Checked {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    no_text_in_scalars!(());
    fn visit_str<E: Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Checked)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = Keys::default();
        while let Some(Text(key)) = map.next_key()? {
            keys.add(&key)?;
            map.next_value_seed(Checked)?;
        }
        keys.finish()
    }
}

/// A position holding one schema: its node's number when it is an object.
struct SchemaAt<'s, 'de>(&'s mut Skeleton<'de>);

impl<'de> DeserializeSeed<'de> for SchemaAt<'_, 'de> {
    type Value = Option<u32>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<u32>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SchemaAt<'_, 'de> {
    type Value = Option<u32>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON Schema")
    }
    no_text_in_scalars!(None);
    fn visit_str<E: Error>(self, _: &str) -> Result<Option<u32>, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<u32>, A::Error> {
        Checked.visit_seq(seq).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<u32>, A::Error> {
        let skeleton = self.0;
        let id = u32::try_from(skeleton.nodes.len()).map_err(|_| A::Error::custom("too many schemas"))?;
        skeleton.nodes.push(Node::default());
        let mut node = Node::default();
        let mut keys = Keys::default();
        while let Some(Text(key)) = map.next_key()? {
            keys.add(&key)?;
            match holds(&key) {
                Holds::Description => node.description = map.next_value::<Option<Described>>()?.and_then(|d| d.0),
                Holds::Schema => node.steps.extend(map.next_value_seed(SchemaAt(skeleton))?.map(Step::Schema)),
                holds @ (Holds::Schemas | Holds::SchemaValues | Holds::Properties) => {
                    map.next_value_seed(Many { skeleton, steps: &mut node.steps, holds })?
                }
                Holds::Nothing => map.next_value_seed(Checked)?,
            }
        }
        keys.finish()?;
        skeleton.nodes[id as usize] = node;
        Ok(Some(id))
    }
}

/// A `description` value: its text when a string.
struct Described<'de>(Option<Cow<'de, str>>);

impl<'de> serde::Deserialize<'de> for Described<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Described<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Described(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E: Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Described(Some(Cow::Owned(s.to_owned()))))
            }
            no_text_in_scalars!(Described(None));
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Checked.visit_seq(seq).map(|()| Described(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Checked.visit_map(map).map(|()| Described(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// A keyword's value holding several schemas (`holds` is `Properties`, `SchemaValues` or
/// `Schemas`): an object of them, with their keys as property names for `Properties`; for
/// `Schemas`, an array of them or one schema.
struct Many<'s, 'n, 'de> {
    skeleton: &'s mut Skeleton<'de>,
    steps: &'n mut Vec<Step<'de>>,
    holds: Holds,
}

impl<'de> DeserializeSeed<'de> for Many<'_, '_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Many<'_, '_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("schemas")
    }
    no_text_in_scalars!(());
    fn visit_str<E: Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if !matches!(self.holds, Holds::Schemas) {
            return Checked.visit_seq(seq);
        }
        while let Some(found) = seq.next_element_seed(SchemaAt(self.skeleton))? {
            self.steps.extend(found.map(Step::Schema));
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if matches!(self.holds, Holds::Schemas) {
            // One schema object in a position that may hold an array of them.
            let found = SchemaAt(self.skeleton).visit_map(map)?;
            self.steps.extend(found.map(Step::Schema));
            return Ok(());
        }
        let mut keys = Keys::default();
        while let Some(Text(key)) = map.next_key()? {
            keys.add(&key)?;
            let found = map.next_value_seed(SchemaAt(self.skeleton))?;
            if matches!(self.holds, Holds::Properties) {
                self.steps.push(Step::Name(key));
            }
            self.steps.extend(found.map(Step::Schema));
        }
        keys.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::fields::schema_fields;
    use crate::search::test_rng::Rng;
    use serde_json::{Value, json};

    const KEYWORDS: &[&str] = &[
        "description",
        "properties",
        "patternProperties",
        "$defs",
        "definitions",
        "dependentSchemas",
        "dependencies",
        "items",
        "prefixItems",
        "allOf",
        "anyOf",
        "oneOf",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "default",
        "examples",
        "enum",
        "title",
        "type",
        "$ref",
    ];
    const TEXTS: &[&str] = &["id", "customer Name", "line\nbreak", "quote \" and \\", "café", "日本", "", "tab\there"];

    fn text(rng: &mut Rng) -> String {
        TEXTS[rng.below(TEXTS.len())].to_owned() + &rng.below(3).to_string()
    }

    /// Any JSON value.
    fn value(rng: &mut Rng, depth: usize) -> Value {
        match if depth == 0 { rng.below(4) } else { rng.below(7) } {
            0 => json!(text(rng)),
            1 => json!(rng.below(100)),
            2 => json!(rng.below(2) == 0),
            3 => Value::Null,
            4 => Value::Array((0..rng.below(4)).map(|_| value(rng, depth - 1)).collect()),
            5 => schema(rng, depth - 1),
            _ => Value::Object((0..rng.below(4)).map(|_| (text(rng), value(rng, depth - 1))).collect()),
        }
    }

    /// A schema-like object: keywords holding what they should, mostly.
    fn schema(rng: &mut Rng, depth: usize) -> Value {
        let mut map = serde_json::Map::new();
        for _ in 0..rng.below(6) {
            let keyword = KEYWORDS[rng.below(KEYWORDS.len())];
            let held = if depth == 0 || rng.below(8) == 0 {
                value(rng, depth.min(1))
            } else {
                match holds(keyword) {
                    Holds::Description => json!(text(rng)),
                    Holds::Properties | Holds::SchemaValues => {
                        Value::Object((0..rng.below(4)).map(|_| (text(rng), schema(rng, depth - 1))).collect())
                    }
                    Holds::Schemas if rng.below(2) == 0 => Value::Array((0..rng.below(4)).map(|_| schema(rng, depth - 1)).collect()),
                    Holds::Schemas | Holds::Schema => schema(rng, depth - 1),
                    Holds::Nothing => value(rng, depth - 1),
                }
            };
            map.insert(keyword.to_owned(), held);
        }
        Value::Object(map)
    }

    fn owned(fields: (Vec<Cow<'_, str>>, Vec<Cow<'_, str>>)) -> (Vec<String>, Vec<String>) {
        (fields.0.into_iter().map(Cow::into_owned).collect(), fields.1.into_iter().map(Cow::into_owned).collect())
    }

    #[test]
    fn fields_read_from_text_equal_the_parsed_values_in_order() {
        let mut rng = Rng(0x5eed_2026_1207_f1e1);
        let mut found = 0;
        for _ in 0..3_000 {
            let schema = if rng.below(10) == 0 { value(&mut rng, 4) } else { schema(&mut rng, 4) };
            let expected = schema_fields(&schema);
            found += expected.0.len() + expected.1.len();
            for text in [schema.to_string(), serde_json::to_string_pretty(&schema).expect("JSON")] {
                assert_eq!(schema_fields_of_text(&text).map(owned), Some(expected.clone()), "{text}");
            }
        }
        // The generator must reach real names and descriptions, not only empty fields.
        assert!(found > 5_000, "only {found} names and descriptions");
    }

    #[test]
    fn text_that_repeats_a_key_or_is_not_one_json_value_is_left_to_the_parser() {
        for text in [
            r#"{"description": "a", "description": "b"}"#,
            r#"{"properties": {"x": {}, "x": {"description": "d"}}}"#,
            r#"{"default": {"k": 1, "k": 2}}"#,
            r#"{"enum": [{"a": 1, "b": 2, "a": 3}]}"#,
            "",
            "  ",
            "{",
            r#"{"a": 1} {"b": 2}"#,
            "[1, 2,]",
            "1e999",
        ] {
            assert!(schema_fields_of_text(text).is_none(), "{text:?}");
        }
        // Many keys: checked by sorting rather than pairwise.
        let many: String = (0..40).map(|i| format!("\"k{}\": 1,", i % 39)).collect();
        assert!(schema_fields_of_text(&format!("{{{many} \"z\": 0}}")).is_none());
        let distinct: String = (0..40).map(|i| format!("\"k{i}\": 1,")).collect();
        assert!(schema_fields_of_text(&format!("{{{distinct} \"z\": 0}}")).is_some());
    }

    #[test]
    fn names_and_descriptions_borrow_the_text_unless_escaped() {
        let text = r#"{"description": "plain", "properties": {"a\u0062": {"description": "x\ny"}, "c": {}}}"#;
        let (names, descriptions) = schema_fields_of_text(text).expect("fields");
        assert!(matches!(&names[..], [Cow::Owned(ab), Cow::Borrowed("c")] if ab == "ab"), "{names:?}");
        assert!(matches!(&descriptions[..], [Cow::Borrowed("plain"), Cow::Owned(xy)] if xy == "x\ny"), "{descriptions:?}");
    }
}
