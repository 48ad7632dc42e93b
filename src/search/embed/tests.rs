use std::path::Path;

use super::*;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolrouter-embed-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn load_err(dir: &Path) -> String {
    Embedder::load(dir).expect_err("load must fail").to_string()
}

#[test]
fn a_missing_directory_or_file_is_named() {
    let dir = scratch("missing");
    assert!(load_err(&dir.join("nope")).contains("nope: not a directory"));
    let e = load_err(&dir);
    assert!(e.contains("config.json: not found"), "{e}");
}

#[test]
fn a_config_that_is_not_bert_is_refused_naming_the_file() {
    let dir = scratch("mpnet");
    std::fs::write(dir.join("config.json"), r#"{"model_type":"mpnet","hidden_size":768,"max_position_embeddings":514}"#).unwrap();
    let e = load_err(&dir);
    assert!(e.contains("config.json") && e.contains("\"mpnet\" is not a BERT model"), "{e}");
    std::fs::write(dir.join("config.json"), "not json").unwrap();
    let e = load_err(&dir);
    assert!(e.contains("config.json: not a model config"), "{e}");
}

/// A copy of the real model directory with one file replaced.
fn model_with(name: &str, file: &str, bytes: &[u8]) -> Option<PathBuf> {
    let Some(model) = test_model_dir() else {
        eprintln!("SKIP: TOOLROUTER_TEST_EMBEDDING_MODEL is not set");
        return None;
    };
    let dir = scratch(name);
    for f in ["config.json", "tokenizer.json", "model.safetensors", "sentence_bert_config.json"] {
        if model.join(f).exists() {
            std::fs::copy(model.join(f), dir.join(f)).unwrap();
        }
    }
    std::fs::write(dir.join(file), bytes).unwrap();
    Some(dir)
}

#[test]
fn weights_of_the_wrong_shape_or_a_broken_tokenizer_are_refused_naming_the_file() {
    let Some(model) = test_model_dir() else {
        eprintln!("SKIP: TOOLROUTER_TEST_EMBEDDING_MODEL is not set");
        return;
    };
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(model.join("config.json")).unwrap()).unwrap();
    config["hidden_size"] = 256.into();
    let dir = model_with("shape", "config.json", config.to_string().as_bytes()).unwrap();
    let e = load_err(&dir);
    assert!(e.contains("model.safetensors: does not fit config.json"), "{e}");

    let dir = model_with("tokenizer", "tokenizer.json", b"{\"broken\": true}").unwrap();
    let e = load_err(&dir);
    assert!(e.contains("tokenizer.json: not a tokenizer"), "{e}");

    let dir = model_with("weights", "model.safetensors", b"garbage").unwrap();
    let e = load_err(&dir);
    assert!(e.contains("model.safetensors"), "{e}");
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let e = load_err(&dir);
    assert!(e.contains("model.safetensors: not found"), "{e}");
}

#[derive(Deserialize)]
struct Reference {
    max_tokens: usize,
    texts: Vec<ReferenceText>,
}

#[derive(Deserialize)]
struct ReferenceText {
    text: String,
    tokens: usize,
    vector: Vec<f32>,
}

/// Vectors computed once by an independent numpy implementation of the same weights
/// (`scripts/embedding_reference.py`). Tolerance: cosine ≥ 0.99999 and every component within
/// 1e-4 (fp32 sums in another order).
#[test]
fn embeddings_match_the_numpy_reference_at_any_batch_size() {
    let Some(dir) = test_model_dir() else {
        eprintln!("SKIP: TOOLROUTER_TEST_EMBEDDING_MODEL is not set");
        return;
    };
    let reference: Reference = serde_json::from_str(include_str!("../../../tests/fixtures/embedding_reference.json")).unwrap();
    let e = Embedder::load(&dir).unwrap();
    assert_eq!(e.max_tokens, reference.max_tokens);
    assert_eq!(e.dims(), 384);
    assert!(e.id().starts_with("sha256:"));
    let texts: Vec<&str> = reference.texts.iter().map(|t| t.text.as_str()).collect();
    let together = e.embed(&texts).unwrap();
    for (i, r) in reference.texts.iter().enumerate() {
        assert_eq!(e.tokens(&r.text).unwrap().len(), r.tokens, "tokens of {:?}", r.text);
        let alone = e.embed(&[&r.text]).unwrap().remove(0);
        for got in [&alone, &together[i]] {
            let cos = dot(got, &r.vector);
            let worst = got.iter().zip(&r.vector).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(cos >= 0.99999 && worst <= 1e-4, "{:?}: cosine {cos}, max difference {worst}", r.text);
        }
    }
}

#[test]
fn meaning_beats_shared_words() {
    let Some(dir) = test_model_dir() else {
        eprintln!("SKIP: TOOLROUTER_TEST_EMBEDDING_MODEL is not set");
        return;
    };
    let e = Embedder::load(&dir).unwrap();
    let v =
        e.embed(&["I need to get from Paris to Rome cheaply", "search flights by origin and destination", "delete a file from the disk"]).unwrap();
    assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]), "{} vs {}", dot(&v[0], &v[1]), dot(&v[0], &v[2]));
}

#[test]
fn text_is_cut_on_a_character_boundary() {
    assert_eq!(cut("héllo", 2), "h");
    assert_eq!(cut("héllo", 3), "hé");
    assert_eq!(cut("abc", 10), "abc");
}
