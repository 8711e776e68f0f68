#!/usr/bin/python3
"""Writes a random-weight qwen3 model that carries a real tokenizer: the tokenizer.* keys (and the
chat template) of a vocabulary GGUF such as ../shared/vocab/ggml-vocab-qwen3.gguf (151,936
tokens). Run with /usr/bin/python3, which has numpy.

Two uses:
  * tests: a tiny target and its draft with Qwen3's vocabulary, template and special tokens, so
    that an agent loop (tools, tool results, reasoning tags) runs through the real tokenizer and
    the real template, with and without speculation:
        make_vocab_model.py VOCAB.gguf OUT.gguf --layers 2            (target)
        make_vocab_model.py VOCAB.gguf DRAFT.gguf --layers 1          (its block 0 alone)
  * costs: a file shaped as Qwen3-0.6B (28 layers of d1024, 16 heads of 128, 8 KV heads, FFN
    3072, tied embeddings) to time a target pass beside the 152k-token grammar mask:
        make_vocab_model.py VOCAB.gguf q06b.gguf --shape qwen3-0.6b --type q8_0

Weights are Gaussian, seeded per tensor from sha256(seed|name|shape): a file with fewer layers is
the prefix of one with more (a usable draft), and a rerun writes the same bytes. Blocks after
the first write to the residual at 0.15 the scale of block 0. The output is tied to the token
embedding (no output.weight), as in the small Qwen3 models.
"""
import argparse
import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_min as g  # noqa: E402

SEED = 2512
SHAPES = {
    # d, n_head, n_kv, head_dim, ff
    "tiny": (64, 2, 1, 32, 128),
    "qwen3-0.6b": (1024, 16, 8, 128, 3072),
}


def randn(name, shape, std, mean=0.0):
    h = hashlib.sha256(f"{SEED}|{name}|{shape}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(h[:8], "little"))
    return (mean + std * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)


def tensors(n_vocab, n_layer, shape):
    d, n_head, n_kv, hd, ff = shape
    yield "token_embd.weight", randn("token_embd.weight", (n_vocab, d), 1.0), True
    for il in range(n_layer):
        p = f"blk.{il}."
        r = 1.0 if il == 0 else 0.15
        dq, dkv = n_head * hd, n_kv * hd
        yield p + "attn_norm.weight", randn(p + "attn_norm", (d,), 0.1, 1.0), False
        yield p + "attn_q.weight", randn(p + "attn_q", (dq, d), d**-0.5), True
        yield p + "attn_k.weight", randn(p + "attn_k", (dkv, d), d**-0.5), True
        yield p + "attn_v.weight", randn(p + "attn_v", (dkv, d), d**-0.5), True
        yield p + "attn_output.weight", randn(p + "attn_output", (d, dq), r * dq**-0.5), True
        yield p + "attn_q_norm.weight", randn(p + "attn_q_norm", (hd,), 0.3, 1.5), False
        yield p + "attn_k_norm.weight", randn(p + "attn_k_norm", (hd,), 0.3, 1.5), False
        yield p + "ffn_norm.weight", randn(p + "ffn_norm", (d,), 0.1, 1.0), False
        yield p + "ffn_gate.weight", randn(p + "ffn_gate", (ff, d), d**-0.5), True
        yield p + "ffn_up.weight", randn(p + "ffn_up", (ff, d), d**-0.5), True
        yield p + "ffn_down.weight", randn(p + "ffn_down", (d, ff), r * ff**-0.5), True
    # Scaled so that the tied output's logits have a std of a few units.
    yield "output_norm.weight", randn("output_norm", (d,), 0.1, 4.0 * d**-0.5), False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("vocab", help="a GGUF whose tokenizer.* keys are copied")
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=None, help="default: 2 (tiny), 28 (qwen3-0.6b)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--type", choices=["f16", "q8_0"], default="f16")
    args = ap.parse_args()
    shape = SHAPES[args.shape]
    n_layer = args.layers or (2 if args.shape == "tiny" else 28)
    meta = g.read_metadata(args.vocab)
    toks = meta.get("tokenizer.ggml.tokens")
    if toks is None:
        sys.exit(f"make_vocab_model.py: {args.vocab} has no tokenizer.ggml.tokens")
    n_vocab = len(toks[1][1])
    d, n_head, n_kv, hd, ff = shape
    wtype = {"f16": g.GGML_F16, "q8_0": g.GGML_Q8_0}[args.type]

    w = g.Writer()
    a = "qwen3."
    w.add("general.architecture", g.T_STR, "qwen3")
    w.add("general.name", g.T_STR, f"rand-qwen3-{args.shape}-l{n_layer}")
    w.add(a + "context_length", g.T_U32, 40960)
    w.add(a + "embedding_length", g.T_U32, d)
    w.add(a + "block_count", g.T_U32, n_layer)
    w.add(a + "feed_forward_length", g.T_U32, ff)
    w.add(a + "attention.head_count", g.T_U32, n_head)
    w.add(a + "attention.head_count_kv", g.T_U32, n_kv)
    w.add(a + "attention.key_length", g.T_U32, hd)
    w.add(a + "attention.value_length", g.T_U32, hd)
    w.add(a + "attention.layer_norm_rms_epsilon", g.T_F32, 1e-6)
    w.add(a + "rope.freq_base", g.T_F32, 1e6)
    for k, (t, v) in meta.items():
        if k.startswith("tokenizer."):
            w.add(k, t, v)
    w.add("general.quantization_version", g.T_U32, 2)
    w.add("general.file_type", g.T_U32, {g.GGML_F16: 1, g.GGML_Q8_0: 7}[wtype])
    for name, arr, is_matrix in tensors(n_vocab, n_layer, shape):
        w.tensor(name, arr, wtype if is_matrix else g.GGML_F32)
    tmp = args.out + ".part"
    w.write(tmp)
    os.replace(tmp, args.out)
    print(args.out, os.path.getsize(args.out), "bytes")


if __name__ == "__main__":
    main()
