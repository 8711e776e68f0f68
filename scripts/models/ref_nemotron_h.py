#!/usr/bin/python3
"""The reference logits of the nemotron_h test files, from an independent float64 numpy forward
(no peer engine runs nemotron_h: ik_llama.cpp has only Mamba-1, the llama.cpp of ../shared/peers
predates Mamba-2), written as make_arch_refs.sh writes ik_llama.cpp's (format llama-ref-dump/1),
so that test_model_parity_arch checks them as it checks the others:

  scripts/models/ref_nemotron_h.py [DATA_DIR]     (default tests/data/arch)

reads DATA_DIR/rand-nemotron_h-*.gguf and writes DATA_DIR/<stem>.json. The prompts and their
token ids are those of the other tok512 files' references (the same vocabulary:
rand-qwen35-tok512-d128-l4-F16.json); per prompt every position's top-10 logits, then 32 greedy
steps (each the argmax of the previous row, fed back one token at a time).

The forward is written from the model's definition (llama.cpp's nemotron_h graph, Hugging Face's
NemotronH / Mamba2 mixer), not from Specula's code, one token at a time, with the weights as the
file stores them (F16 and Q8_0 dequantized exactly) in float64:
  x = token_embd[t]; per layer h = rms_norm(x) * attn_norm (eps from the file), then one of
  Mamba-2: [z | xBC | dt] = ssm_in h; xBC = silu(causal conv over the last d_conv inputs + bias);
           x_h (heads of d_inner / n_head), B, C (n_group rows of d_state; head h reads group
           h / (n_head / n_group)); dt = softplus(dt + dt_bias); S_h = exp(dt_h A_h) S_h +
           dt_h x_h B^T; y_h = S_h C + D_h x_h; y = y * silu(z), RMS-normed per group of
           d_inner / n_group times ssm_norm; out = ssm_out y
  attention: GQA of q, k, v (no rope), scale 1/sqrt(head_dim), V rounded to F16 (the sessions'
           V cache type, eval.type_v); out = attn_output att
  MLP:     out = ffn_down relu(ffn_up h)^2
  x += out; logits = output (rms_norm(x) * output_norm).
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_writer as g  # noqa: E402

PROMPTS_FROM = "rand-qwen35-tok512-d128-l4-F16.json"
N_GEN, TOP_K = 32, 10


def dequant(ne, gtype, data):
    n = int(np.prod(ne))
    if gtype == 0:
        a = np.frombuffer(data[:4 * n], "<f4")
    elif gtype == 1:
        a = np.frombuffer(data[:2 * n], "<f2")
    elif gtype == 8:
        b = np.frombuffer(data[:n // 32 * 34], dtype=[("d", "<f2"), ("q", "i1", 32)])
        a = b["d"].astype(np.float64)[:, None] * b["q"].astype(np.float64)
    else:
        raise ValueError(f"ggml type {gtype} not handled")
    return a.astype(np.float64).reshape(list(reversed(ne)))


def load(path):
    kv, tensors, _ = g.read_file(path)
    w = {name: dequant(ne, t, data) for name, ne, t, data in tensors}
    n_params = sum(int(np.prod(ne)) for _, ne, _, _ in tensors)
    return {k: v[1] for k, v in kv.items()}, w, n_params


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


class Model:
    def __init__(self, path):
        self.kv, self.w, self.n_params = load(path)
        a = "nemotron_h."
        k = self.kv
        self.n_layer, self.eps = k[a + "block_count"], k[a + "attention.layer_norm_rms_epsilon"]
        self.n_head, self.hd = k[a + "attention.head_count"], k[a + "attention.key_length"]
        self.kv_arr = k[a + "attention.head_count_kv"][1]
        self.ff_arr = k[a + "feed_forward_length"][1]
        self.d_conv, self.di = k[a + "ssm.conv_kernel"], k[a + "ssm.inner_size"]
        self.ds, self.nh = k[a + "ssm.state_size"], k[a + "ssm.time_step_rank"]
        self.ng = k[a + "ssm.group_count"]
        self.reset()

    def kind(self, il):
        return "A" if self.kv_arr[il] > 0 else "F" if self.ff_arr[il] > 0 else "M"

    def reset(self):
        conv_dim = self.di + 2 * self.ng * self.ds
        self.conv = [np.zeros((self.d_conv - 1, conv_dim)) for _ in range(self.n_layer)]
        self.ssm = [np.zeros((self.nh, self.di // self.nh, self.ds)) for _ in range(self.n_layer)]
        self.K = [[] for _ in range(self.n_layer)]
        self.V = [[] for _ in range(self.n_layer)]

    def mamba2(self, il, h):
        p, w = f"blk.{il}.", self.w
        di, ng, ds, nh = self.di, self.ng, self.ds, self.nh
        zxbcdt = w[p + "ssm_in.weight"] @ h
        z, xbc, dt = zxbcdt[:di], zxbcdt[di:2 * di + 2 * ng * ds], zxbcdt[2 * di + 2 * ng * ds:]
        win = np.vstack([self.conv[il], xbc[None, :]])  # oldest first
        self.conv[il] = win[1:]
        c = silu(np.sum(win.T * w[p + "ssm_conv1d.weight"], axis=1) + w[p + "ssm_conv1d.bias"])
        x = c[:di].reshape(nh, di // nh)
        B = c[di:di + ng * ds].reshape(ng, ds)
        C = c[di + ng * ds:].reshape(ng, ds)
        dt = dt + w[p + "ssm_dt.bias"]
        dt = np.where(dt > 20, dt, np.log1p(np.exp(np.minimum(dt, 20))))
        A, D = w[p + "ssm_a"][:, 0], w[p + "ssm_d"][:, 0]
        grp = np.arange(nh) // (nh // ng)
        S = self.ssm[il] * np.exp(dt * A)[:, None, None] + \
            (x * dt[:, None])[:, :, None] * B[grp][:, None, :]
        self.ssm[il] = S
        y = np.einsum("hpn,hn->hp", S, C[grp]) + x * D[:, None]
        y = y.reshape(di) * silu(z)
        y = rms(y.reshape(ng, di // ng), w[p + "ssm_norm.weight"], self.eps).reshape(di)
        return w[p + "ssm_out.weight"] @ y

    def attention(self, il, h):
        p, w = f"blk.{il}.", self.w
        nh, nkv, hd = self.n_head, self.kv_arr[il], self.hd
        q = (w[p + "attn_q.weight"] @ h).reshape(nh, hd)
        self.K[il].append((w[p + "attn_k.weight"] @ h).reshape(nkv, hd))
        v = (w[p + "attn_v.weight"] @ h).astype(np.float16).astype(np.float64)
        self.V[il].append(v.reshape(nkv, hd))
        K, V = np.stack(self.K[il]), np.stack(self.V[il])  # [T, nkv, hd]
        out = np.empty((nh, hd))
        for hh in range(nh):
            kh = hh // (nh // nkv)
            s = K[:, kh, :] @ q[hh] / np.sqrt(hd)
            e = np.exp(s - s.max())
            out[hh] = (e / e.sum()) @ V[:, kh, :]
        return w[p + "attn_output.weight"] @ out.reshape(nh * hd)

    def mlp(self, il, h):
        p, w = f"blk.{il}.", self.w
        u = np.maximum(w[p + "ffn_up.weight"] @ h, 0.0)
        return w[p + "ffn_down.weight"] @ (u * u)

    def step(self, tok):
        w = self.w
        x = w["token_embd.weight"][tok].copy()
        for il in range(self.n_layer):
            h = rms(x, w[f"blk.{il}.attn_norm.weight"], self.eps)
            kind = self.kind(il)
            x = x + (self.mamba2(il, h) if kind == "M" else
                     self.attention(il, h) if kind == "A" else self.mlp(il, h))
        head = w.get("output.weight", w["token_embd.weight"])
        return head @ rms(x, w["output_norm.weight"], self.eps)


def top(logits):
    idx = np.argsort(-logits, kind="stable")[:TOP_K]
    return [[int(i), float(np.float32(logits[i]))] for i in idx]


def reference(path, prompts):
    m = Model(path)
    k = m.kv
    out = {"format": "llama-ref-dump/1",
           "model": {"file": os.path.basename(path), "general.name": k["general.name"],
                     "general.architecture": k["general.architecture"],
                     "general.file_type": str(k["general.file_type"]), "n_params": m.n_params,
                     "n_vocab": k["nemotron_h.vocab_size"],
                     "n_ctx_train": k["nemotron_h.context_length"],
                     "n_embd": k["nemotron_h.embedding_length"], "n_layer": m.n_layer,
                     "n_head": m.n_head, "path": os.path.basename(path)},
           "eval": {"engine": "numpy float64 (scripts/models/ref_nemotron_h.py)", "n_threads": 1,
                    "n_ctx": 512, "type_k": "f32", "type_v": "f16", "flash_attn": False,
                    "top_k": TOP_K, "n_gen": N_GEN},
           "prompts": []}
    for p in prompts:
        m.reset()
        ids = p["token_ids"]
        rows = [m.step(t) for t in ids]
        steps, gids = [], []
        last = rows[-1]
        for i in range(N_GEN):
            t = int(np.argmax(last))
            gids.append(t)
            last = m.step(t)
            steps.append({"pos": len(ids) + i, "input_token": t, "top": top(last)})
        out["prompts"].append({"name": p["name"], "text": p["text"],
                               "n_prompt_tokens": len(ids), "token_ids": ids,
                               "prompt_top": [top(r) for r in rows],
                               "greedy": {"token_ids": gids, "steps": steps}})
    return out


def dump(ref, f):
    """One prompt row per line, as make_arch_refs.sh's files (small diffs on a change)."""
    f.write("{\n")
    head = [f'"{k}": {json.dumps(ref[k])}' for k in ("format", "model", "eval")]
    f.write(",\n".join(head) + ',\n"prompts": [\n')
    for i, p in enumerate(ref["prompts"]):
        f.write("{" + ", ".join(f'"{k}": {json.dumps(p[k])}' for k in
                                ("name", "text", "n_prompt_tokens", "token_ids")))
        f.write(',\n "prompt_top": [\n  ' + ",\n  ".join(json.dumps(r) for r in p["prompt_top"]))
        f.write('],\n "greedy": {"token_ids": ' + json.dumps(p["greedy"]["token_ids"]))
        f.write(', "steps": [\n  ' + ",\n  ".join(json.dumps(s) for s in p["greedy"]["steps"]))
        f.write("]}}" + ("," if i + 1 < len(ref["prompts"]) else "") + "\n")
    f.write("]}\n")


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../tests/data/arch")
    with open(os.path.join(data, PROMPTS_FROM)) as f:
        prompts = [{k: p[k] for k in ("name", "text", "token_ids")}
                   for p in json.load(f)["prompts"]]
    for name in sorted(os.listdir(data)):
        if not (name.startswith("rand-nemotron_h-") and name.endswith(".gguf")):
            continue
        ref = reference(os.path.join(data, name), prompts)
        out = os.path.join(data, name[:-5] + ".json")
        with open(out, "w") as f:
            dump(ref, f)
        print(out)


if __name__ == "__main__":
    main()
