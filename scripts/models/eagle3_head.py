#!/usr/bin/python3
"""Random-weight EAGLE-3 heads (llama.cpp's `eagle3` GGUF schema) for the TinyStories targets, and
their draft logits from an independent float64 numpy forward (the target's too), written from the
definition in llama.cpp's src/models/eagle3.cpp and the EAGLE-3 paper:

  python3 scripts/models/eagle3_head.py [OUT_DIR] [--shared SHARED_DIR]
  python3 scripts/models/eagle3_head.py --bench TARGET.gguf OUT.gguf [--type f16|q8_0]

writes OUT_DIR (default tests/data/eagle3):
  stories260K-eagle3.gguf   for stories260K: `eagle3.target_layers`, a d2t mapping a 200-token
                            head vocabulary, its own output, the target's token_embd
  llama2xs-eagle3.gguf      for llama2xs: the older `eagle3.extract_layers` (out of order, one
                            layer twice), the shared vocabulary (no d2t), its own token_embd, the
                            target's output, norm_before_residual
  *.json                    per head: the prompt the target evaluates, the token after it, and
                            for the head's first pass and each chained draft the logits over the
                            target's vocabulary (-inf: not in the head's vocabulary, as null) and
                            the greedy draft

The head (one row per target position p, predicting t_{p+2}):
  g = fc [x_p entering L_1 | x_p entering L_2 | ...]      (chained rows: the head's own x)
  c = [rms(embed(t_{p+1})) * attn_norm | rms(g) * hidden_norm]
  x = Wo attn(rope(Wq c), rope(Wk c), Wv c) + (norm_before_residual ? rms(g) * hidden_norm : g)
  x = x + down(silu(gate(h)) * up(h)),  h = rms(x) * ffn_norm
  logits = output(rms(x) * output_norm) scattered to the target's ids by d2t
Rope is llama.cpp's normal mode (adjacent pairs) at absolute positions. A rerun writes the same
bytes. --bench writes a timing head shaped for any llama-style target from its metadata alone (its
hidden size, heads and FFN width; layers 2, n/2, n - 3 as vLLM picks them; the shared vocabulary,
the target's token_embd; the target's output up to 32000 tokens, else a 32000-token vocabulary of
its own mapped by d2t, as the published heads for Llama 3 and Qwen3 have), random weights in F16 or
Q8_0.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_writer as g  # noqa: E402

GGML_I64 = 27
PROMPT = [1, 403, 407, 261, 378, 30, 262, 504, 286, 312, 265, 289, 414, 266, 327, 397, 274]
NEXT = 300
CHAIN = 4  # drafts in the reference chain

HEADS = {
    "stories260K-eagle3": dict(target="tinystories/stories260K.gguf", seed=260, key="target_layers",
                               layers=[1, 2, 4], d2t=200, own_embd=False, own_output=True,
                               nbr=False, n_head=4, n_head_kv=2, n_ff=96),
    "llama2xs-eagle3": dict(target="tinystories/llama2xs.gguf", seed=2, key="extract_layers",
                            layers=[3, 1, 3], d2t=None, own_embd=True, own_output=False,
                            nbr=True, n_head=4, n_head_kv=1, n_ff=80),
}


def f16(a):
    return a.astype(np.float16).astype(np.float64)


def target_model(path):
    kv, tensors, _ = g.read_file(path)
    meta = {k: v for k, (t, v) in kv.items()}
    w = {}
    for name, ne, gtype, data in tensors:
        assert gtype == g.GGML_F32, name
        w[name] = np.frombuffer(data[:4 * int(np.prod(ne))], "<f4").astype(np.float64).reshape(
            list(reversed(ne)))
    a = meta["general.architecture"]
    h = dict(d=meta[a + ".embedding_length"], n_layer=meta[a + ".block_count"],
             n_head=meta[a + ".attention.head_count"],
             n_head_kv=meta.get(a + ".attention.head_count_kv", meta[a + ".attention.head_count"]),
             eps=meta.get(a + ".attention.layer_norm_rms_epsilon", 1e-5),
             base=meta.get(a + ".rope.freq_base", 10000.0), n_vocab=w["token_embd.weight"].shape[0])
    return h, w


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, n_head, hd, base):
    """llama.cpp's normal rope: pairs (2i, 2i+1) of each head rotated by pos * base^(-2i/hd)."""
    x = x.reshape(len(pos), n_head, hd // 2, 2).copy()
    theta = np.outer(pos, base ** (-2.0 * np.arange(hd // 2) / hd))[:, None, :]
    c, s = np.cos(theta), np.sin(theta)
    x0, x1 = x[..., 0].copy(), x[..., 1].copy()
    x[..., 0] = x0 * c - x1 * s
    x[..., 1] = x0 * s + x1 * c
    return x.reshape(len(pos), n_head * hd)


def attend(q, K, V, n_head, n_head_kv, hd, q_pos0):
    """Causal GQA attention: query row t (position q_pos0 + t) over cache rows 0..q_pos0 + t."""
    out = np.zeros((q.shape[0], n_head * hd))
    for t in range(q.shape[0]):
        n = q_pos0 + t + 1
        for hh in range(n_head):
            kh = hh // (n_head // n_head_kv)
            qv = q[t, hh * hd:(hh + 1) * hd]
            sc = K[:n, kh * hd:(kh + 1) * hd] @ qv / np.sqrt(hd)
            p = np.exp(sc - sc.max())
            p /= p.sum()
            out[t, hh * hd:(hh + 1) * hd] = p @ V[:n, kh * hd:(kh + 1) * hd]
    return out


def target_inputs(h, w, tokens):
    """The residual stream entering each layer (index il) for every token: [n_layer, T, d]."""
    x = w["token_embd.weight"][tokens]
    pos = np.arange(len(tokens))
    hd = h["d"] // h["n_head"]
    ins = []
    for il in range(h["n_layer"]):
        ins.append(x.copy())
        p = f"blk.{il}."
        a = rms(x, w[p + "attn_norm.weight"], h["eps"])
        q = rope(a @ w[p + "attn_q.weight"].T, pos, h["n_head"], hd, h["base"])
        k = rope(a @ w[p + "attn_k.weight"].T, pos, h["n_head_kv"], hd, h["base"])
        v = a @ w[p + "attn_v.weight"].T
        x = x + attend(q, k, v, h["n_head"], h["n_head_kv"], hd, 0) @ w[p + "attn_output.weight"].T
        f = rms(x, w[p + "ffn_norm.weight"], h["eps"])
        gt = f @ w[p + "ffn_gate.weight"].T
        x = x + ((gt / (1 + np.exp(-gt))) * (f @ w[p + "ffn_up.weight"].T)) @ w[
            p + "ffn_down.weight"].T
    return np.stack(ins)


def make_head(spec, th, tw):
    """The head's tensors (numpy, F16-rounded float64) and its d2t (or None)."""
    rng = np.random.default_rng(spec["seed"])
    d, nl = th["d"], len(spec["layers"])
    hd = d // spec["n_head"]
    nq, nkv, ff = spec["n_head"] * hd, spec["n_head_kv"] * hd, spec["n_ff"]

    def mat(rows, cols, gain=1.0):
        return f16(rng.standard_normal((rows, cols)) * gain / np.sqrt(cols))

    def vec(n):
        return f16(1.0 + 0.1 * rng.standard_normal(n))

    t = {"fc.weight": mat(d, nl * d), "blk.0.attn_norm.weight": vec(d),
         "blk.0.hidden_norm.weight": vec(d), "blk.0.attn_q.weight": mat(nq, 2 * d),
         "blk.0.attn_k.weight": mat(nkv, 2 * d), "blk.0.attn_v.weight": mat(nkv, 2 * d),
         "blk.0.attn_output.weight": mat(d, nq), "blk.0.ffn_norm.weight": vec(d),
         "blk.0.ffn_gate.weight": mat(ff, d), "blk.0.ffn_up.weight": mat(ff, d),
         "blk.0.ffn_down.weight": mat(d, ff), "output_norm.weight": vec(d)}
    nv = th["n_vocab"]
    d2t = None
    if spec["d2t"]:
        d2t = np.sort(rng.choice(nv, spec["d2t"], replace=False)).astype(np.int64)
    if spec["own_embd"]:
        t["token_embd.weight"] = f16(rng.standard_normal((nv, d)) * 0.5)
    if spec["own_output"]:
        t["output.weight"] = mat(len(d2t) if d2t is not None else nv, d, 2.0)
    return t, d2t


def head_pass(spec, th, tw, t, d2t, st, tokens, gin, pos0):
    """One head pass over rows (tokens[i], gin[i]) at positions pos0 + i; st holds the cache
    (K, V lists) and gets the rows' pre-norm outputs. Returns the last row's target-vocab logits."""
    d, eps = th["d"], th["eps"]
    hd = d // spec["n_head"]
    embed = t.get("token_embd.weight", tw["token_embd.weight"])
    e = rms(embed[tokens], t["blk.0.attn_norm.weight"], eps)
    gn = rms(gin, t["blk.0.hidden_norm.weight"], eps)
    c = np.concatenate([e, gn], axis=1)
    pos = pos0 + np.arange(len(tokens))
    q = rope(c @ t["blk.0.attn_q.weight"].T, pos, spec["n_head"], hd, th["base"])
    k = rope(c @ t["blk.0.attn_k.weight"].T, pos, spec["n_head_kv"], hd, th["base"])
    v = c @ t["blk.0.attn_v.weight"].T
    past = len(st["K"])
    st["K"].extend(k)
    st["V"].extend(v)
    att = attend(q, np.array(st["K"]), np.array(st["V"]), spec["n_head"], spec["n_head_kv"], hd,
                 past)
    x = att @ t["blk.0.attn_output.weight"].T + (gn if spec["nbr"] else gin)
    f = rms(x, t["blk.0.ffn_norm.weight"], eps)
    gt = f @ t["blk.0.ffn_gate.weight"].T
    x = x + ((gt / (1 + np.exp(-gt))) * (f @ t["blk.0.ffn_up.weight"].T)) @ t[
        "blk.0.ffn_down.weight"].T
    st["x"] = x
    out = t.get("output.weight", tw["output.weight"])
    lo = rms(x[-1], t["output_norm.weight"], eps) @ out.T
    if d2t is None:
        return lo
    full = np.full(th["n_vocab"], -np.inf)
    full[d2t] = lo
    return full


def reference(spec, th, tw, t, d2t):
    ins = target_inputs(th, tw, PROMPT)  # [n_layer, T, d]
    feats = np.concatenate([ins[L] for L in spec["layers"]], axis=1)
    g0 = feats @ t["fc.weight"].T
    st = {"K": [], "V": []}
    tokens = PROMPT[1:] + [NEXT]  # position p takes t_{p+1}
    steps = []
    logits = head_pass(spec, th, tw, t, d2t, st, tokens, g0, 0)
    for i in range(CHAIN):
        tok = int(np.argmax(logits))
        steps.append({"draft": tok, "logits": [None if np.isinf(v) else float(v) for v in logits]})
        if i + 1 < CHAIN:
            logits = head_pass(spec, th, tw, t, d2t, st, [tok], st["x"][-1:], len(st["K"]))
    return {"prompt": PROMPT, "next": NEXT, "layers": spec["layers"], "steps": steps}


def write_head(path, spec, th, t, d2t):
    w = g.Writer()
    a = "eagle3."
    w.add("general.architecture", g.T_STR, "eagle3")
    w.add("general.name", g.T_STR, "random EAGLE-3 head (scripts/models/eagle3_head.py)")
    for key, val in (("context_length", 512), ("embedding_length", th["d"]), ("block_count", 1),
                     ("feed_forward_length", spec["n_ff"]),
                     ("attention.head_count", spec["n_head"]),
                     ("attention.head_count_kv", spec["n_head_kv"]),
                     ("target_hidden_size", th["d"])):
        w.add(a + key, g.T_U32, val)
    w.add(a + "attention.layer_norm_rms_epsilon", g.T_F32, th["eps"])
    w.add(a + "rope.freq_base", g.T_F32, th["base"])
    w.add(a + spec["key"], g.T_ARR, (g.T_I32, spec["layers"]))
    if spec["nbr"]:
        w.add(a + "norm_before_residual", g.T_BOOL, True)
    for name, arr in t.items():
        w.tensor(name, arr, g.GGML_F32 if arr.ndim == 1 else g.GGML_F16)
    if d2t is not None:
        w.raw_tensor("d2t", [len(d2t)], GGML_I64, d2t.astype("<i8").tobytes())
    w.write(path)


def bench_head(target, out, wtype):
    """A timing head for `target` (metadata only): random weights, no d2t, the target's vocab."""
    with open(target, "rb") as fh:  # the metadata alone (an 8B target's file is 16 GB)
        head = fh.read(256 << 20)
    kv = {k: v for k, (t, v) in g._read_head(head, target)[0].items()}
    a = kv["general.architecture"]
    n = kv[a + ".block_count"]
    th = dict(d=kv[a + ".embedding_length"], eps=kv.get(a + ".attention.layer_norm_rms_epsilon",
                                                        1e-5),
              base=kv.get(a + ".rope.freq_base", 10000.0))
    spec = dict(seed=1, key="target_layers", layers=[2, n // 2, n - 3], nbr=False,
                n_head=kv[a + ".attention.head_count"],
                n_head_kv=kv.get(a + ".attention.head_count_kv", kv[a + ".attention.head_count"]),
                n_ff=kv[a + ".feed_forward_length"])
    rng = np.random.default_rng(1)
    d, hd = th["d"], th["d"] // spec["n_head"]
    shapes = {"fc.weight": (d, 3 * d), "blk.0.attn_q.weight": (spec["n_head"] * hd, 2 * d),
              "blk.0.attn_k.weight": (spec["n_head_kv"] * hd, 2 * d),
              "blk.0.attn_v.weight": (spec["n_head_kv"] * hd, 2 * d),
              "blk.0.attn_output.weight": (d, spec["n_head"] * hd),
              "blk.0.ffn_gate.weight": (spec["n_ff"], d), "blk.0.ffn_up.weight": (spec["n_ff"], d),
              "blk.0.ffn_down.weight": (d, spec["n_ff"])}
    t = {name: (rng.standard_normal(sh, dtype=np.float32) / np.sqrt(sh[1])) for name, sh in
         shapes.items()}
    for name in ("blk.0.attn_norm.weight", "blk.0.hidden_norm.weight", "blk.0.ffn_norm.weight",
                 "output_norm.weight"):
        t[name] = np.ones(d, dtype=np.float32)
    n_vocab = len(kv["tokenizer.ggml.tokens"][1])
    d2t = None
    if n_vocab > 32000:
        d2t = np.sort(rng.choice(n_vocab, 32000, replace=False)).astype(np.int64)
        t["output.weight"] = rng.standard_normal((32000, d), dtype=np.float32) / np.sqrt(d)
    gtype = {"f16": g.GGML_F16, "q8_0": g.GGML_Q8_0}[wtype]
    w = g.Writer()
    w.add("general.architecture", g.T_STR, "eagle3")
    for key, val in (("context_length", kv[a + ".context_length"]), ("embedding_length", d),
                     ("block_count", 1), ("feed_forward_length", spec["n_ff"]),
                     ("attention.head_count", spec["n_head"]),
                     ("attention.head_count_kv", spec["n_head_kv"]), ("target_hidden_size", d)):
        w.add("eagle3." + key, g.T_U32, val)
    w.add("eagle3.attention.layer_norm_rms_epsilon", g.T_F32, th["eps"])
    w.add("eagle3.rope.freq_base", g.T_F32, th["base"])
    w.add("eagle3.target_layers", g.T_ARR, (g.T_I32, spec["layers"]))
    for name, arr in t.items():
        w.tensor(name, arr, g.GGML_F32 if arr.ndim == 1 else gtype)
    if d2t is not None:
        w.raw_tensor("d2t", [len(d2t)], GGML_I64, d2t.astype("<i8").tobytes())
    w.write(out)
    print(out, "layers", spec["layers"], wtype, "d2t" if d2t is not None else "shared vocabulary")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(HERE, "../../tests/data/eagle3"))
    ap.add_argument("--shared", default=os.path.join(HERE, "../../../shared"))
    ap.add_argument("--bench", metavar="TARGET", help="write a timing head for TARGET to OUT")
    ap.add_argument("--type", default="f16", choices=["f16", "q8_0"])
    args = ap.parse_args()
    if args.bench:
        return bench_head(args.bench, args.out, args.type)
    os.makedirs(args.out, exist_ok=True)
    for stem, spec in HEADS.items():
        th, tw = target_model(os.path.join(args.shared, "models", spec["target"]))
        t, d2t = make_head(spec, th, tw)
        write_head(os.path.join(args.out, stem + ".gguf"), spec, th, t, d2t)
        ref = reference(spec, th, tw, t, d2t)
        ref["target"] = "models/" + spec["target"]
        with open(os.path.join(args.out, stem + ".json"), "w") as f:
            json.dump(ref, f, separators=(",", ":"))
            f.write("\n")
        print(stem, [s["draft"] for s in ref["steps"]])


if __name__ == "__main__":
    main()
