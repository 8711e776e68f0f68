// One runtime for every command (runtime/runtime.h): `-c 0` is the model's training context in
// `run` and in `serve` alike, also past 4096 (stories260K rewritten with an 8192-position
// training context); without -c, run takes the training context and serve at most 4096.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_process.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "server/server_process.h"
#include "test_util.h"

namespace {

using namespace specula;

// stories260K with llama.context_length 8192 (its weights as they are: rope has no limit).
const std::string& long_context_model() {
    static const std::string path = [] {
        const std::string out = test::temp_dir("runtime") + "/stories260K-ctx8192.gguf";
        auto src = GGUFFile::open(test::shared_path("models/tinystories/stories260K.gguf"));
        GGUFWriter w;
        w.copy_from(*src);
        w.set_u32("llama.context_length", 8192);
        w.write(out);
        return out;
    }();
    return path;
}

int served_context(const test::ServerProcess& s) {
    auto res = s.client().Get("/v1/models");
    EXPECT_TRUE(res && res->status == 200);
    if (!res) return -1;
    return nlohmann::json::parse(res->body)["data"][0]["max_model_len"].get<int>();
}

std::string run_log(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "run", "-m", long_context_model(), "-p", "Once", "-n", "2", "--temp", "0", "-t", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::ProcResult r = test::run_specula(args);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.err;
}

}  // namespace

TEST(OneRuntime, ContextZeroIsTheTrainingContextInRunAndServe) {
    EXPECT_NE(run_log({"-c", "0"}).find("n_ctx: 8192 "), std::string::npos);
    test::ServerProcess s({"-m", long_context_model(), "-c", "0", "-t", "1"}, "runtime-c0");
    EXPECT_EQ(served_context(s), 8192) << s.log();
}

TEST(OneRuntime, DefaultContextOfEachCommand) {
    EXPECT_NE(run_log({}).find("n_ctx: 8192 "), std::string::npos);
    test::ServerProcess s({"-m", long_context_model(), "-t", "1"}, "runtime-default");
    EXPECT_EQ(served_context(s), 4096) << s.log();
    test::ServerProcess m({"-m", long_context_model(), "--max-model-len", "1000", "-t", "1"},
                          "runtime-mml");
    EXPECT_EQ(served_context(m), 1000) << m.log();
}
