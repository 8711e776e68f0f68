// Placeholder entry point; the CLI (run, info, tokenize) is being built.
#include <cstdio>
int main() {
    std::fprintf(stderr, "specula: not built yet\n");
    return 1;
}
