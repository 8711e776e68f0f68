#!/usr/bin/python3
"""Writes the random-weight benchmark targets of issue 23's speed table (run with /usr/bin/python3,
which has numpy). Random weights are fine for pass costs: every matrix is read as a real file's
would be, and the router of a MoE spreads tokens over the experts about uniformly.

  qwen3moe-e64x8-d1536-l12-Q8_0.gguf   qwen3moe: 64 experts of width 512, top-8; 12 layers of
                                       d1536, 12 heads of 128 (4 KV heads); ~1.9B weights in
                                       all, ~0.33B read per token
  gemma3-d1152-l26-Q8_0.gguf           gemma3 shaped as Gemma 3 1B: 26 layers of d1152, 4 heads
                                       of 256 (1 KV head), FFN 6912 (GeGLU), every 6th layer
                                       global, the others a 512-token window; ~0.7B weights
  qwen35-mtp1-d2048-l16-Q8_0.gguf      qwen35 (Qwen3.5 dense hybrid) shaped as its ~2B model:
                                       16 layers of d2048, every 4th gated full attention (8
                                       heads of 256, 2 KV heads, rope on 64), the others Gated
                                       DeltaNet (16 key and 16 value heads of 128), FFN 6144,
                                       plus one MTP layer with its FFN (blk.16); ~1.0B weights

The vocabulary is ../shared's 512-token SentencePiece one (tok512), so the files pair with the
repository's small drafts and any tokenizer-free benchmark (`specula bench`, `llama-bench`).

usage: make_bench_models.py OUT_DIR [--arch qwen3moe|gemma3|qwen35] [--shared SHARED_DIR]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_min as g  # noqa: E402
import arch_qwen35  # noqa: E402

RNG = np.random.default_rng(23)


def randn(shape, std, mean=0.0):
    return (mean + std * RNG.standard_normal(shape, dtype=np.float32)).astype(np.float32)


def qwen3moe_spec():
    return dict(arch="qwen3moe", d=1536, n_layer=12, n_head=12, n_kv=4, head_dim=128, ff=4096,
                n_expert=64, n_used=8, ff_exp=512)


def write_qwen3moe(path, vocab_kv, s):
    d, hd, L = s["d"], s["head_dim"], s["n_layer"]
    dq, dkv, E, F = s["n_head"] * hd, s["n_kv"] * hd, s["n_expert"], s["ff_exp"]
    vocab = 512
    w = g.Writer()
    a = "qwen3moe."
    w.add("general.architecture", g.T_STR, "qwen3moe")
    w.add("general.name", g.T_STR, os.path.basename(path)[:-5])
    for key, val in [("context_length", 32768), ("embedding_length", d), ("block_count", L),
                     ("feed_forward_length", s["ff"]), ("attention.head_count", s["n_head"]),
                     ("attention.head_count_kv", s["n_kv"]), ("attention.key_length", hd),
                     ("attention.value_length", hd), ("expert_count", E),
                     ("expert_used_count", s["n_used"]), ("expert_feed_forward_length", F),
                     ("vocab_size", vocab)]:
        w.add(a + key, g.T_U32, val)
    w.add(a + "attention.layer_norm_rms_epsilon", g.T_F32, 1e-6)
    w.add(a + "rope.freq_base", g.T_F32, 1e6)
    w.add(a + "expert_weights_norm", g.T_BOOL, True)
    for k, (t, v) in vocab_kv.items():
        w.add(k, t, v)
    w.add("general.quantization_version", g.T_U32, 2)
    w.add("general.file_type", g.T_U32, 7)
    q8 = g.GGML_Q8_0
    w.tensor("token_embd.weight", randn((vocab, d), 1.0), q8)
    for il in range(L):
        p = f"blk.{il}."
        w.tensor(p + "attn_norm.weight", randn((d,), 0.1, 1.0), g.GGML_F32)
        w.tensor(p + "attn_q.weight", randn((dq, d), d**-0.5), q8)
        w.tensor(p + "attn_k.weight", randn((dkv, d), d**-0.5), q8)
        w.tensor(p + "attn_v.weight", randn((dkv, d), d**-0.5), q8)
        w.tensor(p + "attn_output.weight", randn((d, dq), dq**-0.5), q8)
        w.tensor(p + "attn_q_norm.weight", randn((hd,), 0.1, 1.0), g.GGML_F32)
        w.tensor(p + "attn_k_norm.weight", randn((hd,), 0.1, 1.0), g.GGML_F32)
        w.tensor(p + "ffn_norm.weight", randn((d,), 0.1, 1.0), g.GGML_F32)
        w.tensor(p + "ffn_gate_inp.weight", randn((E, d), d**-0.5), g.GGML_F32)
        w.tensor(p + "ffn_gate_exps.weight", randn((E, F, d), d**-0.5), q8)
        w.tensor(p + "ffn_up_exps.weight", randn((E, F, d), d**-0.5), q8)
        w.tensor(p + "ffn_down_exps.weight", randn((E, d, F), F**-0.5), q8)
        print(f"  layer {il + 1}/{L}", flush=True)
    w.tensor("output_norm.weight", randn((d,), 0.1, 1.0), g.GGML_F32)
    w.tensor("output.weight", randn((vocab, d), d**-0.5), q8)
    w.write(path)
    print(path, os.path.getsize(path), "bytes")


def gemma3_spec():
    return dict(d=1152, n_layer=26, n_head=4, n_kv=1, head_dim=256, ff=6912, window=512)


def write_gemma3(path, vocab_kv, s):
    d, hd, L, ff = s["d"], s["head_dim"], s["n_layer"], s["ff"]
    dq, dkv, vocab = s["n_head"] * hd, s["n_kv"] * hd, 512
    w = g.Writer()
    a = "gemma3."
    w.add("general.architecture", g.T_STR, "gemma3")
    w.add("general.name", g.T_STR, os.path.basename(path)[:-5])
    for key, val in [("context_length", 32768), ("embedding_length", d), ("block_count", L),
                     ("feed_forward_length", ff), ("attention.head_count", s["n_head"]),
                     ("attention.head_count_kv", s["n_kv"]), ("attention.key_length", hd),
                     ("attention.value_length", hd), ("attention.sliding_window", s["window"]),
                     ("vocab_size", vocab)]:
        w.add(a + key, g.T_U32, val)
    w.add(a + "attention.layer_norm_rms_epsilon", g.T_F32, 1e-6)
    w.add(a + "rope.freq_base", g.T_F32, 1e6)
    for k, (t, v) in vocab_kv.items():
        w.add(k, t, v)
    w.add("general.quantization_version", g.T_U32, 2)
    w.add("general.file_type", g.T_U32, 7)
    q8, f32 = g.GGML_Q8_0, g.GGML_F32
    w.tensor("token_embd.weight", randn((vocab, d), d**-0.5), q8)  # tied: also the output
    for il in range(L):
        p = f"blk.{il}."
        w.tensor(p + "attn_norm.weight", randn((d,), 0.1, 1.0), f32)
        w.tensor(p + "attn_q.weight", randn((dq, d), d**-0.5), q8)
        w.tensor(p + "attn_k.weight", randn((dkv, d), d**-0.5), q8)
        w.tensor(p + "attn_v.weight", randn((dkv, d), d**-0.5), q8)
        w.tensor(p + "attn_output.weight", randn((d, dq), dq**-0.5), q8)
        w.tensor(p + "attn_q_norm.weight", randn((hd,), 0.1, 1.0), f32)
        w.tensor(p + "attn_k_norm.weight", randn((hd,), 0.1, 1.0), f32)
        w.tensor(p + "post_attention_norm.weight", randn((d,), 0.1, 0.3), f32)
        w.tensor(p + "ffn_norm.weight", randn((d,), 0.1, 1.0), f32)
        w.tensor(p + "ffn_gate.weight", randn((ff, d), d**-0.5), q8)
        w.tensor(p + "ffn_up.weight", randn((ff, d), d**-0.5), q8)
        w.tensor(p + "ffn_down.weight", randn((d, ff), ff**-0.5), q8)
        w.tensor(p + "post_ffw_norm.weight", randn((d,), 0.1, 0.3), f32)
    w.tensor("output_norm.weight", randn((d,), 1.0), f32)
    w.write(path)
    print(path, os.path.getsize(path), "bytes")


def write_qwen35(out_dir, vocab_kv):
    # arch_qwen35 writes the test files; its module constants set the shape.
    q = arch_qwen35
    q.D, q.FF, q.CTX = 2048, 6144, 16384
    q.N_HEAD, q.N_KV, q.HEAD_DIM, q.N_ROT = 8, 2, 256, 64
    q.D_STATE = 128
    q.SHAPE = dict(q.SHAPE, qwen35=(16, 16, 4))
    n_main = 16
    name = f"qwen35-mtp1-d{q.D}-l{n_main}-Q8_0"

    def rn(name, shape, std, mean=0.0):
        return randn(shape, std, mean)

    q.write(os.path.join(out_dir, name + ".gguf"), "qwen35", n_main + 1, g.GGML_Q8_0, name,
            vocab_kv, rn, [11, 11, 10, 0], n_nextn=1, mtp_ffn=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", default="qwen3moe", choices=["qwen3moe", "gemma3", "qwen35"])
    ap.add_argument("--shared", default=os.path.join(here, "../../../shared"))
    args = ap.parse_args()
    src = os.path.join(args.shared, "models/synthetic/rand-qwen2-tok512-d256-l2-F16.gguf")
    vocab = {k: v for k, v in g.read_metadata(src).items() if k.startswith("tokenizer.")}
    os.makedirs(args.out, exist_ok=True)
    if args.arch == "qwen35":
        write_qwen35(args.out, vocab)
        return
    if args.arch == "gemma3":
        s = gemma3_spec()
        write_gemma3(os.path.join(args.out, f"gemma3-d{s['d']}-l{s['n_layer']}-Q8_0.gguf"), vocab, s)
        return
    s = qwen3moe_spec()
    name = f"qwen3moe-e{s['n_expert']}x{s['n_used']}-d{s['d']}-l{s['n_layer']}-Q8_0.gguf"
    write_qwen3moe(os.path.join(args.out, name), vocab, s)


if __name__ == "__main__":
    main()
