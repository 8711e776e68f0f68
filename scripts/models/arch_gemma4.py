"""gemma4 (Gemma 4's dense models): its keys and tensors as tables, and the files made of them.

  tests/data/arch (make_models.py arch; seed 2026 per tensor, seed names prefixed "gemma4|"):
    rand-gemma4-tok512-d128-l6-F16.gguf   6 layers, sliding pattern 1 1 1 0 1 0 (window 16):
                        sliding layers 4 heads of 32 over 2 KV heads, rotating 32 dims at base
                        10000; full layers 4 heads of 64 over 1 KV head with no attn_v (V = K),
                        rotating 64 dims at base 1e6 with rope_freqs (proportional rope: the
                        last 16 pairs frozen); the last 2 layers share the KV of layers 2 and 3
                        (attention.shared_kv_layers = 2) and have a double-wide FFN (192, the
                        others 96: feed_forward_length and head_count_kv are per-layer arrays);
                        per-layer inputs of 32; layer_output_scale; final soft-cap 30; tied
                        output
    rand-gemma4-tok512-d128-l6-Q8_0.gguf  the same in Q8_0
    rand-gemma4moe-e8x2-tok512-d128-l4-F16.gguf  the MoE variant: 4 layers (pattern 1 1 0 0, the
                        last sharing layer 2's KV), each with 8 experts of 64 (top 2, gate and
                        up fused, an output scale each) beside its dense FFN; seed 2030: with
                        2026-2028 one prompt token each had its 2nd and 3rd experts' router
                        probabilities closer than the two engines' rounding, which then route
                        it differently (a top-k tie, not a difference of the computation)
    rand-gemma4-tok512-d128-l3-draft-Q8_0.gguf  3 layers of the same shapes, no KV sharing: a
                        draft for it (its own per-layer inputs)
  The post-norms set the scale each block adds to the residual (layer 0 at 1, later ones at
  0.3); output_norm is centred on 0, as for gemma3 (the tied output would otherwise make every
  token predict itself), with std 1.5, not gemma3's 5: logits of ~5, where the rounding of Q8_0
  activations over 6 layers with per-layer inputs stays inside the type's tolerance (at std 5
  ik_llama.cpp and Specula each moved up to 0.5 from a float64 forward, in opposite directions).
"""
import numpy as np

import gguf_writer as g
import model_file
from weights import Draw, fan_in, norm

U32, F32, BOOL = g.T_U32, g.T_F32, g.T_BOOL
ARR = g.T_ARR


KEYS = [("context_length", U32, "ctx"),
        ("embedding_length", U32, "d"),
        ("block_count", U32, "n_layer"),
        ("feed_forward_length", ARR, "ff_arr"),
        ("attention.head_count", U32, "n_head"),
        ("attention.head_count_kv", ARR, "kv_arr"),
        ("attention.key_length", U32, "head_dim"),
        ("attention.value_length", U32, "head_dim"),
        ("attention.key_length_swa", U32, "head_dim_swa"),
        ("attention.value_length_swa", U32, "head_dim_swa"),
        ("attention.layer_norm_rms_epsilon", F32, "eps"),
        ("attention.sliding_window", U32, "window"),
        ("attention.sliding_window_pattern", ARR, "swa_arr"),
        ("attention.shared_kv_layers", U32, "shared_kv"),
        ("rope.dimension_count", U32, "head_dim"),
        ("rope.dimension_count_swa", U32, "head_dim_swa"),
        ("rope.freq_base", F32, "rope_base"),
        ("rope.freq_base_swa", F32, "rope_base_swa"),
        ("embedding_length_per_layer_input", U32, "ple"),
        ("final_logit_softcapping", F32, "final_softcap"),
        ("expert_count", U32, "n_expert"),
        ("expert_used_count", U32, "n_expert_used"),
        ("expert_feed_forward_length", U32, "ff_exp"),
        ("vocab_size", U32, "vocab_size")]


def _ff(h):
    """Each layer's FFN width: double in the layers that share KV."""
    n, shared = h["n_layer"], h["shared_kv"]
    return [h["ff"] * (2 if shared and il >= n - shared else 1) for il in range(n)]


def _with_arrays(h):
    """h with the per-layer arrays its keys write."""
    kv = [h["n_kv_swa"] if s else h["n_kv"] for s in h["swa"]]
    return dict(h, ff_arr=(U32, _ff(h)), kv_arr=(U32, kv),
                swa_arr=(BOOL, [bool(s) for s in h["swa"]]))


