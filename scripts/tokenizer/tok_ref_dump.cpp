// tok_ref_dump: tokenizes strings with a llama.cpp-family library (ik_llama.cpp's libllama), for
// the reference files of tests/data/tokenizer. Loads MODEL.gguf vocab-only and reads one string a
// line from stdin, hex-encoded (so any byte, newline included, passes). Writes first
//   n_tokens bos eos add_bos add_eos      (add_* as 0/1; -1 for no token)
//   the end-of-generation ids, ascending
// then, for each string, four lines:
//   ids of llama_tokenize(text, add_special=false, parse_special=false)   (llama.cpp's
//       test-tokenizer-0 mode)
//   ids of llama_tokenize(text, add_special=true, parse_special=true)     (a chat prompt's mode)
//   hex of llama_detokenize(first ids, remove_special=false, unparse_special=true)
//   hex of llama_detokenize(second ids, remove_special=false, unparse_special=true)
// Built and run by scripts/tokenizer/make_tok_refs.py; not part of the Specula build.
//   usage: tok_ref_dump MODEL.gguf < STRINGS.hex > OUT.txt
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

std::string from_hex(const std::string& h) {
    std::string s;
    for (size_t i = 0; i + 1 < h.size(); i += 2) {
        s += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    }
    return s;
}

std::string to_hex(const std::string& s) {
    static const char* d = "0123456789abcdef";
    std::string h;
    for (unsigned char c : s) {
        h += d[c >> 4];
        h += d[c & 15];
    }
    return h;
}

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text, bool add,
                                  bool parse) {
    std::vector<llama_token> ids(text.size() + 16);
    int n = llama_vocab_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                                 static_cast<int32_t>(ids.size()), add, parse);
    if (n < 0) {
        ids.resize(-n);
        n = llama_vocab_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                                 static_cast<int32_t>(ids.size()), add, parse);
    }
    ids.resize(n);
    return ids;
}

std::string detokenize(const llama_vocab* vocab, const std::vector<llama_token>& ids) {
    std::string out(ids.size() * 64 + 16, '\0');
    int n = llama_detokenize(vocab, ids.data(), static_cast<int32_t>(ids.size()), out.data(),
                             static_cast<int32_t>(out.size()), false, true);
    if (n < 0) {
        out.resize(-n);
        n = llama_detokenize(vocab, ids.data(), static_cast<int32_t>(ids.size()), out.data(),
                             static_cast<int32_t>(out.size()), false, true);
    }
    out.resize(n);
    return out;
}

void print_ids(const std::vector<llama_token>& ids) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s MODEL.gguf < STRINGS.hex\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        std::fprintf(stderr, "%s: cannot load\n", argv[1]);
        return 1;
    }
    const llama_vocab* vocab = llama_model_get_vocab(model);
    const int n = llama_vocab_n_tokens(vocab);
    std::printf("%d %d %d %d %d\n", n, llama_vocab_bos(vocab), llama_vocab_eos(vocab),
                llama_vocab_get_add_bos(vocab) ? 1 : 0, llama_add_eos_token(model) ? 1 : 0);
    std::vector<llama_token> eog;
    for (llama_token id = 0; id < n; ++id) {
        if (llama_vocab_is_eog(vocab, id)) eog.push_back(id);
    }
    print_ids(eog);
    for (std::string line; std::getline(std::cin, line);) {
        const std::string text = from_hex(line);
        const auto plain = tokenize(vocab, text, false, false);
        const auto chat = tokenize(vocab, text, true, true);
        print_ids(plain);
        print_ids(chat);
        std::printf("%s\n%s\n", to_hex(detokenize(vocab, plain)).c_str(),
                    to_hex(detokenize(vocab, chat)).c_str());
    }
    return 0;
}
