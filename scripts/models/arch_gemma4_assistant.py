"""Gemma 4's assistant drafter in ik_llama.cpp's two GGUF schemas, for the small gemma4 targets
of arch_gemma4.py: its keys and tensors as tables, and the files made of them.

The assistant attends (query-only) over its target's KV cache and reads a projection of the
target's last hidden state (speculative/drafters/gemma4_assistant_head.h has the forward). The
two spellings ik_llama.cpp reads, the same weights under either:
  gemma4-assistant   keys gemma4-assistant.embedding_length_out (the target's hidden size),
                     tensors nextn.pre_projection.weight / nextn.post_projection.weight
  gemma4_mtp         keys gemma4_mtp.backbone_embedding_length, tensors mtp_pre_proj.weight /
                     mtp_post_proj.weight
Both: embedding_length (the assistant's own width), block_count, feed_forward_length,
attention.head_count, head_count_kv (one per layer: the KV heads of the target layer it reads),
key_length / value_length (its full layers' head size: the target's full
layers'), key_length_swa / value_length_swa, attention.sliding_window and sliding_window_pattern
(one flag per layer), layer_norm_rms_epsilon; token_embd (its own, tied output), output_norm,
rope_freqs (the full layers' frequency factors), blk.N.{attn_norm, attn_q, attn_q_norm,
attn_output, post_attention_norm, ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm,
layer_output_scale} (ik_llama.cpp loads rope_freqs for gemma4-assistant only: a gemma4_mtp file's
full layers rotate without factors); the tokenizer of the target (ik_llama.cpp loads a vocabulary
with every model).

  tests/data/arch (make_models.py arch; seed 2026 per tensor, seed names prefixed
  "gemma4-assistant|" whatever the schema, so both files hold the same values):
    rand-gemma4-assistant-tok512-d64-l2-F16.gguf  for rand-gemma4-tok512-d128-l6-*: 2 layers
                        (sliding, full: they read the target's layers 2 and 3, the last of each
                        kind with a cache of its own), 4 query heads of 32 / 64, FFN 128, window
                        16, rope_freqs as the target's
    rand-gemma4-mtp-tok512-d64-l2-F16.gguf        the same as a gemma4_mtp file (without
                        rope_freqs)
    rand-gemma4-assistant-echo-tok512-d128-l2-F16.gguf  an assistant of the target's width that
                        drafts the target's last token again (echo_rows): drafts that the target
                        keeps where its output repeats, for the tests of what happens after an
                        accepted draft
"""
import numpy as np

import arch_gemma4
import gguf_writer as g
import model_file
from weights import Draw, fan_in, norm

U32, F32, ARR = g.T_U32, g.T_F32, g.T_ARR

# The backbone key and the two projections' names, per schema.
SCHEMA = {
    "gemma4-assistant": ("embedding_length_out", "nextn.pre_projection.weight",
                         "nextn.post_projection.weight"),
    "gemma4_mtp": ("backbone_embedding_length", "mtp_pre_proj.weight", "mtp_post_proj.weight"),
}


def keys(arch):
    return [("context_length", U32, "ctx"),
            ("embedding_length", U32, "d"),
            ("block_count", U32, "n_layer"),
            ("feed_forward_length", U32, "ff"),
            ("attention.head_count", U32, "n_head"),
            ("attention.head_count_kv", ARR, "kv_arr"),
            ("attention.key_length", U32, "head_dim"),
            ("attention.value_length", U32, "head_dim"),
            ("attention.key_length_swa", U32, "head_dim_swa"),
            ("attention.value_length_swa", U32, "head_dim_swa"),
            ("attention.layer_norm_rms_epsilon", F32, "eps"),
            ("attention.sliding_window", U32, "window"),
            ("attention.sliding_window_pattern", ARR, "swa_arr"),
            (SCHEMA[arch][0], U32, "backbone"),
            ("vocab_size", U32, "vocab_size")]


