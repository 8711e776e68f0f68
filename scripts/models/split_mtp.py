#!/usr/bin/env python3
"""Splits a GGUF file with MTP (nextn) layers into a trunk-only file and an MTP-only sidecar, the
two files `specula run -m TRUNK --spec-type mtp -md SIDECAR` (and ik_llama.cpp's -md companions)
take:

  trunk    every key, with {arch}.block_count less the MTP layers and
           {arch}.nextn_predict_layers dropped; every tensor but the MTP layers' blk.N.*
  sidecar  every key unchanged (block_count and nextn_predict_layers still place the MTP layers
           after the trunk's); only the MTP layers' blk.N.* tensors (the head shares the trunk's
           token_embd, output and output_norm unless it has nextn.embed_tokens /
           nextn.shared_head_*)

Tensor data is copied byte for byte (any type); standard library only.

  split_mtp.py MODEL.gguf TRUNK.gguf SIDECAR.gguf   (TRUNK may be '-': the sidecar only)

tests/data/arch's sidecars (test_mtp_sidecar) come from the MTP files of arch_qwen35.py:
  split_mtp.py rand-qwen35-mtp1-tok512-d128-l4-F16.gguf - rand-qwen35-mtp1-tok512-d128-l4-F16.sidecar.gguf
  split_mtp.py rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.gguf - rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16.sidecar.gguf
Their trunks hold the same tensors as rand-qwen35-tok512-d128-l4-F16.gguf and
rand-qwen35moe-e8x2-tok512-d128-l3-F16.gguf (the same seeds), which the tests use as targets.
"""
import struct
import sys

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}
T_STR, T_ARR = 8, 9


def _skip_val(b, o, t):
    """The offset after a value of type t at o."""
    if t == T_STR:
        (n,) = struct.unpack_from("<Q", b, o)
        return o + 8 + n
    if t == T_ARR:
        et, n = struct.unpack_from("<IQ", b, o)
        o += 12
        if et in _SCALAR:
            return o + n * struct.calcsize(_SCALAR[et])
        for _ in range(n):
            o = _skip_val(b, o, et)
        return o
    return o + struct.calcsize(_SCALAR[t])


def _str(b, o):
    (n,) = struct.unpack_from("<Q", b, o)
    return b[o + 8:o + 8 + n].decode("utf-8", "surrogateescape"), o + 8 + n


def _pack_str(s):
    e = s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(e)) + e


def read(path):
    """(kv: [(key, type, raw value bytes)], tensors: [(name, ne, type, raw data)], alignment)."""
    b = open(path, "rb").read()
    magic, ver, nt, nkv = struct.unpack_from("<4sIQQ", b, 0)
    if magic != b"GGUF" or ver != 3:
        sys.exit(f"{path}: not a GGUF v3 file")
    o, kv, align = 24, [], 32
    for _ in range(nkv):
        k, o = _str(b, o)
        (t,) = struct.unpack_from("<I", b, o)
        end = _skip_val(b, o + 4, t)
        kv.append((k, t, b[o + 4:end]))
        if k == "general.alignment":
            (align,) = struct.unpack_from("<I", b, o + 4)
        o = end
    infos = []
    for _ in range(nt):
        name, o = _str(b, o)
        (nd,) = struct.unpack_from("<I", b, o)
        ne = list(struct.unpack_from(f"<{nd}Q", b, o + 4))
        gtype, off = struct.unpack_from("<IQ", b, o + 4 + 8 * nd)
        o += 4 + 8 * nd + 12
        infos.append((name, ne, gtype, off))
    data0 = (o + align - 1) // align * align
    ends = sorted(off for _, _, _, off in infos)[1:] + [len(b) - data0]
    end_of = dict(zip(sorted(off for _, _, _, off in infos), ends))
    tensors = [(n, ne, t, b[data0 + off:data0 + end_of[off]]) for n, ne, t, off in infos]
    return kv, tensors, align


def write(path, kv, tensors, align):
    head = struct.pack("<4sIQQ", b"GGUF", 3, len(tensors), len(kv))
    head += b"".join(_pack_str(k) + struct.pack("<I", t) + v for k, t, v in kv)
    infos, off, blobs = b"", 0, []
    for name, ne, gtype, data in tensors:
        infos += _pack_str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        infos += struct.pack("<IQ", gtype, off)
        data = data + b"\0" * (-len(data) % align)
        blobs.append(data)
        off += len(data)
    pad = b"\0" * (-(len(head) + len(infos)) % align)
    with open(path, "wb") as f:
        f.write(head + infos + pad + b"".join(blobs))
    print(path, len(tensors), "tensors")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, trunk_path, sidecar_path = sys.argv[1:]
    kv, tensors, align = read(src)
    keys = {k: (t, v) for k, t, v in kv}
    arch = _str(keys["general.architecture"][1], 0)[0]
    if arch + ".nextn_predict_layers" not in keys:
        sys.exit(f"{src}: no key '{arch}.nextn_predict_layers': no MTP layers to split off")

    def u32(key):
        t, v = keys[key]
        return struct.unpack(_SCALAR[t], v)[0]

    n_block, n_nextn = u32(arch + ".block_count"), u32(arch + ".nextn_predict_layers")
    if not 0 < n_nextn < n_block:
        sys.exit(f"{src}: nextn_predict_layers = {n_nextn} with block_count = {n_block}")
    mtp = tuple(f"blk.{il}." for il in range(n_block - n_nextn, n_block))
    head = [t for t in tensors if t[0].startswith(mtp)]
    if not any(".nextn." in t[0] for t in head):
        sys.exit(f"{src}: no blk.N.nextn.* tensors in the MTP layers {mtp}")
    write(sidecar_path, kv, head, align)
    if trunk_path != "-":
        trunk_kv = []
        for k, t, v in kv:
            if k == arch + ".nextn_predict_layers":
                continue
            if k == arch + ".block_count":
                v = struct.pack(_SCALAR[t], n_block - n_nextn)
            trunk_kv.append((k, t, v))
        write(trunk_path, trunk_kv, [t for t in tensors if not t[0].startswith(mtp)], align)


if __name__ == "__main__":
    main()
