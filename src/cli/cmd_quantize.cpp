// `specula quantize` (cli/cmd_quantize.h): the arguments into quant::QuantizeOptions, then the
// summary llama-quantize prints.
#include "cli/cmd_quantize.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "common/clock.h"
#include "common/error.h"
#include "quantize/quantize_file.h"
#include "quantize/row_quantizer.h"

namespace specula::cli {

namespace {

constexpr const char* kRefused[] = {"--imatrix", "--include-weights", "--exclude-weights",
                                    "--override-kv", "--keep-split"};

std::string type_list() {
    std::string s;
    for (const quant::FileType& ft : quant::file_types())
        s += (s.empty() ? "" : ", ") + std::string(ft.name);
    return s;
}

quant::FileType file_type_arg(const std::string& word) {
    if (auto ft = quant::find_file_type(word)) return *ft;
    fail("quantize: unknown type '", word, "' (types: ", type_list(), ")");
}

// A tensor type for --output-tensor-type / --token-embedding-type: a file type's base type or a
// plain tensor type name (q8_0, f16, ...).
GGMLType tensor_type_arg(const char* flag, const std::string& word) {
    std::string up = word;
    for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (uint32_t i = 0; i < static_cast<uint32_t>(GGMLType::COUNT); ++i) {
        const auto t = static_cast<GGMLType>(i);
        if (type_name(t) == up && quant::row_quantizer(t) != nullptr) return t;
    }
    std::string names;
    for (uint32_t i = 0; i < static_cast<uint32_t>(GGMLType::COUNT); ++i) {
        const auto t = static_cast<GGMLType>(i);
        if (quant::row_quantizer(t))
            names += (names.empty() ? "" : ", ") + std::string(type_name(t));
    }
    fail("quantize: ", flag, " '", word, "' is not a tensor type Specula writes (", names, ")");
}

quant::QuantizeOptions to_options(const QuantizeCliOptions& o) {
    for (const std::string& r : o.refused)
        fail("quantize: ", r, " is not supported (no importance matrix, overrides or splits)");
    const std::vector<std::string>& a = o.args;
    if (a.size() < 2 || a.size() > 4)
        fail("quantize: expected IN.gguf [OUT.gguf] TYPE [nthreads] (types: ", type_list(), ")");
    quant::QuantizeOptions q;
    q.input = a[0];
    size_t i = 1;
    if (quant::find_file_type(a[1]) && a.size() <= 3 &&
        !(a.size() == 3 && quant::find_file_type(a[2]))) {
        // IN TYPE [nthreads]: OUT next to IN, as llama-quantize names it.
        q.type = *quant::find_file_type(a[1]);
        q.output = (std::filesystem::path(a[0]).parent_path() /
                    ("ggml-model-" + std::string(q.type.name) + ".gguf"))
                       .string();
        i = 2;
    } else {
        q.output = a[1];
        if (a.size() < 3) fail("quantize: no TYPE given (types: ", type_list(), ")");
        q.type = file_type_arg(a[2]);
        i = 3;
    }
    if (i < a.size()) {
        const std::string& n = a[i];
        if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos ||
            std::stoi(n) < 1) {
            fail("quantize: nthreads '", n, "' is not a positive number");
        }
        q.n_threads = std::stoi(n);
    }
    q.allow_requantize = o.allow_requantize;
    q.mix.pure = o.pure;
    q.mix.leave_output = o.leave_output;
    if (!o.output_type.empty())
        q.mix.output_type = tensor_type_arg("--output-tensor-type", o.output_type);
    if (!o.token_embd_type.empty())
        q.mix.token_embd_type = tensor_type_arg("--token-embedding-type", o.token_embd_type);
    return q;
}

}  // namespace

CLI::App* add_quantize_command(CLI::App& app, QuantizeCliOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "quantize", "quantize a GGUF file (llama-quantize's types and per-tensor mixes)");
    cmd->add_option("args", o.args, "IN.gguf [OUT.gguf] TYPE [nthreads]; TYPE: " + type_list());
    cmd->add_flag("--allow-requantize", o.allow_requantize,
                  "allow quantized input tensors (dequantized, then quantized again)");
    cmd->add_flag("--leave-output-tensor", o.leave_output, "leave output.weight as it is");
    cmd->add_flag("--pure", o.pure, "every quantized tensor gets TYPE's base type (no mix)");
    cmd->add_option("--output-tensor-type", o.output_type, "the type of output.weight");
    cmd->add_option("--token-embedding-type", o.token_embd_type, "the type of token_embd.weight");
    cmd->add_flag("-q,--quiet", o.quiet, "no line per tensor");
    for (const char* r : kRefused) {
        cmd->add_option_function<std::string>(
            r, [&o, r](const std::string&) { o.refused.push_back(r); }, "not supported");
    }
    return cmd;
}

int cmd_quantize(const QuantizeCliOptions& o) {
    quant::QuantizeOptions q = to_options(o);
    if (!o.quiet)
        q.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    std::fprintf(stderr, "quantize: %s -> %s as %s (general.file_type %u)\n", q.input.c_str(),
                 q.output.c_str(), std::string(q.type.name).c_str(), q.type.ftype);
    const auto t0 = clock_type::now();
    const quant::QuantizeResult r = quant::quantize_file(q);
    std::fprintf(stderr,
                 "quantize: %d tensors (%d converted, %d by a fallback type): %.2f MiB -> %.2f MiB "
                 "in %.1f s\n",
                 r.n_tensors, r.n_quantized, r.n_fallback, r.bytes_in / 1048576.0,
                 r.bytes_out / 1048576.0, ms_since(t0) / 1000.0);
    return 0;
}

}  // namespace specula::cli
