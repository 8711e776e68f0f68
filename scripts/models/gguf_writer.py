"""The one GGUF (version 3) reader and writer of scripts/ (models, sidecars, tokenizer
vocabularies).

Promises: read_metadata gives every key as (type, value); read_file also gives every tensor's raw
bytes; Writer writes keys in the order they were added and tensors aligned (32 bytes unless told
otherwise), from numpy arrays in F32, F16, Q8_0 or MXFP4 (quantized as ggml's reference
quantizers, byte for byte) or from raw bytes copied as they are. A value read and written again
is the same bytes. numpy is needed only to write arrays (the raw path is standard library only).
"""
import struct

try:
    import numpy as np
except ImportError:  # copying raw tensors (the sidecar split) needs no numpy
    np = None

# GGUF value types.
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
_SCALAR = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
           T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}

# The ggml tensor types written here, and general.file_type's value for a file mostly of each.
GGML_F32, GGML_F16, GGML_Q8_0, GGML_MXFP4 = 0, 1, 8, 39
FILE_TYPE = {GGML_F32: 0, GGML_F16: 1, GGML_Q8_0: 7, GGML_MXFP4: 38}  # 38: MXFP4_MOE
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
        if et in _SCALAR:  # a scalar array in one unpack
            fmt = _SCALAR[et]
            size = struct.calcsize(fmt)
            return (et, list(struct.unpack_from(f"<{n}{fmt[1]}", b, o))), o + n * size
        items = []
        for _ in range(n):
            v, o = _read_val(b, o, et)
            items.append(v)
        return (et, items), o
    fmt = _SCALAR[t]
    return struct.unpack_from(fmt, b, o)[0], o + struct.calcsize(fmt)


def _read_head(b, path):
    """(kv dict, offset after the keys, tensor count)."""
    magic, ver, n_tensor, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    if magic != b"GGUF" or ver != 3:
        raise ValueError(f"{path}: not a GGUF v3 file")
    o = 24
    kv = {}
    for _ in range(n_kv):
        k, o = _read_str(b, o)
        (t,) = struct.unpack_from("<I", b, o)
        v, o = _read_val(b, o + 4, t)
        kv[k] = (t, v)
    return kv, o, n_tensor


def read_metadata(path):
    """key -> (type, value) in file order; arrays are (T_ARR, (elem_type, [values]))."""
    with open(path, "rb") as f:
        return _read_head(f.read(), path)[0]


def read_file(path):
    """(metadata as read_metadata's, [(name, ne, ggml type, raw bytes)], alignment). A tensor's
    bytes run to the next tensor's offset (the last one's to the end of the file)."""
    with open(path, "rb") as f:
        b = f.read()
    kv, o, n_tensor = _read_head(b, path)
    align = kv.get("general.alignment", (T_U32, ALIGN))[1]
    infos = []
    for _ in range(n_tensor):
        name, o = _read_str(b, o)
        (nd,) = struct.unpack_from("<I", b, o)
        ne = list(struct.unpack_from(f"<{nd}Q", b, o + 4))
        gtype, off = struct.unpack_from("<IQ", b, o + 4 + 8 * nd)
        o += 4 + 8 * nd + 12
        infos.append((name, ne, gtype, off))
    data0 = (o + align - 1) // align * align
    starts = sorted(off for *_, off in infos)
    end_of = dict(zip(starts, starts[1:] + [len(b) - data0]))
    tensors = [(n, ne, t, b[data0 + off:data0 + end_of[off]]) for n, ne, t, off in infos]
    return kv, tensors, align


def _str(s):
    e = s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(e)) + e


def _val(t, v):
    if t == T_STR:
        return _str(v)
    if t == T_ARR:
        et, items = v
        if et in _SCALAR:
            return struct.pack(f"<IQ{len(items)}{_SCALAR[et][1]}", et, len(items), *items)
        return struct.pack("<IQ", et, len(items)) + b"".join(_val(et, x) for x in items)
    return struct.pack(_SCALAR[t], v)


