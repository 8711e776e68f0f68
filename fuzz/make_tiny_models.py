#!/usr/bin/env python3
# Writes tiny whole llama models (a few KB) as seeds for fuzz_gguf, so that mutations reach
# Model::load at thousands of executions per second (a real model is ~1 MB per input):
#   make_tiny_models.py WIDEN_MODEL_PY SOURCE.gguf OUT_DIR
# SOURCE gives the tokenizer metadata (its vocabulary cut to 32 tokens for the smallest seeds);
# the GGUF reader/writer and the Q8_0 quantizer are those of ../shared/tools/widen_model.py.
import importlib.util
import os
import sys

import numpy as np

spec = importlib.util.spec_from_file_location("widen", sys.argv[1])
w = importlib.util.module_from_spec(spec)
spec.loader.exec_module(w)
src = w.GGUFFile(sys.argv[2])
out_dir = sys.argv[3]


def write(name, d, n_ff, n_head, n_head_kv, n_vocab, ggml_type, tied):
    out = w.GGUFWriter(os.path.join(out_dir, name))
    hd = d // n_head
    for k, v in src.kv.items():
        if k.startswith("tokenizer.") or k in ("general.architecture", "general.alignment"):
            if v.vtype == w.T_ARRAY and len(v.value) > n_vocab and k.startswith("tokenizer.ggml.")\
                    and k != "tokenizer.ggml.merges":
                v = w.GGUFValue(w.T_ARRAY, v.value[:n_vocab], v.subtype)
            out.set(k, v)
    u32 = lambda x: w.GGUFValue(w.T_UINT32, x)
    out.set("llama.context_length", u32(64))
    out.set("llama.embedding_length", u32(d))
    out.set("llama.block_count", u32(1))
    out.set("llama.feed_forward_length", u32(n_ff))
    out.set("llama.attention.head_count", u32(n_head))
    out.set("llama.attention.head_count_kv", u32(n_head_kv))
    out.set("llama.rope.dimension_count", u32(hd))
    out.set("llama.attention.layer_norm_rms_epsilon", w.GGUFValue(w.T_FLOAT32, 1e-5))
    rng = np.random.default_rng(0)
    shapes = [("token_embd.weight", (n_vocab, d), ggml_type), ("output_norm.weight", (d,), 0)]
    if not tied:
        shapes.append(("output.weight", (n_vocab, d), ggml_type))
    p = "blk.0."
    shapes += [(p + "attn_norm.weight", (d,), 0), (p + "attn_q.weight", (d, d), ggml_type),
               (p + "attn_k.weight", (hd * n_head_kv, d), ggml_type),
               (p + "attn_v.weight", (hd * n_head_kv, d), ggml_type),
               (p + "attn_output.weight", (d, d), ggml_type), (p + "ffn_norm.weight", (d,), 0),
               (p + "ffn_gate.weight", (n_ff, d), ggml_type),
               (p + "ffn_up.weight", (n_ff, d), ggml_type),
               (p + "ffn_down.weight", (d, n_ff), ggml_type)]
    for n, s, t in shapes:
        out.add_tensor_info(n, s, t)
    out.write_header()
    for n, s, t in shapes:
        out.write_tensor_data(n, rng.standard_normal(s).astype(np.float32) * 0.1)
    out.close()


write("tiny-f32-v32.gguf", 8, 16, 2, 1, 32, w.GGML_F32, tied=False)
write("tiny-f16-v32-tied.gguf", 8, 16, 2, 2, 32, w.GGML_F16, tied=True)
write("tiny-q8_0-v32.gguf", 32, 32, 2, 1, 32, w.GGML_Q8_0, tied=False)
