"""The phi3 and mistral3 files of tests/data/arch (make_models.py arch): keys and tensors as tables.

  rand-phi3-swa-longrope-tok512-d192-l2-F16.gguf   phi3 as Phi-3.5-mini writes it: LongRoPE
                      factors (long and short; original_context_length 256 < the references'
                      n_ctx 512, so the long ones apply), rope.scaling.attn_factor 1.19, and a
                      sliding window of 24 positions
  rand-phi3-tok512-d192-l2-Q8_0.gguf               phi3 as Phi-4 writes it: sliding_window 0, no
                      rope factors
  rand-phi3-tok512-d192-l1-draft-Q8_0.gguf         block 0 of the Q8_0 file alone: its draft
  rand-mistral3-yarn-tok512-d192-l2-Q8_0.gguf      mistral3 (Ministral 3): YaRN (factor 16 over
                      64 original positions, log multiplier 0.8) and the attention temperature
                      (0.1), which scales q from position 63 on

All: 3 query heads of 64, 1 KV head, ffn 256 (phi3: fused attn_qkv and ffn_up as its converter
writes them: rows Q | K | V and gate | up), tok512 vocabulary, seed 2026 per tensor (seed names
prefixed "phi3|" or "mistral3|"). general.name avoids "phi3" and "phi-3": ik_llama.cpp's
vocabulary loader marks Phi-3's special tokens (absent from tok512) for models so named.
"""
import numpy as np

import gguf_writer as g
import model_file
from weights import NORM, Draw, fan_in, row_scaled, seed_names, table

U32, F32, STR = g.T_U32, g.T_F32, g.T_STR
# No key_length / value_length: these files' hparams have no head_dim (head_size instead).
KEYS = model_file.keys(("rope.dimension_count", U32, "head_size"),
                       ("rope.freq_base", F32, "rope_base"),
                       ("rope.scaling.type", STR, "rope_scaling"),
                       ("rope.scaling.factor", F32, "rope_factor"),
                       ("rope.scaling.attn_factor", F32, "rope_attn_factor"),
                       ("rope.scaling.original_context_length", U32, "rope_orig_ctx"),
                       ("rope.scaling.yarn_beta_fast", F32, "yarn_beta_fast"),
                       ("rope.scaling.yarn_beta_slow", F32, "yarn_beta_slow"),
                       ("rope.scaling.yarn_log_multiplier", F32, "yarn_log_multiplier"),
                       ("attention.sliding_window", U32, "window"),
                       ("attention.temperature_scale", F32, "temperature_scale"))

# Per architecture: the matrices each tensor is made of (fused ones: their rows stacked).
LAYOUT = {"phi3": [("attn_qkv", ("attn_q", "attn_k", "attn_v")),
                   ("ffn_up", ("ffn_gate", "ffn_up"))],
          "mistral3": [("attn_q", ("attn_q",)), ("attn_k", ("attn_k",)), ("attn_v", ("attn_v",)),
                       ("ffn_gate", ("ffn_gate",)), ("ffn_up", ("ffn_up",))]}

BASE = dict(ctx=4096, d=192, n_head=3, n_kv=1, head_size=64, ff=256, eps=1e-5, vocab_size=512,
            seed=2026, res=0.15)
PHI4 = dict(BASE, arch="phi3", rope_base=250000.0, window=0)
F16, Q8 = g.GGML_F16, g.GGML_Q8_0
TEST_FILES = {
    "rand-phi3-swa-longrope-tok512-d192-l2-F16.gguf": dict(
        BASE, arch="phi3", n_layer=2, wtype=F16, name="rand-phi-swa-longrope-tok512-d192-l2",
        rope_base=10000.0, rope_attn_factor=1.19, rope_orig_ctx=256, window=24, longrope=True),
    "rand-phi3-tok512-d192-l2-Q8_0.gguf":
        dict(PHI4, n_layer=2, wtype=Q8, name="rand-phi4-tok512-d192-l2"),
    "rand-phi3-tok512-d192-l1-draft-Q8_0.gguf":
        dict(PHI4, n_layer=1, wtype=Q8, name="rand-phi4-tok512-d192-l1-draft"),
    "rand-mistral3-yarn-tok512-d192-l2-Q8_0.gguf": dict(
        BASE, arch="mistral3", n_layer=2, wtype=Q8, name="rand-mistral3-yarn-tok512-d192-l2",
        rope_base=1e6, rope_scaling="yarn", rope_factor=16.0, rope_orig_ctx=64,
        yarn_beta_fast=32.0, yarn_beta_slow=1.0, yarn_log_multiplier=0.8, temperature_scale=0.1),
}


def _longrope(pre, n):
    """Real LongRoPE factors grow from ~1 to tens over the frequencies; short ones stay near 1."""
    def short(gen):
        return (1.0 + 0.05 * np.abs(gen.randn(pre + "rope_short", (n,), 1.0))).astype(np.float32)
    return [("rope_factors_long.weight", np.geomspace(1.0, 40.0, n).astype(np.float32), False),
            ("rope_factors_short.weight", short, False)]


def rows(h):
    """The tensor rows of h, in file order; seed names: the arch, "|", the tensor name."""
    pre = h["arch"] + "|"
    row = table(seed_names(pre))
    d, ff, V = h["d"], h["ff"], h["vocab_size"]
    dq, dkv = h["n_head"] * h["head_size"], h["n_kv"] * h["head_size"]
    out = [row("token_embd.weight", (V, d), 1.0)]
    if h.get("longrope"):
        out += _longrope(pre, h["head_size"] // 2)
    for il in range(h["n_layer"]):
        p = f"blk.{il}."
        r = 1.0 if il == 0 else h["res"]
        # Q scaled x1.5: attention peaked enough to depend on position.
        mats = {"attn_q": Draw(pre + p + "attn_q.weight", (dq, d), fan_in(d, 1.5)),
                "attn_k": Draw(pre + p + "attn_k.weight", (dkv, d), fan_in(d)),
                "attn_v": Draw(pre + p + "attn_v.weight", (dkv, d), fan_in(d)),
                "ffn_gate": Draw(pre + p + "ffn_gate.weight", (ff, d), fan_in(d)),
                "ffn_up": Draw(pre + p + "ffn_up.weight", (ff, d), fan_in(d))}
        fused = [(p + n + ".weight", [mats[m] for m in parts], True)
                 for n, parts in LAYOUT[h["arch"]]]
        out += [row(p + "attn_norm.weight", (d,), *NORM, kind=False)]
        out += [t for t in fused if "attn_" in t[0]]
        out += [row(p + "attn_output.weight", (d, dq), fan_in(dq, 1, r)),
                row(p + "ffn_norm.weight", (d,), *NORM, kind=False)]
        out += [t for t in fused if "ffn_" in t[0]]
        out += [row(p + "ffn_down.weight", (d, ff), fan_in(ff, 1, r))]
    head = Draw(pre + "output.weight", (V, d), fan_in(d))
    out += [row("output_norm.weight", (d,), *NORM, 4.0, kind=False),
            ("output.weight", row_scaled(head, pre + "output.rownorm", 0.25), True)]
    return out


def write(path, h, vocab_kv, quiet=False):
    model_file.write(path, h, KEYS, [], vocab_kv, rows(h), quiet)
