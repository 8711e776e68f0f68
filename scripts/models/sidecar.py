"""Splits a GGUF file with MTP (nextn) layers into a trunk and an MTP-only sidecar, the two files
`specula run -m TRUNK --spec-type mtp -md SIDECAR` (and ik_llama.cpp's -md companions) take:

  trunk    every key, with {arch}.block_count less the MTP layers and
           {arch}.nextn_predict_layers dropped; every tensor but the MTP layers' blk.N.*
  sidecar  every key unchanged (block_count and nextn_predict_layers still place the MTP layers
           after the trunk's); only the MTP layers' blk.N.* tensors (the head shares the trunk's
           token_embd, output and output_norm unless it has nextn.embed_tokens /
           nextn.shared_head_*)

Promises: tensor data is copied byte for byte (any type), the keys and alignment kept; standard
library only. tests/data/arch's sidecars (test_mtp_sidecar) are those of arch_qwen35.py's MTP
files; their trunks hold the same tensors as the files without the head (the same seeds).
"""
import gguf_writer as g

# The MTP files of tests/data/arch and their sidecars (make_models.py arch writes both).
TEST_SIDECARS = {
    "rand-qwen35-mtp1-tok512-d128-l4-F16.gguf": "rand-qwen35-mtp1-tok512-d128-l4-F16.sidecar.gguf",
    "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf":
        "rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.sidecar.gguf",
}


class SplitError(Exception):
    pass


def _write(path, kv, tensors, align):
    w = g.Writer(align)
    for k, (t, v) in kv.items():
        w.add(k, t, v)
    for name, ne, gtype, data in tensors:
        w.raw_tensor(name, ne, gtype, data)
    w.write(path)
    print(path, len(tensors), "tensors")


def split(src, trunk_path, sidecar_path):
    """Writes sidecar_path and, unless trunk_path is None, trunk_path."""
    kv, tensors, align = g.read_file(src)
    arch = kv["general.architecture"][1]
    nextn_key, block_key = arch + ".nextn_predict_layers", arch + ".block_count"
    if nextn_key not in kv:
        raise SplitError(f"{src}: no key '{nextn_key}': no MTP layers to split off")
    n_block, n_nextn = kv[block_key][1], kv[nextn_key][1]
    if not 0 < n_nextn < n_block:
        raise SplitError(f"{src}: nextn_predict_layers = {n_nextn} with block_count = {n_block}")
    mtp = tuple(f"blk.{il}." for il in range(n_block - n_nextn, n_block))
    head = [t for t in tensors if t[0].startswith(mtp)]
    if not any(".nextn." in t[0] for t in head):
        raise SplitError(f"{src}: no blk.N.nextn.* tensors in the MTP layers {mtp}")
    _write(sidecar_path, kv, head, align)
    if trunk_path is not None:
        trunk_kv = {k: (t, n_block - n_nextn) if k == block_key else (t, v)
                    for k, (t, v) in kv.items() if k != nextn_key}
        _write(trunk_path, trunk_kv, [t for t in tensors if not t[0].startswith(mtp)], align)
