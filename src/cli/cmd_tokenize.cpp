// `specula tokenize`: the token ids of a text on one line, space separated, as llama-tokenize
// --ids computes them (BOS as the vocabulary says; special tokens parsed unless
// --no-parse-special). Reads only the tokenizer metadata, never the weights.
#include <cstdio>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace specula::cli {

int cmd_tokenize(const TokenizeOptions& opt) {
    const std::string text = resolve_prompt(opt.prompt, opt.prompt_file, /*strip_newline=*/false);
    auto file = GGUFFile::open(opt.model);
    auto tok = Tokenizer::from_gguf(*file);
    const auto ids = tok->encode(text, /*add_special=*/true, opt.parse_special);

    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (opt.ids_only) {
            if (i) line += ' ';
            line += std::to_string(ids[i]);
        } else {
            char id[16];
            std::snprintf(id, sizeof id, "%6d", ids[i]);
            line += std::string(id) + " -> '" + tok->token_to_piece(ids[i], true) + "'\n";
        }
    }
    if (opt.ids_only) line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace specula::cli
