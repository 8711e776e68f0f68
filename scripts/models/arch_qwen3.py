"""The qwen3 family (qwen3, qwen3moe): its keys and tensors as tables, and the files made of them.

  tests/data/arch (make_models.py arch; seed 2026, per tensor, seeded by the full tensor name):
    rand-qwen3-tok512-d256-l2-F16.gguf / -Q8_0.gguf   qwen3: 4 heads of 96 (Q is 384 wide, wider
                        than embedding_length / head_count), 2 KV heads, ffn 256, Q/K norms,
                        NEOX rope 1e6
    rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf         block 0 of the above alone: its draft
    rand-qwen3moe-e8x4-tok512-d256-l2-Q8_0.gguf       qwen3moe: the same attention, 8 experts of
                        width 64, top-4, every block MoE
  Block 1 writes to the residual at 0.15 the scale of block 0 (the 1-layer prefix is a usable
  draft); output_norm is scaled x4 (logit std ~4); Q/K norm weights around 1.5 (peaked,
  position-dependent attention).

  make_models.py vocab: qwen3 with a real tokenizer (the tokenizer.* keys and chat template of a
    vocabulary GGUF, e.g. ../shared/vocab/ggml-vocab-qwen3.gguf), seed 2512: "tiny" (d64, 2 heads
    of 32, 1 KV head, ffn 128; 2 layers unless told) for the agent-loop test and its 1-layer
    draft, or "qwen3-0.6b" (28 layers of d1024, 16 heads of 128, 8 KV heads, ffn 3072) to time a
    target pass beside the 152k-token grammar mask. The output is tied to token_embd (no
    output.weight), as in the small Qwen3 models; no vocab_size key.

  make_models.py bench qwen3moe: qwen3moe-e64x8-d1536-l12-Q8_0.gguf, 64 experts of width 512,
    top-8, 12 layers of d1536, 12 heads of 128 (4 KV heads): ~1.9B weights, ~0.33B read per
    token; one random stream (seed 23), no residual scaling.
"""
import gguf_writer as g
import model_file
from weights import NORM, Draw, fan_in, row_scaled, seed_names, table

U32, F32, BOOL = g.T_U32, g.T_F32, g.T_BOOL
KEYS = model_file.keys(("rope.freq_base", F32, "rope_base"),
                       ("expert_count", U32, "n_expert"),
                       ("expert_used_count", U32, "n_used"),
                       ("expert_feed_forward_length", U32, "ff_exp"),
                       ("expert_weights_norm", BOOL, "weights_norm"))

# The test files' shape and weight scales; the files below override what differs.
TEST = dict(arch="qwen3", ctx=2048, d=256, n_head=4, n_kv=2, head_dim=96, ff=256, eps=1e-6,
            rope_base=1e6, vocab_size=512, n_vocab=512, res=0.15, qk_norm=(0.3, 1.5),
            out_norm=(0.1, 1.0, 4.0), output="row_scaled", router_gain=3, seed=2026, seeds="full")
MOE = dict(arch="qwen3moe", n_expert=8, n_used=4, ff_exp=64, weights_norm=True)
F16, Q8 = g.GGML_F16, g.GGML_Q8_0
TEST_FILES = {
    "rand-qwen3-tok512-d256-l2-F16.gguf":
        dict(TEST, n_layer=2, wtype=F16, name="rand-qwen3-tok512-d256-l2"),
    "rand-qwen3-tok512-d256-l2-Q8_0.gguf":
        dict(TEST, n_layer=2, wtype=Q8, name="rand-qwen3-tok512-d256-l2"),
    "rand-qwen3-tok512-d256-l1-draft-Q8_0.gguf":
        dict(TEST, n_layer=1, wtype=Q8, name="rand-qwen3-tok512-d256-l1-draft"),
    "rand-qwen3moe-e8x4-tok512-d256-l2-Q8_0.gguf":
        dict(TEST, **MOE, n_layer=2, wtype=Q8, name="rand-qwen3moe-e8x4-tok512-d256-l2"),
}

