"""The phi3 and mistral3 files of tests/data/arch (make_arch_models.py calls write_all):

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
writes them: rows Q | K | V and gate | up), tok512 vocabulary, weights seeded per tensor as in
make_arch_models.py. general.name avoids "phi3" and "phi-3": ik_llama.cpp's vocabulary loader
marks Phi-3's special tokens (absent from tok512) for models so named.
"""
import os

import numpy as np

import gguf_min as g

D, N_HEAD, N_KV, HEAD_DIM, FF, VOCAB = 192, 3, 1, 64, 256, 512
RES_SCALE = [1.0, 0.15]


def _tensors(arch, n_layer, randn, longrope):
    dq, dkv = N_HEAD * HEAD_DIM, N_KV * HEAD_DIM

    def norm_w(name, n, scale=1.0):
        return scale * randn(name, (n,), 0.1, 1.0)

    pre = arch + "|"  # the two architectures get their own weights
    out = [("token_embd.weight", randn(pre + "token_embd.weight", (VOCAB, D), 1.0), True)]
    if longrope:
        # Real LongRoPE factors grow from ~1 to tens over the frequencies; short ones stay near 1.
        n = HEAD_DIM // 2
        out.append(("rope_factors_long.weight",
                    np.geomspace(1.0, 40.0, n).astype(np.float32), False))
        out.append(("rope_factors_short.weight",
                    (1.0 + 0.05 * np.abs(randn(pre + "rope_short", (n,), 1.0))).astype(np.float32),
                    False))
    for il in range(n_layer):
        p = f"blk.{il}."
        r = RES_SCALE[il]
        out.append((p + "attn_norm.weight", norm_w(pre + p + "attn_norm.weight", D), False))
        # Q scaled x1.5: attention peaked enough to depend on position.
        wq = randn(pre + p + "attn_q.weight", (dq, D), 1.5 * D**-0.5)
        wk = randn(pre + p + "attn_k.weight", (dkv, D), D**-0.5)
        wv = randn(pre + p + "attn_v.weight", (dkv, D), D**-0.5)
        if arch == "phi3":
            out.append((p + "attn_qkv.weight", np.concatenate([wq, wk, wv]), True))
        else:
            out.append((p + "attn_q.weight", wq, True))
            out.append((p + "attn_k.weight", wk, True))
            out.append((p + "attn_v.weight", wv, True))
        out.append((p + "attn_output.weight",
                    randn(pre + p + "attn_output.weight", (D, dq), r * dq**-0.5), True))
        out.append((p + "ffn_norm.weight", norm_w(pre + p + "ffn_norm.weight", D), False))
        gate = randn(pre + p + "ffn_gate.weight", (FF, D), D**-0.5)
        up = randn(pre + p + "ffn_up.weight", (FF, D), D**-0.5)
        if arch == "phi3":
            out.append((p + "ffn_up.weight", np.concatenate([gate, up]), True))
        else:
            out.append((p + "ffn_gate.weight", gate, True))
            out.append((p + "ffn_up.weight", up, True))
        out.append((p + "ffn_down.weight",
                    randn(pre + p + "ffn_down.weight", (D, FF), r * FF**-0.5), True))
    out.append(("output_norm.weight", norm_w(pre + "output_norm.weight", D, 4.0), False))
    outw = randn(pre + "output.weight", (VOCAB, D), D**-0.5)
    outw *= np.exp(randn(pre + "output.rownorm", (VOCAB, 1), 0.25))
    out.append(("output.weight", outw, True))
    return out


def _write(path, arch, n_layer, wtype, name, vocab_kv, randn, extra_kv, longrope=False):
    w = g.Writer()
    a = arch + "."
    w.add("general.architecture", g.T_STR, arch)
    w.add("general.name", g.T_STR, name)
    for key, t, v in [("context_length", g.T_U32, 4096),
                      ("embedding_length", g.T_U32, D),
                      ("block_count", g.T_U32, n_layer),
                      ("feed_forward_length", g.T_U32, FF),
                      ("attention.head_count", g.T_U32, N_HEAD),
                      ("attention.head_count_kv", g.T_U32, N_KV),
                      ("attention.layer_norm_rms_epsilon", g.T_F32, 1e-5),
                      ("rope.dimension_count", g.T_U32, HEAD_DIM)] + extra_kv:
        w.add(a + key, t, v)
    w.add(a + "vocab_size", g.T_U32, VOCAB)
    for k, (t, v) in vocab_kv.items():
        w.add(k, t, v)
    w.add("general.quantization_version", g.T_U32, 2)
    w.add("general.file_type", g.T_U32, {g.GGML_F16: 1, g.GGML_Q8_0: 7}[wtype])
    for tname, arr, is_matrix in _tensors(arch, n_layer, randn, longrope):
        w.tensor(tname, arr, wtype if is_matrix else g.GGML_F32)
    w.write(path)
    print(path, os.path.getsize(path), "bytes")


def write_all(o, vocab, randn):
    """Writes the four files into directory o; randn(name, shape, std, mean=0) is the seeded
    generator of make_arch_models.py."""
    phi3_longrope = [("rope.freq_base", g.T_F32, 10000.0),
                     ("rope.scaling.attn_factor", g.T_F32, 1.19),
                     ("rope.scaling.original_context_length", g.T_U32, 256),
                     ("attention.sliding_window", g.T_U32, 24)]
    phi4 = [("rope.freq_base", g.T_F32, 250000.0),
            ("attention.sliding_window", g.T_U32, 0)]
    _write(f"{o}/rand-phi3-swa-longrope-tok512-d192-l2-F16.gguf", "phi3", 2, g.GGML_F16,
           "rand-phi-swa-longrope-tok512-d192-l2", vocab, randn, phi3_longrope, longrope=True)
    _write(f"{o}/rand-phi3-tok512-d192-l2-Q8_0.gguf", "phi3", 2, g.GGML_Q8_0,
           "rand-phi4-tok512-d192-l2", vocab, randn, phi4)
    _write(f"{o}/rand-phi3-tok512-d192-l1-draft-Q8_0.gguf", "phi3", 1, g.GGML_Q8_0,
           "rand-phi4-tok512-d192-l1-draft", vocab, randn, phi4)
    mistral3 = [("rope.freq_base", g.T_F32, 1e6),
                ("rope.scaling.type", g.T_STR, "yarn"),
                ("rope.scaling.factor", g.T_F32, 16.0),
                ("rope.scaling.original_context_length", g.T_U32, 64),
                ("rope.scaling.yarn_beta_fast", g.T_F32, 32.0),
                ("rope.scaling.yarn_beta_slow", g.T_F32, 1.0),
                ("rope.scaling.yarn_log_multiplier", g.T_F32, 0.8),
                ("attention.temperature_scale", g.T_F32, 0.1)]
    _write(f"{o}/rand-mistral3-yarn-tok512-d192-l2-Q8_0.gguf", "mistral3", 2, g.GGML_Q8_0,
           "rand-mistral3-yarn-tok512-d192-l2", vocab, randn, mistral3)
