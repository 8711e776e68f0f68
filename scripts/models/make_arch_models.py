#!/usr/bin/python3
"""Writes the small random-weight GGUF files of tests/data/arch (run with /usr/bin/python3, which
has numpy):

  rand-qwen3-tok512-d256-l2-F16.gguf / -Q8_0.gguf   qwen3: 4 heads of 96 (Q is 384 wide, wider
                                                    than embedding_length / head_count), 2 KV
                                                    heads, ffn 256, Q/K norms, NEOX rope 1e6
  rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf         block 0 of the above alone: its draft
  rand-qwen3moe-e8x4-tok512-d256-l2-Q8_0.gguf       qwen3moe: the same attention, 8 experts of
                                                    width 64, top-4, every block MoE
  rand-phi3-*, rand-mistral3-*                      phi3 and mistral3: arch_phi_mistral.py
  rand-qwen35-*, rand-qwen35moe-*                   qwen35 and qwen35moe: arch_qwen35.py

  rand-gemma3-tok512-d128-l7-F16.gguf               gemma3: 7 layers (0-4 and 6 slide, 5 is
                                                    global), window 16, 4 heads of 48 (key_length,
                                                    Q 192 wide), 1 KV head, ffn 96, Q/K norms,
                                                    post-norms, tied output, global rope 1e6 with
                                                    linear scaling x2 (local layers: 10000)
  rand-gemma3-tok512-d128-l6-draft-Q8_0.gguf        blocks 0-5 of the above: its draft (six, not
                                                    one: ik_llama.cpp's gemma3 graph needs a
                                                    global layer, and layer 5 is the first)
  rand-gemma2-tok512-d32-l26-F16.gguf               gemma2: 26 layers (ik_llama.cpp's gemma2
                                                    graph takes only the 26/42/46-layer shapes),
                                                    even layers slide (window 16), 2 heads of 16,
                                                    1 KV head, ffn 64, attention soft-cap 5 and
                                                    final soft-cap 15 (small, so both bite)

The tensor names and keys are those ik_llama.cpp's loader reads; the tokenizer.* keys are copied
from ../shared/models/synthetic/rand-qwen2-tok512-d256-l2-F16.gguf (tok512 SPM, BOS added).
Weights are Gaussian, seeded per tensor from sha256(seed|name|shape), so the draft shares the
target's block 0 and a rerun writes the same bytes. Block 1 writes to the residual at 0.15 the
scale of block 0 (the 1-layer prefix is a usable draft); output_norm is scaled x4 (logit std ~4).

usage: make_arch_models.py [OUT_DIR] [--shared SHARED_DIR]
"""
import argparse
import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_min as g  # noqa: E402
import arch_phi_mistral  # noqa: E402
import arch_qwen35  # noqa: E402

SEED = 2026
D, N_HEAD, N_KV, HEAD_DIM, FF, VOCAB, CTX = 256, 4, 2, 96, 256, 512, 2048
N_EXPERT, N_USED, FF_EXP = 8, 4, 64
RES_SCALE = [1.0, 0.15]