def quantize_q8_0(x, chunk=1 << 20):
    """ggml's reference Q8_0: per 32 values d = amax / 127, q = round-half-away(x / d); chunk
    blocks at a time (a timing file's 3 GB tensor without temporaries of its size)."""
    x = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    return b"".join(_q8_0_blocks(x[i:i + chunk]) for i in range(0, x.shape[0], chunk))


def _q8_0_blocks(x):
    amax = np.abs(x).max(axis=1)
    d = (amax / 127.0).astype(np.float32)
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0).astype(np.float32)
    v = x * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    out = np.empty(x.shape[0], dtype=[("d", "<f2"), ("q", "i1", 32)])
    out["d"] = d.astype(np.float16)
    out["q"] = q
    return out.tobytes()


# The E2M1 values of MXFP4, doubled (as ggml's table of them).
MXFP4_LEVELS = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)


def quantize_mxfp4(x):
    """ggml's MXFP4 quantizer, byte for byte: per 32 values the E8M0 exponent
    e = floor(log2(amax)) - 2 + 127, the scale 2^(e - 128) applied to the doubled levels, each value
    to the nearest level (the first on ties); element j in the low nibble of byte j, j + 16 in the
    high nibble. All-zero blocks are all zero bytes."""
    levels = np.array(MXFP4_LEVELS, dtype=np.float32)
    x = x.astype(np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    nz = amax > 0
    e = np.zeros(x.shape[0], dtype=np.int64)
    e[nz] = np.floor(np.log2(amax[nz])).astype(np.int64) - 2 + 127
    d = np.ldexp(np.float32(1), (e - 128).astype(np.int32)).astype(np.float32)
    err = np.abs(x[:, :, None] - d[:, None, None] * levels[None, None, :])
    idx = np.argmin(err, axis=2).astype(np.uint8)
    idx[~nz] = 0
    out = np.empty(x.shape[0], dtype=[("e", "u1"), ("q", "u1", 16)])
    out["e"] = np.where(nz, e, 0).astype(np.uint8)
    out["q"] = idx[:, :16] | (idx[:, 16:] << 4)
    return out.tobytes()


def _encode(arr, gtype):
    enc = {GGML_F32: lambda a: a.astype("<f4").tobytes(),
           GGML_F16: lambda a: a.astype("<f2").tobytes(),
           GGML_Q8_0: quantize_q8_0,
           GGML_MXFP4: quantize_mxfp4}
    if gtype not in enc:
        raise ValueError(f"ggml type {gtype} is not written here")
    return enc[gtype](arr)


class Writer:
    def __init__(self, align=ALIGN):
        self.kv = []
        self.tensors = []
        self.align = align

    def add(self, key, t, v):
        self.kv.append((key, t, v))

    def tensor(self, name, arr, gtype):
        """arr in numpy (row-major) order: shape (..., cols); GGUF's ne is the reverse."""
        self.raw_tensor(name, list(reversed(arr.shape)), gtype, _encode(arr, gtype))

    def raw_tensor(self, name, ne, gtype, data):
        """A tensor's bytes as they are (e.g. copied from another file)."""
        self.tensors.append((name, ne, gtype, data))

    def write(self, path):
        a = self.align
        head = struct.pack("<4sIQQ", b"GGUF", 3, len(self.tensors), len(self.kv))
        head += b"".join(_str(k) + struct.pack("<I", t) + _val(t, v) for k, t, v in self.kv)
        off = 0
        infos = []
        for name, ne, gtype, data in self.tensors:
            infos.append(_str(name) + struct.pack(f"<I{len(ne)}QIQ", len(ne), *ne, gtype, off))
            off += (len(data) + a - 1) // a * a
        infos = b"".join(infos)
        with open(path, "wb") as f:
            f.write(head + infos + b"\0" * (-(len(head) + len(infos)) % a))
            for _, _, _, data in self.tensors:
                f.write(data)
                f.write(b"\0" * (-len(data) % a))
