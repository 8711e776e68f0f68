"""A minimal GGUF (version 3) reader and writer for the model generators in scripts/models.

Reads the metadata of a file (key -> (type, value)) and writes files with metadata in insertion
order and tensors of type F32, F16, Q8_0 or MXFP4 aligned to 32 bytes. Nothing else of GGUF is needed.
"""
import struct

import numpy as np

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
_SCALAR = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
           T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}
GGML_F32, GGML_F16, GGML_Q8_0, GGML_MXFP4 = 0, 1, 8, 39
ALIGN = 32


def _read_str(b, o):
    (n,) = struct.unpack_from("<Q", b, o)
    return b[o + 8:o + 8 + n].decode("utf-8", "surrogateescape"), o + 8 + n


def _read_val(b, o, t):
    if t == T_STR:
        return _read_str(b, o)
    if t == T_ARR:
        et, n = struct.unpack_from("<IQ", b, o)
        o += 12
        items = []
        for _ in range(n):
            v, o = _read_val(b, o, et)
            items.append(v)
        return (et, items), o
    fmt = _SCALAR[t]
    return struct.unpack_from(fmt, b, o)[0], o + struct.calcsize(fmt)


def read_metadata(path):
    """key -> (type, value); arrays are (T_ARR, (elem_type, [values]))."""
    b = open(path, "rb").read()
    magic, ver, _nt, nkv = struct.unpack_from("<4sIQQ", b, 0)
    assert magic == b"GGUF" and ver == 3, path
    o = 24
    kv = {}
    for _ in range(nkv):
        k, o = _read_str(b, o)
        (t,) = struct.unpack_from("<I", b, o)
        v, o = _read_val(b, o + 4, t)
        kv[k] = (t, v)
    return kv


def _str(s):
    e = s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(e)) + e


def _val(t, v):
    if t == T_STR:
        return _str(v)
    if t == T_ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(_val(et, x) for x in items)
    return struct.pack(_SCALAR[t], v)


def quantize_q8_0(x):
    """ggml's reference Q8_0: per 32 values d = amax / 127, q = round-half-away(x / d)."""
    x = x.astype(np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    d = (amax / 127.0).astype(np.float32)
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0).astype(np.float32)
    v = x * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    out = np.empty(x.shape[0], dtype=[("d", "<f2"), ("q", "i1", 32)])
    out["d"] = d.astype(np.float16)
    out["q"] = q
    return out.tobytes()


# The E2M1 values of MXFP4, doubled (ggml's kvalues_mxfp4).
MXFP4_VALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)


def quantize_mxfp4(x):
    """ggml's MXFP4 quantizer, byte for byte: per 32 values the E8M0 exponent
    e = floor(log2(amax)) - 2 + 127, the scale 2^(e - 128) applied to the doubled levels, each value
    to the nearest level (the first on ties); element j in the low nibble of byte j, j + 16 in the
    high nibble. All-zero blocks are all zero bytes."""
    x = x.astype(np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    nz = amax > 0
    e = np.zeros(x.shape[0], dtype=np.int64)
    e[nz] = np.floor(np.log2(amax[nz])).astype(np.int64) - 2 + 127
    d = np.ldexp(np.float32(1), (e - 128).astype(np.int32)).astype(np.float32)
    err = np.abs(x[:, :, None] - d[:, None, None] * MXFP4_VALUES[None, None, :])
    idx = np.argmin(err, axis=2).astype(np.uint8)
    idx[~nz] = 0
    out = np.empty(x.shape[0], dtype=[("e", "u1"), ("q", "u1", 16)])
    out["e"] = np.where(nz, e, 0).astype(np.uint8)
    out["q"] = idx[:, :16] | (idx[:, 16:] << 4)
    return out.tobytes()


class Writer:
    def __init__(self):
        self.kv = []
        self.tensors = []

    def add(self, key, t, v):
        self.kv.append((key, t, v))

    def tensor(self, name, arr, gtype):
        """arr in numpy (row-major) order: shape (..., cols); GGUF ne is the reverse."""
        ne = list(reversed(arr.shape))
        if gtype == GGML_F32:
            data = arr.astype("<f4").tobytes()
        elif gtype == GGML_F16:
            data = arr.astype("<f2").tobytes()
        elif gtype == GGML_Q8_0:
            data = quantize_q8_0(arr)
        elif gtype == GGML_MXFP4:
            data = quantize_mxfp4(arr)
        else:
            raise ValueError(gtype)
        self.tensors.append((name, ne, gtype, data))

    def write(self, path):
        head = struct.pack("<4sIQQ", b"GGUF", 3, len(self.tensors), len(self.kv))
        head += b"".join(_str(k) + struct.pack("<I", t) + _val(t, v) for k, t, v in self.kv)
        off = 0
        infos = b""
        for name, ne, gtype, data in self.tensors:
            infos += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
            infos += struct.pack("<IQ", gtype, off)
            off += (len(data) + ALIGN - 1) // ALIGN * ALIGN
        pad = b"\0" * (-(len(head) + len(infos)) % ALIGN)
        with open(path, "wb") as f:
            f.write(head + infos + pad)
            for _, _, _, data in self.tensors:
                f.write(data)
                f.write(b"\0" * (-len(data) % ALIGN))