def _rope_freqs(h):
    """Proportional rope: the first quarter of the full layers' pairs turn, the rest are frozen
    (a factor of 1e30, as Gemma 4's converter writes them)."""
    half = h["head_dim"] // 2
    return np.array([1.0] * (half // 2) + [1e30] * (half - half // 2), dtype=np.float32)


def _moe_rows(h, p, s):
    """A MoE layer's router, its input scale, the norms around both branches and the experts
    (gate and up fused per expert: rows [gate | up]); none without experts."""
    if "n_expert" not in h:
        return []
    d, ne, fe = h["d"], h["n_expert"], h["ff_exp"]
    return [(p + "ffn_gate_inp.weight", Draw(s + "ffn_gate_inp", (ne, d), fan_in(d, 8.0)), False),
            (p + "ffn_gate_inp.scale", norm(s + "ffn_gate_inp.scale", d), False),
            (p + "pre_ffw_norm_2.weight", norm(s + "pre_ffw_norm_2", d), False),
            (p + "post_ffw_norm_1.weight", norm(s + "post_ffw_norm_1", d), False),
            (p + "post_ffw_norm_2.weight", norm(s + "post_ffw_norm_2", d), False),
            (p + "ffn_gate_up_exps.weight", Draw(s + "ffn_gate_up_exps", (ne, 2 * fe, d),
                                                 fan_in(d)), True),
            (p + "ffn_down_exps.weight", Draw(s + "ffn_down_exps", (ne, d, fe), fan_in(fe)), True),
            (p + "ffn_down_exps.scale", Draw(s + "ffn_down_exps.scale", (ne,), 0.2, 1.0), False)]


def _ple_rows(h, p, s):
    """A layer's per-layer input gate, projection and norm; none without per-layer inputs."""
    d, ple = h["d"], h["ple"]
    if not ple:
        return []
    return [(p + "inp_gate.weight", Draw(s + "inp_gate", (ple, d), fan_in(d)), True),
            (p + "proj.weight", Draw(s + "proj", (d, ple), fan_in(ple)), True),
            (p + "post_norm.weight", Draw(s + "post_norm", (d,), 0.1, 0.5), False)]


def rows(h):
    pre = "gemma4|"
    ff = _ff(h)
    d, V, n, ple = h["d"], h["vocab_size"], h["n_layer"], h["ple"]
    out = [("token_embd.weight", Draw(pre + "token_embd.weight", (V, d), fan_in(d)), True),
           ("rope_freqs.weight", _rope_freqs(h), False)]
    if ple:
        out += [("per_layer_token_embd.weight",
                 Draw(pre + "per_layer_token_embd", (V, n * ple), 1.0), True),
                ("per_layer_model_proj.weight",
                 Draw(pre + "per_layer_model_proj", (n * ple, d), fan_in(d)), True),
                ("per_layer_proj_norm.weight", norm(pre + "per_layer_proj_norm", ple), False)]
    n_own = n - h["shared_kv"]
    for il in range(n):
        p = f"blk.{il}."
        s = pre + p
        swa = h["swa"][il]
        hd = h["head_dim_swa"] if swa else h["head_dim"]
        dq, dkv = h["n_head"] * hd, (h["n_kv_swa"] if swa else h["n_kv"]) * hd
        r = 1.0 if il == 0 else h["res"]
        post = Draw(None, (d,), 0.1, 1.0, r)
        out += [(p + "attn_norm.weight", norm(s + "attn_norm", d), False),
                (p + "attn_q.weight", Draw(s + "attn_q", (dq, d), fan_in(d)), True),
                (p + "attn_q_norm.weight", Draw(s + "attn_q_norm", (hd,), 0.2, 1.1), False)]
        if il < n_own:
            out += [(p + "attn_k.weight", Draw(s + "attn_k", (dkv, d), fan_in(d)), True),
                    (p + "attn_k_norm.weight", Draw(s + "attn_k_norm", (hd,), 0.2, 1.1), False)]
            if swa:  # the full layers have no attn_v: V = K
                out.append((p + "attn_v.weight", Draw(s + "attn_v", (dkv, d), fan_in(d)), True))
        out += [(p + "attn_output.weight", Draw(s + "attn_output", (d, dq), fan_in(dq)), True),
                (p + "post_attention_norm.weight", post._replace(seed=s + "post_attention_norm"),
                 False),
                (p + "ffn_norm.weight", norm(s + "ffn_norm", d), False),
                (p + "ffn_gate.weight", Draw(s + "ffn_gate", (ff[il], d), fan_in(d)), True),
                (p + "ffn_up.weight", Draw(s + "ffn_up", (ff[il], d), fan_in(d)), True),
                (p + "ffn_down.weight", Draw(s + "ffn_down", (d, ff[il]), fan_in(ff[il])), True),
                (p + "post_ffw_norm.weight", post._replace(seed=s + "post_ffw_norm"), False),
                *_moe_rows(h, p, s),
                *_ple_rows(h, p, s),
                (p + "layer_output_scale.weight", Draw(s + "layer_output_scale", (1,), 0.1, 0.9),
                 False)]
    out.append(("output_norm.weight", Draw(pre + "output_norm.weight", (d,), 3.0), False))
    return out


BASE = dict(arch="gemma4", ctx=2048, d=128, n_head=4, n_kv=1, n_kv_swa=2, head_dim=64,
            head_dim_swa=32, ff=96, eps=1e-6, window=16, rope_base=1e6, rope_base_swa=1e4,
            ple=32, final_softcap=30.0, vocab_size=512, seed=2026, res=0.3)
TEST_FILES = {
    "rand-gemma4-tok512-d128-l6-F16.gguf":
        dict(BASE, n_layer=6, swa=[1, 1, 1, 0, 1, 0], shared_kv=2, wtype=g.GGML_F16,
             name="rand-gemma4-tok512-d128-l6"),
    "rand-gemma4-tok512-d128-l6-Q8_0.gguf":
        dict(BASE, n_layer=6, swa=[1, 1, 1, 0, 1, 0], shared_kv=2, wtype=g.GGML_Q8_0,
             name="rand-gemma4-tok512-d128-l6-q8"),
    "rand-gemma4moe-e8x2-tok512-d128-l4-F16.gguf":
        dict(BASE, n_layer=4, swa=[1, 1, 0, 0], shared_kv=1, n_expert=8, n_expert_used=2,
             ff_exp=64, wtype=g.GGML_F16, name="rand-gemma4moe-e8x2-tok512-d128-l4", seed=2030),
    "rand-gemma4-tok512-d128-l3-draft-Q8_0.gguf":
        dict(BASE, n_layer=3, swa=[1, 1, 0], shared_kv=0, wtype=g.GGML_Q8_0,
             name="rand-gemma4-tok512-d128-l3-draft"),
}
# Timing files (make_models.py bench gemma4 / gemma4moe; one random stream each): a Gemma-4
# 12B-like dense shape (d 3840, 16 heads of 256 over 8 KV heads in the sliding layers, of 512 over
# 2 in the full ones, V = K there, FFN 15360, five sliding layers per full one) cut to 12 of its
# 48 layers, and a 26B-A4B-like MoE shape (d 2816, 128 experts of 704, top 8, beside a dense FFN
# of 2112) cut to 4 of its 30 layers; tok512, no per-layer inputs (the E-models' feature).
_BENCH_BASE = dict(arch="gemma4", ctx=32768, eps=1e-6, window=1024, rope_base=1e6,
                   rope_base_swa=1e4, ple=0, final_softcap=30.0, vocab_size=512, res=1.0,
                   shared_kv=0, wtype=g.GGML_Q8_0)
BENCH = {
    "gemma4": dict(_BENCH_BASE, d=3840, n_layer=12, swa=[1, 1, 1, 1, 1, 0] * 2, n_head=16,
                   n_kv=2, n_kv_swa=8, head_dim=512, head_dim_swa=256, ff=15360,
                   name="gemma4-12b-shape-l12-Q8_0", stream=41),
    "gemma4moe": dict(_BENCH_BASE, d=2816, n_layer=4, swa=[1, 1, 1, 0], n_head=16, n_kv=2,
                      n_kv_swa=8, head_dim=512, head_dim_swa=256, ff=2112, n_expert=128,
                      n_expert_used=8, ff_exp=704, name="gemma4-26b-a4b-shape-l4-Q8_0", stream=42),
}


def write(path, h, vocab_kv, quiet=False):
    model_file.write(path, _with_arrays(h), KEYS, [], vocab_kv, rows(h), quiet)
