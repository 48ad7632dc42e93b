//! Sentence embeddings for hybrid search (`--embedding-model DIR`): a sentence-transformers
//! BERT-family model (`config.json`, `tokenizer.json`, `model.safetensors`) run in process by
//! candle, mean-pooled over the tokens and L2-normalized, so a dot product is a cosine.
//!
//! Nothing is downloaded: the directory holds everything. A text is truncated at the model's
//! `max_seq_length` (`sentence_bert_config.json`, else 256) and never padded alone; batches
//! are sorted by length and padded to their longest text only, which keeps padding small.

use std::path::{Path, PathBuf};

use candle_core::{D, DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokenizers::{Tokenizer, TruncationParams};

/// Texts per forward pass: length-sorted batches of 16 were the fastest measured on 2 cores
/// (64 was slower than one text at a time: the activations outgrow the caches).
pub const BATCH: usize = 16;
/// Truncation when the directory has no `sentence_bert_config.json`.
const DEFAULT_MAX_TOKENS: usize = 256;
/// Texts longer than this many bytes are cut (on a character boundary) before tokenizing:
/// 256 tokens never need more, and a huge description must not cost a huge tokenization.
const MAX_TEXT_BYTES: usize = 8 * 1024;

/// Why a model directory could not be loaded or a text not embedded. Load errors name the
/// file at fault.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedding model {file}: {reason}")]
    File { file: PathBuf, reason: String },
    #[error("embedding inference failed: {0}")]
    Inference(String),
}

fn file_error(file: &Path, reason: impl std::fmt::Display) -> EmbedError {
    EmbedError::File { file: file.to_path_buf(), reason: reason.to_string() }
}

fn inference(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Inference(e.to_string())
}

/// The fields of `config.json` we check before handing it to candle.
#[derive(Deserialize)]
struct ConfigHead {
    model_type: Option<String>,
    #[serde(default)]
    architectures: Vec<String>,
    hidden_size: usize,
    max_position_embeddings: usize,
}

#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

/// A loaded model: immutable, shared by every search and the background embedder.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    dims: usize,
    max_tokens: usize,
    id: String,
    file_bytes: u64,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("id", &self.id).field("dims", &self.dims).field("max_tokens", &self.max_tokens).finish()
    }
}

fn read(file: &Path) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            file_error(file, "not found (a sentence-transformers BERT model directory holds config.json, tokenizer.json and model.safetensors)")
        }
        _ => file_error(file, e),
    })
}

