// gguf_with_template IN.gguf OUT.gguf TEMPLATE_FILE: writes a copy of IN with
// tokenizer.chat_template set to the file's text (for tests: a small model that carries a real
// model family's chat template). Exits 1 with a message on any error.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: gguf_with_template IN.gguf OUT.gguf TEMPLATE_FILE\n");
        return 2;
    }
    try {
        std::ifstream in(argv[3], std::ios::binary);
        if (!in) specula::fail("cannot read ", argv[3]);
        std::ostringstream text;
        text << in.rdbuf();
        auto src = specula::GGUFFile::open(argv[1]);
        specula::GGUFWriter w;
        w.copy_from(*src);
        w.set_string("tokenizer.chat_template", text.str());
        w.write(argv[2]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gguf_with_template: %s\n", e.what());
        return 1;
    }
    return 0;
}
