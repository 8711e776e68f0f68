"""The gemma family (gemma2, gemma3): its keys and tensors as tables, and the files made of them.

  tests/data/arch (make_models.py arch; seed 2026 per tensor, seed names prefixed "gemma3|" or
  "gemma2|": weights of their own):
    rand-gemma3-tok512-d128-l7-F16.gguf          gemma3: 7 layers (0-4 and 6 slide, 5 is
                        global), window 16, 4 heads of 48 (key_length, Q 192 wide), 1 KV head,
                        ffn 96, Q/K norms, post-norms, tied output, global rope 1e6 with linear
                        scaling x2 (local layers: 10000)
    rand-gemma3-tok512-d128-l6-draft-Q8_0.gguf   blocks 0-5 of the above: its draft (six, not
                        one: ik_llama.cpp's gemma3 graph needs a global layer, and layer 5 is
                        the first)
    rand-gemma2-tok512-d32-l26-F16.gguf          gemma2: 26 layers (ik_llama.cpp's gemma2 graph
                        takes only the 26/42/46-layer shapes), even layers slide (window 16), 2
                        heads of 16, 1 KV head, ffn 64, no Q/K norm (Q at 2x: peaked scores),
                        attention soft-cap 5 and final soft-cap 15 (small, so both bite)
  No output.weight (tied to token_embd). The post-norms set the scale each block adds to the
  residual: layer 0 at 1, later ones at 0.3 (gemma3) or 0.25 (gemma2). output_norm is centred on
  0 (std 5): with the output tied to token_embd, a norm centred on 1 would make every token
  predict itself.

  make_models.py bench gemma3: gemma3-d1152-l26-Q8_0.gguf shaped as Gemma 3 1B: 26 layers of
    d1152, 4 heads of 256 (1 KV head), FFN 6912 (GeGLU), every 6th layer global, the others a
    512-token window; ~0.7B weights; one random stream (seed 23).
"""
import gguf_writer as g
import model_file
from weights import Draw, fan_in, norm

U32, F32, STR = g.T_U32, g.T_F32, g.T_STR
KEYS = model_file.keys(("attention.sliding_window", U32, "window"),
                       ("rope.freq_base", F32, "rope_base"),
                       ("rope.scaling.type", STR, "rope_scaling"),
                       ("rope.scaling.factor", F32, "rope_factor"),
                       ("attn_logit_softcapping", F32, "attn_softcap"),
                       ("final_logit_softcapping", F32, "final_softcap"))

TEST = dict(ctx=2048, eps=1e-6, window=16, vocab_size=512, seed=2026, post_norm=(0.1, 1.0),
            out_norm_std=5.0)
GEMMA3 = dict(TEST, arch="gemma3", d=128, n_head=4, n_kv=1, head_dim=48, ff=96, rope_base=1e6,
              rope_scaling="linear", rope_factor=2.0, qk_norm=(0.2, 1.1), q_gain=1.0, res=0.3)
GEMMA2 = dict(TEST, arch="gemma2", d=32, n_head=2, n_kv=1, head_dim=16, ff=64, attn_softcap=5.0,
              final_softcap=15.0, q_gain=2.0, res=0.25)
TEST_FILES = {
    "rand-gemma3-tok512-d128-l7-F16.gguf":
        dict(GEMMA3, n_layer=7, wtype=g.GGML_F16, name="rand-gemma3-tok512-d128-l7"),
    "rand-gemma3-tok512-d128-l6-draft-Q8_0.gguf":
        dict(GEMMA3, n_layer=6, wtype=g.GGML_Q8_0, name="rand-gemma3-tok512-d128-l6-draft"),
    "rand-gemma2-tok512-d32-l26-F16.gguf":
        dict(GEMMA2, n_layer=26, wtype=g.GGML_F16, name="rand-gemma2-tok512-d32-l26"),
}

BENCH = {"gemma3": dict(
    arch="gemma3", ctx=32768, d=1152, n_layer=26, n_head=4, n_kv=1, head_dim=256, ff=6912,
    window=512, eps=1e-6, rope_base=1e6, vocab_size=512, qk_norm=(0.1, 1.0), q_gain=1.0, res=1.0,
    post_norm=(0.1, 0.3), out_norm_std=1.0, wtype=g.GGML_Q8_0, name="gemma3-d1152-l26-Q8_0",
    stream=23)}


def rows(h):
    """The tensor rows of h, in file order. Seed names: the arch, "|", the tensor name; the
    matrices, Q/K norms and post-norms without ".weight"."""
    pre = h["arch"] + "|"
    d, hd, ff, V = h["d"], h["head_dim"], h["ff"], h["vocab_size"]
    dq, dkv = h["n_head"] * hd, h["n_kv"] * hd
    out = [("token_embd.weight", Draw(pre + "token_embd.weight", (V, d), fan_in(d)), True)]
    for il in range(h["n_layer"]):
        p = f"blk.{il}."
        s = pre + p
        r = 1.0 if il == 0 else h["res"]
        post = Draw(None, (d,), *h["post_norm"], r)
        out += [(p + "attn_norm.weight", norm(s + "attn_norm.weight", d), False),
                (p + "attn_q.weight", Draw(s + "attn_q", (dq, d), fan_in(d, h["q_gain"])), True),
                (p + "attn_k.weight", Draw(s + "attn_k", (dkv, d), fan_in(d)), True),
                (p + "attn_v.weight", Draw(s + "attn_v", (dkv, d), fan_in(d)), True),
                (p + "attn_output.weight", Draw(s + "attn_output", (d, dq), fan_in(dq)), True)]
        if "qk_norm" in h:
            out += [(p + n + ".weight", Draw(s + n, (hd,), *h["qk_norm"]), False)
                    for n in ("attn_q_norm", "attn_k_norm")]
        out += [(p + "post_attention_norm.weight", post._replace(seed=s + "post_attention_norm"),
                 False),
                (p + "ffn_norm.weight", norm(s + "ffn_norm.weight", d), False),
                (p + "ffn_gate.weight", Draw(s + "ffn_gate", (ff, d), fan_in(d)), True),
                (p + "ffn_up.weight", Draw(s + "ffn_up", (ff, d), fan_in(d)), True),
                (p + "ffn_down.weight", Draw(s + "ffn_down", (d, ff), fan_in(ff)), True),
                (p + "post_ffw_norm.weight", post._replace(seed=s + "post_ffw_norm"), False)]
    out_norm = Draw(pre + "output_norm.weight", (d,), h["out_norm_std"])
    out.append(("output_norm.weight", out_norm, False))
    return out


def write(path, h, vocab_kv, quiet=False):
    model_file.write(path, h, KEYS, [], vocab_kv, rows(h), quiet)
