"""The qwen35 and qwen35moe files of tests/data/arch (make_arch_models.py calls write_all):

  rand-qwen35-tok512-d128-l4-F16.gguf        qwen35 (Qwen3.5 dense): 4 layers, full attention
                      every 4th (layer 3, the last; full_attention_interval 4). DeltaNet: conv
                      kernel 4, 1 key head and 2 value heads of 64 (inner_size 128, conv_dim
                      256); attention: 4 heads of 32 (Q doubled with its output gate), 2 KV
                      heads, rope on 8 of 32 dimensions (IMROPE sections 2,1,1,0: every rotated
                      pair follows the text position), ffn 128
  rand-qwen35-mtp1-tok512-d128-l4-F16.gguf   the same 4 layers plus one MTP (nextn) layer, blk.4:
                      gated full attention without an FFN (as Qwen3.5's small models), eh_proj,
                      enorm, hnorm, shared_head_norm; the output head and embedding shared
  rand-qwen35moe-e8x2-tok512-d128-l3-F16.gguf   qwen35moe (Qwen3.5/3.6 MoE): 3 layers, full
                      attention every 2nd (layer 1), so the last (2) is a DeltaNet one; DeltaNet
                      with 2 key heads and 4 value heads of 64 (value head h reads key head
                      h % 2); IMROPE sections 1,1,1,1 (the fourth pair takes the vision position,
                      0 for text: unrotated); 8 experts of 16, top 2, a shared expert of 64 with
                      its sigmoid gate; the router at 10x the usual scale (top-2 picks with clear
                      margins: a near tie flips on rounding and is no test of the arithmetic)
  rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf   the same 3 layers plus one MTP layer, blk.3,
                      with its own MoE FFN (routed experts and the shared one), as Qwen3.5 MoE's

The DeltaNet heads are 64 wide: ik_llama.cpp's delta rule takes its SIMD path for 64 and 128 (the
widths real models have); its scalar fallback for other widths reads the decay and beta of a
multi-token batch with the wrong stride.

tok512 vocabulary, weights seeded per tensor as in make_arch_models.py. The recurrent parameters
keep the state alive: ssm_a = -exp(N(0, 0.5)), dt bias around -1 (decay ~0.75 a step).
"""
import os

import numpy as np

import gguf_min as g

D, VOCAB, CTX = 128, 512, 4096
N_HEAD, N_KV, HEAD_DIM, N_ROT = 4, 2, 32, 8
D_CONV, D_STATE = 4, 64
FF = 128
N_EXPERT, N_USED, FF_EXP, FF_SHEXP = 8, 2, 16, 64
# Per architecture: (key heads, value heads, full_attention_interval).
ROUTER_STD = 10.0
# output_norm scale: logit std ~2 (the other files: ~4). The gated RMSNorm after the delta rule
# renormalises small outputs, so float rounding differences reach the logits larger than in the
# other architectures; at half the logit scale both files stay within the F16 tolerance.
OUT_SCALE = 2.0
SHAPE = {"qwen35": (1, 2, 4), "qwen35moe": (2, 4, 2)}
MTP_FFN = False  # the dense MTP layer's FFN (the qwen35 test file has none; timing files do)