def randn(name, shape, std, mean=0.0):
    h = hashlib.sha256(f"{SEED}|{name}|{shape}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(h[:8], "little"))
    return (mean + std * rng.standard_normal(shape)).astype(np.float32)


def norm_w(name, n, scale=1.0):
    return scale * randn(name, (n,), 0.1, 1.0)


def tensors(arch, n_layer):
    """(name, numpy array, is_matrix) in file order."""
    out = []
    emb = randn("token_embd.weight", (VOCAB, D), 1.0)
    out.append(("token_embd.weight", emb, True))
    for il in range(n_layer):
        p = f"blk.{il}."
        r = RES_SCALE[il]
        dq, dkv = N_HEAD * HEAD_DIM, N_KV * HEAD_DIM
        out.append((p + "attn_norm.weight", norm_w(p + "attn_norm.weight", D), False))
        out.append((p + "attn_q.weight", randn(p + "attn_q.weight", (dq, D), D**-0.5), True))
        out.append((p + "attn_k.weight", randn(p + "attn_k.weight", (dkv, D), D**-0.5), True))
        out.append((p + "attn_v.weight", randn(p + "attn_v.weight", (dkv, D), D**-0.5), True))
        out.append((p + "attn_output.weight",
                    randn(p + "attn_output.weight", (D, dq), r * dq**-0.5), True))
        # Q/K norm weights around 1.5: peaked, position-dependent attention.
        out.append((p + "attn_q_norm.weight", randn(p + "attn_q_norm.weight", (HEAD_DIM,), 0.3, 1.5), False))
        out.append((p + "attn_k_norm.weight", randn(p + "attn_k_norm.weight", (HEAD_DIM,), 0.3, 1.5), False))
        out.append((p + "ffn_norm.weight", norm_w(p + "ffn_norm.weight", D), False))
        if arch == "qwen3moe":
            out.append((p + "ffn_gate_inp.weight",
                        randn(p + "ffn_gate_inp.weight", (N_EXPERT, D), 3 * D**-0.5), False))
            out.append((p + "ffn_gate_exps.weight",
                        randn(p + "ffn_gate_exps.weight", (N_EXPERT, FF_EXP, D), D**-0.5), True))
            out.append((p + "ffn_up_exps.weight",
                        randn(p + "ffn_up_exps.weight", (N_EXPERT, FF_EXP, D), D**-0.5), True))
            out.append((p + "ffn_down_exps.weight",
                        randn(p + "ffn_down_exps.weight", (N_EXPERT, D, FF_EXP), r * FF_EXP**-0.5), True))
        else:
            out.append((p + "ffn_gate.weight", randn(p + "ffn_gate.weight", (FF, D), D**-0.5), True))
            out.append((p + "ffn_up.weight", randn(p + "ffn_up.weight", (FF, D), D**-0.5), True))
            out.append((p + "ffn_down.weight", randn(p + "ffn_down.weight", (D, FF), r * FF**-0.5), True))
    out.append(("output_norm.weight", norm_w("output_norm.weight", D, 4.0), False))
    outw = randn("output.weight", (VOCAB, D), D**-0.5)
    outw *= np.exp(randn("output.rownorm", (VOCAB, 1), 0.25))
    out.append(("output.weight", outw, True))
    return out


def write(path, arch, n_layer, wtype, name, vocab_kv):
    w = g.Writer()
    a = arch + "."
    w.add("general.architecture", g.T_STR, arch)
    w.add("general.name", g.T_STR, name)
    w.add(a + "context_length", g.T_U32, CTX)
    w.add(a + "embedding_length", g.T_U32, D)
    w.add(a + "block_count", g.T_U32, n_layer)
    w.add(a + "feed_forward_length", g.T_U32, FF)
    w.add(a + "attention.head_count", g.T_U32, N_HEAD)
    w.add(a + "attention.head_count_kv", g.T_U32, N_KV)
    w.add(a + "attention.key_length", g.T_U32, HEAD_DIM)
    w.add(a + "attention.value_length", g.T_U32, HEAD_DIM)
    w.add(a + "attention.layer_norm_rms_epsilon", g.T_F32, 1e-6)
    w.add(a + "rope.freq_base", g.T_F32, 1e6)
    if arch == "qwen3moe":
        w.add(a + "expert_count", g.T_U32, N_EXPERT)
        w.add(a + "expert_used_count", g.T_U32, N_USED)
        w.add(a + "expert_feed_forward_length", g.T_U32, FF_EXP)
        w.add(a + "expert_weights_norm", g.T_BOOL, True)
    w.add(a + "vocab_size", g.T_U32, VOCAB)
    for k, (t, v) in vocab_kv.items():
        w.add(k, t, v)
    w.add("general.quantization_version", g.T_U32, 2)
    w.add("general.file_type", g.T_U32, {g.GGML_F16: 1, g.GGML_Q8_0: 7}[wtype])
    for tname, arr, is_matrix in tensors(arch, n_layer):
        w.tensor(tname, arr, wtype if is_matrix else g.GGML_F32)
    w.write(path)
    print(path, os.path.getsize(path), "bytes")


# gemma: (n_embd, n_head, n_kv, head_dim, ff, window)
GEMMA = {"gemma3": (128, 4, 1, 48, 96, 16), "gemma2": (32, 2, 1, 16, 64, 16)}


def gemma_tensors(arch, n_layer):
    """Gemma's tensors: no output.weight (tied to token_embd). Its post-norms set the scale each
    block adds to the residual: layer 0 at 1, later ones at 0.3 (gemma3) or 0.25 (gemma2).
    output_norm is centred on 0 (std 5): with the output tied to token_embd, a norm centred on 1
    would make every token predict itself."""
    d, nh, nkv, hd, ff, _ = GEMMA[arch]
    pre = arch + "|"  # seeds of their own, apart from qwen3's
    out = [("token_embd.weight", randn(pre + "token_embd.weight", (VOCAB, d), d**-0.5), True)]
    dq, dkv = nh * hd, nkv * hd
    q_std = 1.0 if arch == "gemma3" else 2.0  # gemma2 has no Q/K norm: peaked scores from Wq
    for il in range(n_layer):
        p = f"blk.{il}."
        r = 1.0 if il == 0 else (0.3 if arch == "gemma3" else 0.25)
        mats = [("attn_q", (dq, d), q_std * d**-0.5), ("attn_k", (dkv, d), d**-0.5),
                ("attn_v", (dkv, d), d**-0.5), ("attn_output", (d, dq), dq**-0.5)]
        out.append((p + "attn_norm.weight", norm_w(pre + p + "attn_norm.weight", d), False))
        for n, shape, std in mats:
            out.append((p + n + ".weight", randn(pre + p + n, shape, std), True))
        if arch == "gemma3":
            for n in ("attn_q_norm", "attn_k_norm"):
                out.append((p + n + ".weight", randn(pre + p + n, (hd,), 0.2, 1.1), False))
        out.append((p + "post_attention_norm.weight",
                    norm_w(pre + p + "post_attention_norm", d, r), False))
        out.append((p + "ffn_norm.weight", norm_w(pre + p + "ffn_norm.weight", d), False))
        out.append((p + "ffn_gate.weight", randn(pre + p + "ffn_gate", (ff, d), d**-0.5), True))
        out.append((p + "ffn_up.weight", randn(pre + p + "ffn_up", (ff, d), d**-0.5), True))
        out.append((p + "ffn_down.weight", randn(pre + p + "ffn_down", (d, ff), ff**-0.5), True))
        out.append((p + "post_ffw_norm.weight", norm_w(pre + p + "post_ffw_norm", d, r), False))
    out.append(("output_norm.weight", randn(pre + "output_norm.weight", (d,), 5.0), False))
    return out


def write_gemma(path, arch, n_layer, wtype, name, vocab_kv):
    d, nh, nkv, hd, ff, window = GEMMA[arch]
    w = g.Writer()
    a = arch + "."
    w.add("general.architecture", g.T_STR, arch)
    w.add("general.name", g.T_STR, name)
    w.add(a + "context_length", g.T_U32, CTX)
    w.add(a + "embedding_length", g.T_U32, d)
    w.add(a + "block_count", g.T_U32, n_layer)
    w.add(a + "feed_forward_length", g.T_U32, ff)
    w.add(a + "attention.head_count", g.T_U32, nh)
    w.add(a + "attention.head_count_kv", g.T_U32, nkv)
    w.add(a + "attention.key_length", g.T_U32, hd)
    w.add(a + "attention.value_length", g.T_U32, hd)
    w.add(a + "attention.layer_norm_rms_epsilon", g.T_F32, 1e-6)
    w.add(a + "attention.sliding_window", g.T_U32, window)
    if arch == "gemma3":
        w.add(a + "rope.freq_base", g.T_F32, 1e6)
        w.add(a + "rope.scaling.type", g.T_STR, "linear")
        w.add(a + "rope.scaling.factor", g.T_F32, 2.0)
    else:
        w.add(a + "attn_logit_softcapping", g.T_F32, 5.0)
        w.add(a + "final_logit_softcapping", g.T_F32, 15.0)
    w.add(a + "vocab_size", g.T_U32, VOCAB)
    for k, (t, v) in vocab_kv.items():
        w.add(k, t, v)
    w.add("general.quantization_version", g.T_U32, 2)
    w.add("general.file_type", g.T_U32, {g.GGML_F16: 1, g.GGML_Q8_0: 7}[wtype])
    for tname, arr, is_matrix in gemma_tensors(arch, n_layer):
        w.tensor(tname, arr, wtype if is_matrix else g.GGML_F32)
    w.write(path)
    print(path, os.path.getsize(path), "bytes")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=os.path.join(here, "../../tests/data/arch"))
    ap.add_argument("--shared", default=os.path.join(here, "../../../shared"))
    args = ap.parse_args()
    src = os.path.join(args.shared, "models/synthetic/rand-qwen2-tok512-d256-l2-F16.gguf")
    vocab = {k: v for k, v in g.read_metadata(src).items() if k.startswith("tokenizer.")}
    os.makedirs(args.out, exist_ok=True)
    o = args.out
    write(f"{o}/rand-qwen3-tok512-d256-l2-F16.gguf", "qwen3", 2, g.GGML_F16,
          "rand-qwen3-tok512-d256-l2", vocab)
    write(f"{o}/rand-qwen3-tok512-d256-l2-Q8_0.gguf", "qwen3", 2, g.GGML_Q8_0,
          "rand-qwen3-tok512-d256-l2", vocab)
    write(f"{o}/rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf", "qwen3", 1, g.GGML_Q8_0,
          "rand-qwen3-tok512-d256-l1-draft", vocab)
    write(f"{o}/rand-qwen3moe-e8x4-tok512-d256-l2-Q8_0.gguf", "qwen3moe", 2, g.GGML_Q8_0,
          "rand-qwen3moe-e8x4-tok512-d256-l2", vocab)
    write_gemma(f"{o}/rand-gemma3-tok512-d128-l7-F16.gguf", "gemma3", 7, g.GGML_F16,
                "rand-gemma3-tok512-d128-l7", vocab)
    write_gemma(f"{o}/rand-gemma3-tok512-d128-l6-draft-Q8_0.gguf", "gemma3", 6, g.GGML_Q8_0,
                "rand-gemma3-tok512-d128-l6-draft", vocab)
    write_gemma(f"{o}/rand-gemma2-tok512-d32-l26-F16.gguf", "gemma2", 26, g.GGML_F16,
                "rand-gemma2-tok512-d32-l26", vocab)
    arch_phi_mistral.write_all(o, vocab, randn)  # phi3, mistral3 (see arch_phi_mistral.py)
    arch_qwen35.write_all(o, vocab, randn)  # qwen35, qwen35moe (see arch_qwen35.py)


if __name__ == "__main__":
    main()
