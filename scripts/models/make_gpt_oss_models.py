#!/usr/bin/python3
"""Writes the small random-weight gpt-oss GGUF file of tests/data/arch (run with /usr/bin/python3,
which has numpy):

  rand-gpt-oss-e8x4-tok512-d256-l2-MXFP4.gguf   gpt-oss: 2 blocks (0 attends within a sliding
                                               window of 8 keys, 1 to all keys),
                                               4 heads of 64, 2 KV heads, Q/K/V/output biases,
                                               attention sinks, NEOX rope 150000 with YaRN
                                               (factor 32 over 4096), 8 experts of width 64,
                                               top-4, with biases; the experts in MXFP4 (as the
                                               released files), the other matrices F16

The tensor names and keys are those ik_llama.cpp's loader reads for gpt-oss (LLM_ARCH_OPENAI_MOE;
the FFN norm is blk.N.post_attention_norm); the tokenizer.* keys are copied from
../shared/models/synthetic/rand-qwen2-tok512-d256-l2-F16.gguf (tok512 SPM, BOS added), as
make_arch_models.py does for qwen3. The window of 8 is far below the real 128 so the test prompts
cross it. The router's logits are spread wide (std ~6) and the experts' gate/up are ~unit
gain, so a near-tie between the 4th and 5th expert moves little weight: with the activations'
rounding differing from ik_llama.cpp's (Q8_0 here, its own 8-bit formats there), a more chaotic
model (4 blocks, Q8_0 attention, gate/up at 2x) drifted past the 0.5 logit tolerance while the
same architecture with F32 weights matched ik_llama.cpp to 3e-4. Weights are Gaussian, seeded per tensor from sha256(seed|name|shape): a rerun writes the
same bytes.

usage: make_gpt_oss_models.py [OUT_DIR] [--shared SHARED_DIR]
"""
import argparse
import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_min as g  # noqa: E402

SEED = 2027
ARCH = "gpt-oss"
D, N_HEAD, N_KV, HEAD_DIM, VOCAB, CTX = 256, 4, 2, 64, 512, 4096
N_LAYER, N_SWA = 2, 8
N_EXPERT, N_USED, FF_EXP = 8, 4, 64
ROPE_BASE, YARN_FACTOR, YARN_ORIG_CTX = 150000.0, 32.0, 4096
RES_SCALE = [1.0, 0.5]
FTYPE_MXFP4_MOE = 38


def randn(name, shape, std, mean=0.0):
    h = hashlib.sha256(f"{SEED}|{name}|{shape}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(h[:8], "little"))
    return (mean + std * rng.standard_normal(shape)).astype(np.float32)


def norm_w(name, n, scale=1.0):
    return scale * randn(name, (n,), 0.1, 1.0)


def tensors():
    """(name, numpy array, ggml type) in file order."""
    f16, f32, mx = g.GGML_F16, g.GGML_F32, g.GGML_MXFP4
    out = [("token_embd.weight", randn("token_embd.weight", (VOCAB, D), 1.0), f16)]
    dq, dkv = N_HEAD * HEAD_DIM, N_KV * HEAD_DIM
    for il in range(N_LAYER):
        p = f"blk.{il}."
        r = RES_SCALE[il]

        def add(name, shape, std, typ, mean=0.0):
            out.append((p + name, randn(p + name, shape, std, mean), typ))

        out.append((p + "attn_norm.weight", norm_w(p + "attn_norm.weight", D), f32))
        add("attn_q.weight", (dq, D), 1.5 * D**-0.5, f16)
        add("attn_q.bias", (dq,), 0.1, f32)
        add("attn_k.weight", (dkv, D), 1.5 * D**-0.5, f16)
        add("attn_k.bias", (dkv,), 0.1, f32)
        add("attn_v.weight", (dkv, D), D**-0.5, f16)
        add("attn_v.bias", (dkv,), 0.1, f32)
        add("attn_output.weight", (D, dq), r * dq**-0.5, f16)
        add("attn_output.bias", (D,), 0.02, f32)
        add("attn_sinks.weight", (N_HEAD,), 1.0, f32, 1.0)
        out.append((p + "post_attention_norm.weight", norm_w(p + "post_attention_norm.weight", D), f32))
        add("ffn_gate_inp.weight", (N_EXPERT, D), 6 * D**-0.5, f32)
        add("ffn_gate_inp.bias", (N_EXPERT,), 0.3, f32)
        add("ffn_gate_exps.weight", (N_EXPERT, FF_EXP, D), D**-0.5, mx)
        add("ffn_gate_exps.bias", (N_EXPERT, FF_EXP), 0.1, f32)
        add("ffn_up_exps.weight", (N_EXPERT, FF_EXP, D), D**-0.5, mx)
        add("ffn_up_exps.bias", (N_EXPERT, FF_EXP), 0.1, f32)
        add("ffn_down_exps.weight", (N_EXPERT, D, FF_EXP), r * FF_EXP**-0.5, mx)
        add("ffn_down_exps.bias", (N_EXPERT, D), 0.02, f32)
    out.append(("output_norm.weight", norm_w("output_norm.weight", D, 4.0), f32))
    outw = randn("output.weight", (VOCAB, D), D**-0.5)
    outw *= np.exp(randn("output.rownorm", (VOCAB, 1), 0.25))
    out.append(("output.weight", outw, f16))
    return out


def write(path, vocab_kv):
    w = g.Writer()
    a = ARCH + "."
    w.add("general.architecture", g.T_STR, ARCH)
    w.add("general.name", g.T_STR, os.path.basename(path)[:-len("-MXFP4.gguf")])
    w.add(a + "context_length", g.T_U32, CTX)
    w.add(a + "embedding_length", g.T_U32, D)
    w.add(a + "block_count", g.T_U32, N_LAYER)
    w.add(a + "feed_forward_length", g.T_U32, FF_EXP)
    w.add(a + "attention.head_count", g.T_U32, N_HEAD)
    w.add(a + "attention.head_count_kv", g.T_U32, N_KV)
    w.add(a + "attention.key_length", g.T_U32, HEAD_DIM)
    w.add(a + "attention.value_length", g.T_U32, HEAD_DIM)
    w.add(a + "attention.layer_norm_rms_epsilon", g.T_F32, 1e-5)
    w.add(a + "attention.sliding_window", g.T_U32, N_SWA)
    w.add(a + "rope.freq_base", g.T_F32, ROPE_BASE)
    w.add(a + "rope.scaling.type", g.T_STR, "yarn")
    w.add(a + "rope.scaling.factor", g.T_F32, YARN_FACTOR)
    w.add(a + "rope.scaling.original_context_length", g.T_U32, YARN_ORIG_CTX)
    w.add(a + "expert_count", g.T_U32, N_EXPERT)
    w.add(a + "expert_used_count", g.T_U32, N_USED)
    w.add(a + "expert_feed_forward_length", g.T_U32, FF_EXP)
    w.add(a + "vocab_size", g.T_U32, VOCAB)
    for k, (t, v) in vocab_kv.items():
        w.add(k, t, v)
    w.add("general.quantization_version", g.T_U32, 2)
    w.add("general.file_type", g.T_U32, FTYPE_MXFP4_MOE)
    for tname, arr, typ in tensors():
        w.tensor(tname, arr, typ)
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
    write(f"{args.out}/rand-gpt-oss-e8x4-tok512-d256-l2-MXFP4.gguf", vocab)


if __name__ == "__main__":
    main()