def _tensors(arch, n_layer, randn, n_nextn=0, mtp_ffn=None):
    mtp_ffn = MTP_FFN if mtp_ffn is None else mtp_ffn
    pre = arch + "|"

    def norm_w(name, n, scale=1.0):
        return scale * randn(pre + name, (n,), 0.1, 1.0)

    def mat(name, shape, std):
        return randn(pre + name, shape, std)

    N_GROUP, DT_RANK, INTERVAL = SHAPE[arch]
    key_dim, value_dim = D_STATE * N_GROUP, D_STATE * DT_RANK
    conv_dim = 2 * key_dim + value_dim
    out = [("token_embd.weight", mat("token_embd.weight", (VOCAB, D), 1.0), True)]
    for il in range(n_layer):
        p = f"blk.{il}."
        r = 1.0 if il == 0 else 0.4
        out.append((p + "attn_norm.weight", norm_w(p + "attn_norm", D), False))
        mtp = il >= n_layer - n_nextn
        if (il + 1) % INTERVAL != 0 and not mtp:
            out.append((p + "attn_qkv.weight", mat(p + "attn_qkv", (conv_dim, D), D**-0.5), True))
            out.append((p + "attn_gate.weight", mat(p + "attn_gate", (value_dim, D), D**-0.5), True))
            out.append((p + "ssm_conv1d.weight", mat(p + "ssm_conv1d", (conv_dim, D_CONV), 0.6), False))
            out.append((p + "ssm_dt.bias", randn(pre + p + "ssm_dt", (DT_RANK,), 0.3, -1.0), False))
            out.append((p + "ssm_a", -np.exp(randn(pre + p + "ssm_a", (DT_RANK,), 0.5)), False))
            out.append((p + "ssm_beta.weight", mat(p + "ssm_beta", (DT_RANK, D), D**-0.5), True))
            out.append((p + "ssm_alpha.weight", mat(p + "ssm_alpha", (DT_RANK, D), D**-0.5), True))
            out.append((p + "ssm_norm.weight", norm_w(p + "ssm_norm", D_STATE), False))
            out.append((p + "ssm_out.weight", mat(p + "ssm_out", (D, value_dim), r * value_dim**-0.5), True))
        else:
            dq, dkv = N_HEAD * HEAD_DIM, N_KV * HEAD_DIM
            out.append((p + "attn_q.weight", mat(p + "attn_q", (2 * dq, D), 1.5 * D**-0.5), True))
            out.append((p + "attn_k.weight", mat(p + "attn_k", (dkv, D), D**-0.5), True))
            out.append((p + "attn_v.weight", mat(p + "attn_v", (dkv, D), D**-0.5), True))
            out.append((p + "attn_output.weight", mat(p + "attn_output", (D, dq), r * dq**-0.5), True))
            out.append((p + "attn_q_norm.weight", randn(pre + p + "attn_q_norm", (HEAD_DIM,), 0.3, 1.5), False))
            out.append((p + "attn_k_norm.weight", randn(pre + p + "attn_k_norm", (HEAD_DIM,), 0.3, 1.5), False))
        out.append((p + "post_attention_norm.weight", norm_w(p + "post_attention_norm", D), False))
        if mtp:  # the MTP head's nextn tensors; its FFN only with MTP_FFN
            out.append((p + "nextn.eh_proj.weight", mat(p + "nextn.eh_proj", (D, 2 * D), (2 * D)**-0.5), True))
            out.append((p + "nextn.enorm.weight", norm_w(p + "nextn.enorm", D), False))
            out.append((p + "nextn.hnorm.weight", norm_w(p + "nextn.hnorm", D), False))
            out.append((p + "nextn.shared_head_norm.weight",
                        norm_w(p + "nextn.shared_head_norm", D, OUT_SCALE), False))
            if not mtp_ffn:
                continue
        if arch == "qwen35moe":
            out.append((p + "ffn_gate_inp.weight", mat(p + "ffn_gate_inp", (N_EXPERT, D), ROUTER_STD * D**-0.5), False))
            out.append((p + "ffn_gate_exps.weight", mat(p + "ffn_gate_exps", (N_EXPERT, FF_EXP, D), D**-0.5), True))
            out.append((p + "ffn_up_exps.weight", mat(p + "ffn_up_exps", (N_EXPERT, FF_EXP, D), D**-0.5), True))
            out.append((p + "ffn_down_exps.weight",
                        mat(p + "ffn_down_exps", (N_EXPERT, D, FF_EXP), r * FF_EXP**-0.5), True))
            out.append((p + "ffn_gate_inp_shexp.weight", mat(p + "ffn_gate_inp_shexp", (D,), 2 * D**-0.5), False))
            out.append((p + "ffn_gate_shexp.weight", mat(p + "ffn_gate_shexp", (FF_SHEXP, D), D**-0.5), True))
            out.append((p + "ffn_up_shexp.weight", mat(p + "ffn_up_shexp", (FF_SHEXP, D), D**-0.5), True))
            out.append((p + "ffn_down_shexp.weight",
                        mat(p + "ffn_down_shexp", (D, FF_SHEXP), r * FF_SHEXP**-0.5), True))
        else:
            out.append((p + "ffn_gate.weight", mat(p + "ffn_gate", (FF, D), D**-0.5), True))
            out.append((p + "ffn_up.weight", mat(p + "ffn_up", (FF, D), D**-0.5), True))
            out.append((p + "ffn_down.weight", mat(p + "ffn_down", (D, FF), r * FF**-0.5), True))
    out.append(("output_norm.weight", norm_w("output_norm", D, OUT_SCALE), False))
    outw = mat("output.weight", (VOCAB, D), D**-0.5)
    outw *= np.exp(randn(pre + "output.rownorm", (VOCAB, 1), 0.25))
    out.append(("output.weight", outw, True))
    return out


