// `specula quantize IN.gguf [OUT.gguf] TYPE [nthreads]`: llama-quantize's command line
// (quantize/quantize_file.h does the work). TYPE is a file type name (Q4_K_M, Q8_0, IQ4_XS, ...,
// any case) or its number; OUT defaults to IN's folder/ggml-model-TYPE.gguf. llama-quantize's
// --allow-requantize, --leave-output-tensor, --pure, --output-tensor-type and
// --token-embedding-type work as there; --imatrix, --include-weights, --exclude-weights,
// --override-kv and --keep-split are refused by name.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace specula::cli {

struct QuantizeCliOptions {
    std::vector<std::string> args;  // IN [OUT] TYPE [nthreads]
    bool allow_requantize = false;
    bool leave_output = false;
    bool pure = false;
    std::string output_type;           // --output-tensor-type
    std::string token_embd_type;       // --token-embedding-type
    bool quiet = false;                // -q: no per-tensor lines
    std::vector<std::string> refused;  // llama-quantize options Specula does not take
};

CLI::App* add_quantize_command(CLI::App& app, QuantizeCliOptions& o);
int cmd_quantize(const QuantizeCliOptions& o);

}  // namespace specula::cli