impl Embedder {
    /// Loads and checks a model directory. Every failure names its file.
    pub fn load(dir: &Path) -> Result<Embedder, EmbedError> {
        if !dir.is_dir() {
            return Err(file_error(dir, "not a directory"));
        }
        let config_path = dir.join("config.json");
        let config_bytes = read(&config_path)?;
        let head: ConfigHead = serde_json::from_slice(&config_bytes).map_err(|e| file_error(&config_path, format!("not a model config: {e}")))?;
        let is_bert = match head.model_type.as_deref() {
            Some(t) => t == "bert",
            None => head.architectures.iter().any(|a| a.starts_with("Bert")),
        };
        if !is_bert {
            let kind = head.model_type.as_deref().unwrap_or("unknown");
            return Err(file_error(
                &config_path,
                format!("model_type {kind:?} is not a BERT model (only BERT-family sentence-transformers models are supported)"),
            ));
        }
        let config: BertConfig = serde_json::from_slice(&config_bytes).map_err(|e| file_error(&config_path, format!("not a BERT config: {e}")))?;

        let pooling_path = dir.join("1_Pooling").join("config.json");
        if pooling_path.exists() {
            let pooling: PoolingConfig =
                serde_json::from_slice(&read(&pooling_path)?).map_err(|e| file_error(&pooling_path, format!("not a pooling config: {e}")))?;
            if !pooling.pooling_mode_mean_tokens {
                return Err(file_error(&pooling_path, "only mean pooling is supported (pooling_mode_mean_tokens is not true)"));
            }
        }
        let st_path = dir.join("sentence_bert_config.json");
        let max_tokens = if st_path.exists() {
            let st: SentenceBertConfig =
                serde_json::from_slice(&read(&st_path)?).map_err(|e| file_error(&st_path, format!("not a sentence-transformers config: {e}")))?;
            st.max_seq_length.unwrap_or(DEFAULT_MAX_TOKENS)
        } else {
            DEFAULT_MAX_TOKENS
        }
        .min(head.max_position_embeddings);
        if max_tokens < 2 {
            return Err(file_error(&st_path, format!("max_seq_length {max_tokens} leaves no room for text")));
        }

        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer_bytes = read(&tokenizer_path)?;
        let mut tokenizer = Tokenizer::from_bytes(&tokenizer_bytes).map_err(|e| file_error(&tokenizer_path, format!("not a tokenizer: {e}")))?;
        // The file pads and truncates to 128; we truncate where the model was trained to and
        // pad batches ourselves.
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: max_tokens, ..Default::default() }))
            .map_err(|e| file_error(&tokenizer_path, e))?;
        tokenizer.with_padding(None);

        let weights_path = dir.join("model.safetensors");
        let weights = read(&weights_path)?;
        let file_bytes = weights.len() as u64;
        let mut hash = Sha256::new();
        for part in [&config_bytes, &tokenizer_bytes, &weights] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
        let id = format!("sha256:{}", hex(&hash.finalize()));
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu).map_err(|e| file_error(&weights_path, e))?;
        let model = BertModel::load(vb, &config).map_err(|e| file_error(&weights_path, format!("does not fit config.json: {e}")))?;
        let embedder = Embedder { model, tokenizer, dims: head.hidden_size, max_tokens, id, file_bytes };
        // One pass proves the weights and tokenizer work together (e.g. a vocabulary larger
        // than the embedding table fails here, not on the first search).
        embedder.embed(&["a"]).map_err(|e| file_error(&weights_path, e))?;
        Ok(embedder)
    }

    /// The model's identity: a hash of its config, tokenizer and weights. Stored embeddings
    /// are keyed by it, so another model never reuses them.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Length of every vector.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Size of `model.safetensors`.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Token ids of a text, truncated.
    fn tokens(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let text = cut(text, MAX_TEXT_BYTES);
        let enc = self.tokenizer.encode(text, true).map_err(inference)?;
        Ok(enc.get_ids().to_vec())
    }

    /// Unit vectors of `texts`, in their order. Batched by length internally (batches of
    /// [`BATCH`]); a text's vector does not depend on the others beyond float rounding.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let ids = texts.iter().map(|t| self.tokens(t)).collect::<Result<Vec<_>, _>>()?;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| (ids[i].len(), i));
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            for (&i, v) in chunk.iter().zip(self.forward(&batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// One padded forward pass, mean pooling over the real tokens, L2 normalization.
    fn forward(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let len = batch.iter().map(|b| b.len()).max().unwrap_or(0).max(1);
        let mut input = Vec::with_capacity(batch.len() * len);
        let mut mask = Vec::with_capacity(batch.len() * len);
        for ids in batch {
            input.extend_from_slice(ids);
            input.resize(input.len() + len - ids.len(), 0);
            mask.extend(std::iter::repeat_n(1u32, ids.len()));
            mask.resize(mask.len() + len - ids.len(), 0);
        }
        let shape = (batch.len(), len);
        let input = Tensor::from_vec(input, shape, &Device::Cpu).map_err(inference)?;
        let mask = Tensor::from_vec(mask, shape, &Device::Cpu).map_err(inference)?;
        let types = input.zeros_like().map_err(inference)?;
        let hidden = self.model.forward(&input, &types, Some(&mask)).map_err(inference)?;
        let pooled = (|| {
            let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let sum = hidden.broadcast_mul(&m)?.sum(1)?;
            let count = m.sum(1)?.clamp(1e-9, f64::MAX)?;
            let mean = sum.broadcast_div(&count)?;
            let norm = mean.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
            mean.broadcast_div(&norm)?.to_vec2::<f32>()
        })()
        .map_err(inference)?;
        Ok(pooled)
    }
}

/// At most `max` bytes of `text`, cut on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Dot product of two vectors of equal length (a cosine for unit vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The model directory named by `TOOLROUTER_TEST_EMBEDDING_MODEL` (tests and benches: CI
/// unpacks the PyPI package there), if set and present.
pub fn test_model_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("TOOLROUTER_TEST_EMBEDDING_MODEL")?);
    dir.join("model.safetensors").exists().then_some(dir)
}

#[cfg(test)]
mod tests;