def write(path, arch, n_layer, wtype, name, vocab_kv, randn, sections, d=None, extra=(), n_nextn=0,
          mtp_ffn=None):
    N_GROUP, DT_RANK, INTERVAL = SHAPE[arch]
    w = g.Writer()
    a = arch + "."
    w.add("general.architecture", g.T_STR, arch)
    w.add("general.name", g.T_STR, name)
    kv = [("context_length", g.T_U32, CTX),
          ("embedding_length", g.T_U32, D),
          ("block_count", g.T_U32, n_layer),
          ("feed_forward_length", g.T_U32, FF),
          ("attention.head_count", g.T_U32, N_HEAD),
          ("attention.head_count_kv", g.T_U32, N_KV),
          ("attention.key_length", g.T_U32, HEAD_DIM),
          ("attention.value_length", g.T_U32, HEAD_DIM),
          ("attention.layer_norm_rms_epsilon", g.T_F32, 1e-6),
          ("rope.freq_base", g.T_F32, 1e7),
          ("rope.dimension_count", g.T_U32, N_ROT),
          ("rope.dimension_sections", g.T_ARR, (g.T_I32, sections)),
          ("ssm.conv_kernel", g.T_U32, D_CONV),
          ("ssm.inner_size", g.T_U32, D_STATE * DT_RANK),
          ("ssm.state_size", g.T_U32, D_STATE),
          ("ssm.time_step_rank", g.T_U32, DT_RANK),
          ("ssm.group_count", g.T_U32, N_GROUP),
          ("full_attention_interval", g.T_U32, INTERVAL)]
    if arch == "qwen35moe":
        kv += [("expert_count", g.T_U32, N_EXPERT),
               ("expert_used_count", g.T_U32, N_USED),
               ("expert_feed_forward_length", g.T_U32, FF_EXP),
               ("expert_shared_feed_forward_length", g.T_U32, FF_SHEXP)]
    for key, t, v in kv + list(extra):
        w.add(a + key, t, v)
    w.add(a + "vocab_size", g.T_U32, VOCAB)
    for k, (t, v) in vocab_kv.items():
        w.add(k, t, v)
    w.add("general.quantization_version", g.T_U32, 2)
    w.add("general.file_type", g.T_U32, {g.GGML_F16: 1, g.GGML_Q8_0: 7}[wtype])
    if n_nextn:
        w.add(a + "nextn_predict_layers", g.T_U32, n_nextn)
    for tname, arr, is_matrix in _tensors(arch, n_layer, randn, n_nextn, mtp_ffn):
        w.tensor(tname, arr, wtype if is_matrix else g.GGML_F32)
    w.write(path)
    print(path, os.path.getsize(path), "bytes")


def write_all(o, vocab, randn):
    write(f"{o}/rand-qwen35-tok512-d128-l4-F16.gguf", "qwen35", 4, g.GGML_F16,
          "rand-qwen35-tok512-d128-l4", vocab, randn, [2, 1, 1, 0])
    # The same 4 layers (the same seeds: the same main-pass logits) plus one MTP layer (blk.4).
    write(f"{o}/rand-qwen35-mtp1-tok512-d128-l4-F16.gguf", "qwen35", 5, g.GGML_F16,
          "rand-qwen35-mtp1-tok512-d128-l4", vocab, randn, [2, 1, 1, 0], n_nextn=1)
    write(f"{o}/rand-qwen35moe-e8x2-tok512-d128-l3-F16.gguf", "qwen35moe", 3, g.GGML_F16,
          "rand-qwen35moe-e8x2-tok512-d128-l3", vocab, randn, [1, 1, 1, 1])
    # The same 3 layers plus an MTP layer with its own MoE FFN (blk.3), as Qwen3.5 MoE's head.
    write(f"{o}/rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf", "qwen35moe", 4, g.GGML_F16,
          "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3", vocab, randn, [1, 1, 1, 1], n_nextn=1,
          mtp_ffn=True)
