"""The gpt-oss file of tests/data/arch (make_models.py arch): its keys and tensors as tables.

  rand-gpt-oss-e8x4-tok512-d256-l2-MXFP4.gguf   gpt-oss: 2 blocks (0 attends within a sliding
                      window of 8 keys, 1 to all keys), 4 heads of 64, 2 KV heads, Q/K/V/output
                      biases, attention sinks, NEOX rope 150000 with YaRN (factor 32 over 4096),
                      8 experts of width 64, top-4, with biases; the experts in MXFP4 (as the
                      released files), the other matrices F16

The tensor names and keys are those ik_llama.cpp's loader reads for gpt-oss (LLM_ARCH_OPENAI_MOE;
the FFN norm is blk.N.post_attention_norm); tok512 vocabulary; seed 2027 per tensor, seeded by
the full tensor name. The window of 8 is far below the real 128 so the test prompts cross it. The
router's logits are spread wide (std ~6) and the experts' gate/up are ~unit gain, so a near-tie
between the 4th and 5th expert moves little weight: with the activations' rounding differing from
ik_llama.cpp's (Q8_0 here, its own 8-bit formats there), a more chaotic model (4 blocks, Q8_0
attention, gate/up at 2x) drifted past the 0.5 logit tolerance while the same architecture with
F32 weights matched ik_llama.cpp to 3e-4.
"""
import gguf_writer as g
import model_file
from weights import NORM, Draw, fan_in, row_scaled, seed_names, table

U32, F32, STR = g.T_U32, g.T_F32, g.T_STR
KEYS = model_file.keys(("attention.sliding_window", U32, "window"),
                       ("rope.freq_base", F32, "rope_base"),
                       ("rope.scaling.type", STR, "rope_scaling"),
                       ("rope.scaling.factor", F32, "rope_factor"),
                       ("rope.scaling.original_context_length", U32, "rope_orig_ctx"),
                       ("expert_count", U32, "n_expert"),
                       ("expert_used_count", U32, "n_used"),
                       ("expert_feed_forward_length", U32, "ff_exp"))

TEST_FILES = {"rand-gpt-oss-e8x4-tok512-d256-l2-MXFP4.gguf": dict(
    arch="gpt-oss", name="rand-gpt-oss-e8x4-tok512-d256-l2", ctx=4096, d=256, n_layer=2,
    n_head=4, n_kv=2, head_dim=64, eps=1e-5, window=8, rope_base=150000.0, rope_scaling="yarn",
    rope_factor=32.0, rope_orig_ctx=4096, n_expert=8, n_used=4, ff=64, ff_exp=64, vocab_size=512,
    res=0.5, seed=2027, wtype=g.GGML_F16, file_type=g.FILE_TYPE[g.GGML_MXFP4])}


def rows(h):
    """The tensor rows of h, in file order: matrices F16, the experts MXFP4, the rest F32."""
    row = table(seed_names())
    d, V, e, fe = h["d"], h["vocab_size"], h["n_expert"], h["ff_exp"]
    dq, dkv = h["n_head"] * h["head_dim"], h["n_kv"] * h["head_dim"]
    mx, vec = g.GGML_MXFP4, dict(kind=False)
    out = [row("token_embd.weight", (V, d), 1.0)]
    for il in range(h["n_layer"]):
        p = f"blk.{il}."
        r = 1.0 if il == 0 else h["res"]
        out += [row(p + "attn_norm.weight", (d,), *NORM, **vec),
                row(p + "attn_q.weight", (dq, d), fan_in(d, 1.5)),
                row(p + "attn_q.bias", (dq,), 0.1, **vec),
                row(p + "attn_k.weight", (dkv, d), fan_in(d, 1.5)),
                row(p + "attn_k.bias", (dkv,), 0.1, **vec),
                row(p + "attn_v.weight", (dkv, d), fan_in(d)),
                row(p + "attn_v.bias", (dkv,), 0.1, **vec),
                row(p + "attn_output.weight", (d, dq), fan_in(dq, 1, r)),
                row(p + "attn_output.bias", (d,), 0.02, **vec),
                row(p + "attn_sinks.weight", (h["n_head"],), 1.0, 1.0, **vec),
                row(p + "post_attention_norm.weight", (d,), *NORM, **vec),
                row(p + "ffn_gate_inp.weight", (e, d), fan_in(d, 6), **vec),
                row(p + "ffn_gate_inp.bias", (e,), 0.3, **vec),
                row(p + "ffn_gate_exps.weight", (e, fe, d), fan_in(d), kind=mx),
                row(p + "ffn_gate_exps.bias", (e, fe), 0.1, **vec),
                row(p + "ffn_up_exps.weight", (e, fe, d), fan_in(d), kind=mx),
                row(p + "ffn_up_exps.bias", (e, fe), 0.1, **vec),
                row(p + "ffn_down_exps.weight", (e, d, fe), fan_in(fe, 1, r), kind=mx),
                row(p + "ffn_down_exps.bias", (e, d), 0.02, **vec)]
    head = Draw("output.weight", (V, d), fan_in(d))
    out += [row("output_norm.weight", (d,), *NORM, 4.0, **vec),
            ("output.weight", row_scaled(head, "output.rownorm", 0.25), True)]
    return out


def write(path, h, vocab_kv, quiet=False):
    model_file.write(path, h, KEYS, [], vocab_kv, rows(h), quiet)