# make_models.py vocab: shape -> (d, n_head, n_kv, head_dim, ff, default layers).
VOCAB_SHAPES = {"tiny": (64, 2, 1, 32, 128, 2), "qwen3-0.6b": (1024, 16, 8, 128, 3072, 28)}

BENCH = {"qwen3moe": dict(
    MOE, ctx=32768, d=1536, n_layer=12, n_head=12, n_kv=4, head_dim=128, ff=4096, n_expert=64,
    n_used=8, ff_exp=512, eps=1e-6, rope_base=1e6, vocab_size=512, n_vocab=512, res=1.0,
    qk_norm=(0.1, 1.0), out_norm=(0.1, 1.0, 1.0), output="plain", router_gain=1, wtype=Q8,
    name="qwen3moe-e64x8-d1536-l12-Q8_0", stream=23)}


def _ffn(h, p, row, r):
    """The FFN rows of one block: dense, or experts when h has n_expert."""
    d = h["d"]
    if "n_expert" not in h:
        ff = h["ff"]
        return [row(p + "ffn_gate.weight", (ff, d), fan_in(d)),
                row(p + "ffn_up.weight", (ff, d), fan_in(d)),
                row(p + "ffn_down.weight", (d, ff), fan_in(ff, 1, r))]
    e, fe = h["n_expert"], h["ff_exp"]
    return [row(p + "ffn_gate_inp.weight", (e, d), fan_in(d, h["router_gain"]), kind=False),
            row(p + "ffn_gate_exps.weight", (e, fe, d), fan_in(d)),
            row(p + "ffn_up_exps.weight", (e, fe, d), fan_in(d)),
            row(p + "ffn_down_exps.weight", (e, d, fe), fan_in(fe, 1, r))]


def rows(h):
    """The tensor rows of h, in file order."""
    sd = seed_names(short=h.get("seeds") == "short")
    row = table(sd)
    d, hd, V = h["d"], h["head_dim"], h["n_vocab"]
    dq, dkv = h["n_head"] * hd, h["n_kv"] * hd
    qk_norm = h["qk_norm"]
    out = [row("token_embd.weight", (V, d), 1.0)]
    for il in range(h["n_layer"]):
        p = f"blk.{il}."
        r = 1.0 if il == 0 else h["res"]
        out += [row(p + "attn_norm.weight", (d,), *NORM, kind=False),
                row(p + "attn_q.weight", (dq, d), fan_in(d)),
                row(p + "attn_k.weight", (dkv, d), fan_in(d)),
                row(p + "attn_v.weight", (dkv, d), fan_in(d)),
                row(p + "attn_output.weight", (d, dq), fan_in(dq, 1, r)),
                row(p + "attn_q_norm.weight", (hd,), *qk_norm, kind=False),
                row(p + "attn_k_norm.weight", (hd,), *qk_norm, kind=False),
                row(p + "ffn_norm.weight", (d,), *NORM, kind=False)]
        out += _ffn(h, p, row, r)
    out.append(row("output_norm.weight", (d,), *h["out_norm"], kind=False))
    head = Draw(sd("output.weight"), (V, d), fan_in(d))
    output = {"row_scaled": row_scaled(head, sd("output.rownorm"), 0.25), "plain": head}
    if h["output"] in output:  # else tied to token_embd
        out.append(("output.weight", output[h["output"]], True))
    return out


def write(path, h, vocab_kv, quiet=False):
    model_file.write(path, h, KEYS, [], vocab_kv, rows(h), quiet)


def vocab_model(shape, n_layer, wtype, n_vocab):
    """The hparams of make_models.py vocab's file."""
    d, n_head, n_kv, hd, ff, default_layers = VOCAB_SHAPES[shape]
    n_layer = n_layer or default_layers
    return dict(arch="qwen3", name=f"rand-qwen3-{shape}-l{n_layer}", ctx=40960, d=d,
                n_layer=n_layer, ff=ff, n_head=n_head, n_kv=n_kv, head_dim=hd, eps=1e-6,
                rope_base=1e6, n_vocab=n_vocab, res=0.15, qk_norm=(0.3, 1.5),
                out_norm=(0.1, fan_in(d, 4.0), 1.0), output="tied", wtype=wtype, seed=2512,
                f32=True, seeds="short")
