"""How a generated model file is put together, for every architecture module.

Promises: a model's keys in one order for all: general.architecture, general.name, the
architecture's keys (those of its KEYS table whose hparam the file sets, in the table's order),
the tokenizer.* keys of the vocabulary, general.quantization_version, general.file_type, then the
table's TAIL keys; its tensors in the order of its rows. A KEYS row is (key, GGUF type, hparam):
the key is written as arch + "." + key with the value h[hparam], skipped when h lacks it.
"""
import os

import gguf_writer as g
import weights

# ../shared's 512-token SentencePiece vocabulary (tok512, BOS added): the tokenizer of the small
# test files and the timing files.
TOK512 = "models/synthetic/rand-qwen2-tok512-d256-l2-F16.gguf"


def keys(*middle):
    """A KEYS table: the keys every architecture here has, then middle, then vocab_size."""
    U32 = g.T_U32
    return [("context_length", U32, "ctx"),
            ("embedding_length", U32, "d"),
            ("block_count", U32, "n_layer"),
            ("feed_forward_length", U32, "ff"),
            ("attention.head_count", U32, "n_head"),
            ("attention.head_count_kv", U32, "n_kv"),
            ("attention.key_length", U32, "head_dim"),
            ("attention.value_length", U32, "head_dim"),
            ("attention.layer_norm_rms_epsilon", g.T_F32, "eps"),
            *middle,
            ("vocab_size", U32, "vocab_size")]


def tokenizer_keys(path):
    """The tokenizer.* keys of a GGUF file, as read_metadata gives them."""
    return {k: v for k, v in g.read_metadata(path).items() if k.startswith("tokenizer.")}


def tok512(shared):
    return tokenizer_keys(os.path.join(shared, TOK512))


def arch_keys(table, h):
    return [(h["arch"] + "." + key, t, h[field]) for key, t, field in table if field in h]


def write(path, h, key_table, tail, vocab_kv, rows, quiet=False):
    """Writes the model h (a dict of hparams: arch, name, wtype, file_type (default from wtype),
    vtype (the type of vectors; default F32), seed or stream (weights.generator) and those
    key_table and tail name) with its tensor rows; atomically (a .part file renamed)."""
    w = g.Writer()
    w.add("general.architecture", g.T_STR, h["arch"])
    w.add("general.name", g.T_STR, h["name"])
    for k, t, v in arch_keys(key_table, h):
        w.add(k, t, v)
    for k, (t, v) in vocab_kv.items():
        w.add(k, t, v)
    w.add("general.quantization_version", g.T_U32, 2)
    w.add("general.file_type", g.T_U32, h.get("file_type", g.FILE_TYPE[h["wtype"]]))
    for k, t, v in arch_keys(tail, h):
        w.add(k, t, v)
    gen = weights.generator(h)
    for name, arr, t in weights.materialize(gen, rows, h["wtype"], h.get("vtype", g.GGML_F32)):
        w.tensor(name, arr, t)
    tmp = path + ".part"
    w.write(tmp)
    os.replace(tmp, path)
    if not quiet:
        print(path, os.path.getsize(path), "bytes")
