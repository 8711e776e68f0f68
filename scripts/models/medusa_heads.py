#!/usr/bin/python3
"""Random-weight Medusa heads for stories260K through the checkpoint converter, and their draft
logits from an independent float64 numpy forward of target and heads:

  python3 scripts/models/medusa_heads.py [OUT_DIR] [--shared SHARED_DIR]

writes OUT_DIR (default tests/data/medusa):
  stories260K-medusa-hf.gguf     3 heads, 1 block each, their own output matrices (F32), converted
                                 from a Hugging Face layout checkpoint (medusa_head.*)
  stories260K-medusa-vllm.gguf   2 heads, 2 blocks each, no output matrices (the target's),
                                 converted from a vLLM layout checkpoint (blocks.*, no lm_heads)
  rand-qwen35-mtp1-medusa.gguf   2 heads, 2 blocks, the target's output, for
                                 tests/data/arch/rand-qwen35-mtp1-tok512-d128-l4-F16.gguf (a target
                                 whose final hidden states the model library keeps: the greedy test)
  stories260K-*.json             the prompt, the target's final hidden state at its last token
                                 (after the output norm), and per head its logits and argmax

The heads (Medusa, arXiv:2401.10774): h = rms(x_last) * output_norm (the target's final hidden
state after its norm); per head x = h, then x = x + silu(W x + b) per block; logits = O x (O: the
head's own output matrix, else the target's). A rerun writes the same bytes.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import eagle3_head as e3  # noqa: E402  (the numpy target: target_model, rms, rope, attend)
import gguf_writer as g  # noqa: E402
import medusa_convert as mc  # noqa: E402

PROMPT = [1, 403, 407, 261, 378, 30, 262, 504, 286, 312, 265, 289, 414, 266, 327, 397, 274]
FILES = {
    "stories260K-medusa-hf": dict(seed=43, heads=3, blocks=1, layout="hf"),
    "stories260K-medusa-vllm": dict(seed=44, heads=2, blocks=2, layout="vllm"),
    "rand-qwen35-mtp1-medusa": dict(seed=45, heads=2, blocks=2, layout="vllm"),
}
QWEN35 = "rand-qwen35-mtp1-medusa"
QWEN35_TARGET = "rand-qwen35-mtp1-tok512-d128-l4-F16.gguf"


def final_hidden(h, w, tokens):
    """The target's last layer output at every token (before the output norm): [T, d]."""
    x = w["token_embd.weight"][tokens]
    pos = np.arange(len(tokens))
    hd = h["d"] // h["n_head"]
    for il in range(h["n_layer"]):
        p = f"blk.{il}."
        a = e3.rms(x, w[p + "attn_norm.weight"], h["eps"])
        q = e3.rope(a @ w[p + "attn_q.weight"].T, pos, h["n_head"], hd, h["base"])
        k = e3.rope(a @ w[p + "attn_k.weight"].T, pos, h["n_head_kv"], hd, h["base"])
        v = a @ w[p + "attn_v.weight"].T
        x = x + e3.attend(q, k, v, h["n_head"], h["n_head_kv"], hd, 0) @ w[
            p + "attn_output.weight"].T
        f = e3.rms(x, w[p + "ffn_norm.weight"], h["eps"])
        gt = f @ w[p + "ffn_gate.weight"].T
        x = x + ((gt / (1 + np.exp(-gt))) * (f @ w[p + "ffn_up.weight"].T)) @ w[
            p + "ffn_down.weight"].T
    return x


def checkpoint(spec, d, vocab):
    """Random heads in the spec's layout: (tensors, per head ([(W, b)], O or None))."""
    rng = np.random.default_rng(spec["seed"])
    f32 = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731 (what the file holds)
    t, heads = {}, []
    for i in range(spec["heads"]):
        blocks = []
        for j in range(spec["blocks"]):
            wm = f32(rng.normal(0, 0.5 / np.sqrt(d), (d, d)))
            b = f32(rng.normal(0, 0.1, d))
            names = ((f"medusa_head.{i}.{j}.linear.weight", f"medusa_head.{i}.{j}.linear.bias")
                     if spec["layout"] == "hf" else
                     (f"blocks.{i}.layers.{j}.weight", f"blocks.{i}.layers.{j}.bias"))
            t[names[0]], t[names[1]] = wm, b
            blocks.append((wm, b))
        o = None
        if spec["layout"] == "hf":
            o = f32(rng.normal(0, 1.0 / np.sqrt(d), (vocab, d)))
            t[f"medusa_head.{i}.{spec['blocks']}.weight"] = o
        heads.append((blocks, o))
    return t, heads


def convert_checkpoint(t, spec, d, target, out):
    """Writes the checkpoint (safetensors + config.json) to a temporary folder and converts it."""
    with tempfile.TemporaryDirectory() as ckpt:
        mc.write_safetensors(os.path.join(ckpt, "medusa_lm_head.safetensors"), t)
        cfg = ({"medusa_num_heads": spec["heads"], "medusa_num_layers": spec["blocks"]}
               if spec["layout"] == "hf" else
               {"num_heads": spec["heads"], "num_hidden_layers": spec["blocks"]})
        cfg["hidden_size"] = d
        with open(os.path.join(ckpt, "config.json"), "w") as f:
            json.dump(cfg, f)
        mc.convert(ckpt, target, out, g.GGML_F32, "random Medusa heads (medusa_heads.py)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=os.path.join(HERE, "..", "..", "tests", "data",
                                                           "medusa"))
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "..", "shared"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    target = os.path.join(a.shared, "models", "tinystories", "stories260K.gguf")
    th, tw = e3.target_model(target)
    vocab = th["n_vocab"]
    hn = e3.rms(final_hidden(th, tw, PROMPT)[-1], tw["output_norm.weight"], th["eps"])
    for stem, spec in FILES.items():
        if stem == QWEN35:
            qt = os.path.join(HERE, "..", "..", "tests", "data", "arch", QWEN35_TARGET)
            qm = {k: v for k, (_, v) in g.read_metadata(qt).items()}
            t, _ = checkpoint(spec, qm["qwen35.embedding_length"], 0)
            convert_checkpoint(t, spec, qm["qwen35.embedding_length"], qt,
                               os.path.join(a.out, stem + ".gguf"))
            print(f"wrote {stem}.gguf")
            continue
        t, heads = checkpoint(spec, th["d"], vocab)
        convert_checkpoint(t, spec, th["d"], target, os.path.join(a.out, stem + ".gguf"))
        ref = {"prompt": PROMPT, "hidden": [float(v) for v in hn], "logits": [], "draft": []}
        for blocks, o in heads:
            x = hn.copy()
            for wm, b in blocks:
                z = wm @ x + b
                x = x + z / (1 + np.exp(-z))
            logits = (o if o is not None else tw["output.weight"]) @ x
            ref["logits"].append([round(float(v), 6) for v in logits])
            ref["draft"].append(int(np.argmax(logits)))
        with open(os.path.join(a.out, stem + ".json"), "w") as f:
            json.dump(ref, f)
            f.write("\n")
        print(f"wrote {stem}.gguf / .json: draft {ref['draft']}")


if __name__ == "__main__":
    main()