def echo_rows(h):
    """The echo assistant: x = h (pre_proj [0 | I]), blocks that add nothing (zero post-norms),
    the target's own token_embd as the tied output and a unit output_norm, post_proj I: its logits
    are a positive multiple of the target's (before the soft-cap) at the position it reads, so it
    drafts the token the target just chose, k times; drafts the target keeps where it repeats."""
    d, V = h["d"], h["vocab_size"]
    _, pre_proj, post_proj = SCHEMA[h["arch"]]
    eye = np.eye(d, dtype=np.float32)
    zero = np.zeros(d, dtype=np.float32)
    out = [("token_embd.weight", Draw("gemma4|token_embd.weight", (V, d), fan_in(d)), True),
           (pre_proj, np.concatenate([np.zeros((d, d), np.float32), eye], axis=1), True),
           (post_proj, eye, True)]
    for r in rows(dict(h, arch="gemma4-assistant")):
        name = r[0]
        if name.startswith("blk."):
            zeroed = name.endswith("post_attention_norm.weight") or \
                name.endswith("post_ffw_norm.weight")
            out.append((name, zero, False) if zeroed else r)
    out.append(("output_norm.weight", np.ones(d, dtype=np.float32), False))
    return out


def rows(h):
    pre = "gemma4-assistant|"
    d, V, nb = h["d"], h["vocab_size"], h["backbone"]
    _, pre_proj, post_proj = SCHEMA[h["arch"]]
    out = [("token_embd.weight", Draw(pre + "token_embd", (V, d), fan_in(d)), True)]
    if h["arch"] == "gemma4-assistant":  # ik_llama.cpp's gemma4_mtp has no rope_freqs
        out.append(("rope_freqs.weight", arch_gemma4._rope_freqs(h), False))
    out += [(pre_proj, Draw(pre + "pre_projection", (d, 2 * nb), fan_in(2 * nb)), True),
            (post_proj, Draw(pre + "post_projection", (nb, d), fan_in(d)), True)]
    for il in range(h["n_layer"]):
        p = f"blk.{il}."
        s = pre + p
        hd = h["head_dim_swa"] if h["swa"][il] else h["head_dim"]
        dq, ff = h["n_head"] * hd, h["ff"]
        post = Draw(None, (d,), 0.1, 1.0, 1.0 if il == 0 else h["res"])
        out += [(p + "attn_norm.weight", norm(s + "attn_norm", d), False),
                (p + "attn_q.weight", Draw(s + "attn_q", (dq, d), fan_in(d)), True),
                (p + "attn_q_norm.weight", Draw(s + "attn_q_norm", (hd,), 0.2, 1.1), False),
                (p + "attn_output.weight", Draw(s + "attn_output", (d, dq), fan_in(dq)), True),
                (p + "post_attention_norm.weight", post._replace(seed=s + "post_attention_norm"),
                 False),
                (p + "ffn_norm.weight", norm(s + "ffn_norm", d), False),
                (p + "ffn_gate.weight", Draw(s + "ffn_gate", (ff, d), fan_in(d)), True),
                (p + "ffn_up.weight", Draw(s + "ffn_up", (ff, d), fan_in(d)), True),
                (p + "ffn_down.weight", Draw(s + "ffn_down", (d, ff), fan_in(ff)), True),
                (p + "post_ffw_norm.weight", post._replace(seed=s + "post_ffw_norm"), False),
                (p + "layer_output_scale.weight", Draw(s + "layer_output_scale", (1,), 0.1, 0.9),
                 False)]
    # Logits of a few units: the greedy drafts of the two engines stay clear of ties.
    out.append(("output_norm.weight", norm(pre + "output_norm", d, 3.0), False))
    return out


BASE = dict(ctx=2048, d=64, n_layer=2, swa=[1, 0], n_head=4, n_kv=1, n_kv_swa=2, head_dim=64,
            head_dim_swa=32, ff=128, eps=1e-6, window=16, backbone=128, vocab_size=512, seed=2026,
            res=0.5, wtype=g.GGML_F16)
TEST_FILES = {
    "rand-gemma4-assistant-tok512-d64-l2-F16.gguf":
        dict(BASE, arch="gemma4-assistant", name="rand-gemma4-assistant-tok512-d64-l2"),
    "rand-gemma4-mtp-tok512-d64-l2-F16.gguf":
        dict(BASE, arch="gemma4_mtp", name="rand-gemma4-mtp-tok512-d64-l2"),
    "rand-gemma4-assistant-echo-tok512-d128-l2-F16.gguf":
        dict(BASE, arch="gemma4-assistant", d=128, echo=True,
             name="rand-gemma4-assistant-echo-tok512-d128-l2"),
}


def write(path, h, vocab_kv, quiet=False):
    kv = [h["n_kv_swa"] if s else h["n_kv"] for s in h["swa"]]
    h = dict(h, swa_arr=(g.T_BOOL, [bool(s) for s in h["swa"]]), kv_arr=(U32, kv))
    table = echo_rows(h) if "echo" in h else rows(h)
    model_file.write(path, h, keys(h["arch"]), [], vocab_kv, table, quiet)
