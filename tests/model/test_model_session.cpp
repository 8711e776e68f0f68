// Session behaviour beyond parity: batch invariance (one pass of N tokens gives bit-identical
// logits to N single-token passes, and to any other split), rollback and re-eval, context
// overflow, and clear load errors for unsupported or malformed models.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "alloc_counter.h"  // replaces global new/delete: include from one file per test
#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "kernels/quants.h"
#include "model/batch_eval.h"
#include "model/memory_plan.h"
#include "model/session.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::token_id;

std::string model_path(const std::string& stem) {
    return specula::test::shared_path("models/synthetic/" + stem + ".gguf");
}

// The reference token ids of the model's first prompt (real tokenizer output of llama.cpp).
std::vector<token_id> first_prompt_ids(const std::string& stem) {
    const json ref = json::parse(
        specula::test::read_file(specula::test::shared_path("reference/" + stem + ".json")));
    return ref["prompts"][0]["token_ids"].get<std::vector<token_id>>();
}

specula::Session make_session(const specula::Model& m, int n_ctx = 256, int n_threads = 2) {
    specula::SessionParams sp;
    sp.n_ctx = n_ctx;
    sp.n_threads = n_threads;
    return specula::Session(m, sp);
}

// Evaluates `ids` in chunks of the given sizes (cycled) and returns all logits rows.
std::vector<float> eval_in_chunks(specula::Session& s, const std::vector<token_id>& ids,
                                  const std::vector<int>& chunks) {
    const int n_vocab = s.model().hparams().n_vocab;
    std::vector<float> out;
    size_t i = 0, c = 0;
    while (i < ids.size()) {
        const size_t n = std::min<size_t>(chunks[c++ % chunks.size()], ids.size() - i);
        s.eval(std::span<const token_id>(ids.data() + i, n));
        for (size_t t = 0; t < n; ++t) {
            const float* l = s.logits(static_cast<int>(t));
            out.insert(out.end(), l, l + n_vocab);
        }
        i += n;
    }
    return out;
}

// First row (token index) where two logits dumps differ, or -1.
int first_difference(const std::vector<float>& a, const std::vector<float>& b, int n_vocab) {
    if (a.size() != b.size()) return 0;
    for (size_t r = 0; r * n_vocab < a.size(); ++r) {
        if (std::memcmp(a.data() + r * n_vocab, b.data() + r * n_vocab, sizeof(float) * n_vocab)) {
            return static_cast<int>(r);
        }
    }
    return -1;
}

class BatchInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchInvariance, BatchEqualsSingleTokenEvals) {
    const auto model = specula::Model::load(model_path(GetParam()));
    const int n_vocab = model->hparams().n_vocab;
    auto ids = first_prompt_ids(GetParam());
    ids.resize(std::min<size_t>(ids.size(), 40));

    auto batched = make_session(*model);
    const auto all = eval_in_chunks(batched, ids, {static_cast<int>(ids.size())});
    auto single = make_session(*model);
    const auto one = eval_in_chunks(single, ids, {1});
    EXPECT_EQ(first_difference(all, one, n_vocab), -1)
        << "batch of " << ids.size() << " vs single-token evals";
    auto mixed = make_session(*model);
    const auto mix = eval_in_chunks(mixed, ids, {3, 1, 7, 2, 5});
    EXPECT_EQ(first_difference(all, mix, n_vocab), -1) << "batch vs chunks 3,1,7,2,5";
    // A different thread count splits the matmul rows differently: results must not change.
    auto one_thread = make_session(*model, 256, 1);
    const auto t1 = eval_in_chunks(one_thread, ids, {4});
    EXPECT_EQ(first_difference(all, t1, n_vocab), -1) << "2 threads vs 1 thread";
    EXPECT_EQ(batched.n_past(), static_cast<int>(ids.size()));
}

INSTANTIATE_TEST_SUITE_P(
    Models, BatchInvariance,
    ::testing::Values("rand-llama-tok512-d256-l2-F32", "rand-llama-tok512-d256-l2-Q8_0",
                      "rand-llama-tok512-d256-l2-Q4_K_M", "rand-llama-moe4x2-tok512-d256-l2-Q8_0",
                      "rand-llama-moe4x2-tok512-d256-l2-Q4_K_M", "rand-qwen2-tok512-d256-l2-F16"),
    [](const auto& info) {
        std::string s = info.param;
        for (char& c : s) {
            if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
        }
        return s;
    });

TEST(Session, RollbackThenReevalIsIdentical) {
    const std::string stem = "rand-llama-tok512-d256-l2-Q8_0";
    const auto model = specula::Model::load(model_path(stem));
    const int n_vocab = model->hparams().n_vocab;
    const auto ids = first_prompt_ids(stem);
    ASSERT_GE(ids.size(), 30u);
    const std::vector<token_id> prefix(ids.begin(), ids.begin() + 20);
    const std::vector<token_id> draft(ids.begin() + 20, ids.begin() + 26);
    const std::vector<token_id> other(ids.begin() + 2, ids.begin() + 8);  // a rejected draft

    auto s = make_session(*model);
    eval_in_chunks(s, prefix, {20});
    const auto first = eval_in_chunks(s, draft, {6});
    s.rollback(20);
    EXPECT_EQ(s.n_past(), 20);
    eval_in_chunks(s, other, {6});
    s.rollback(20);
    const auto again = eval_in_chunks(s, draft, {6});
    EXPECT_EQ(first_difference(first, again, n_vocab), -1);

    // Partial acceptance: keep 2 draft tokens, re-evaluate the rest one by one.
    s.rollback(22);
    const std::vector<token_id> rest(draft.begin() + 2, draft.end());
    const auto tail = eval_in_chunks(s, rest, {1});
    const std::vector<float> first_tail(first.begin() + 2 * n_vocab, first.end());
    EXPECT_EQ(first_difference(first_tail, tail, n_vocab), -1);
    EXPECT_EQ(s.n_past(), 26);

    EXPECT_THROW(s.rollback(27), specula::Error);
    EXPECT_THROW(s.rollback(-1), specula::Error);
    s.reset();
    EXPECT_EQ(s.n_past(), 0);
}

// After one eval of the largest batch size, further evals (decode steps and smaller batches)
// allocate nothing: a dense model, a MoE one (its one-token pass too) and deepseek2's MLA (its
// packed per-head stacks).
TEST(Session, NoAllocationAfterWarmup) {
    const std::string arch = std::string(SPECULA_SOURCE_DIR) + "/tests/data/arch/";
    const std::string mla = "rand-deepseek2-e8x2-tok512-d128-l3-Q8_0";
    const std::pair<std::string, std::vector<token_id>> cases[] = {
        {model_path("rand-llama-tok512-d256-l2-Q4_K_M"),
         first_prompt_ids("rand-llama-tok512-d256-l2-Q4_K_M")},
        {model_path("rand-llama-moe4x2-tok512-d256-l2-Q8_0"),
         first_prompt_ids("rand-llama-moe4x2-tok512-d256-l2-Q8_0")},
        {arch + mla + ".gguf",
         json::parse(specula::test::read_file(arch + mla + ".json"))["prompts"][0]["token_ids"]
             .get<std::vector<token_id>>()}};
    for (const auto& [stem, ids] : cases) {
        ASSERT_GE(ids.size(), 20u) << stem;
        const auto model = specula::Model::load(stem);
        specula::test::g_allocs = 0;
        specula::test::g_counting = true;
        auto s = make_session(*model);
        s.eval(std::span<const token_id>(ids.data(), 8));  // warm-up: largest batch
        specula::test::g_counting = false;
        ASSERT_GT(specula::test::g_allocs.load(), 0) << "the allocation counter does not work";
        s.rollback(0);
        specula::test::g_allocs = 0;
        specula::test::g_counting = true;
        s.eval(std::span<const token_id>(ids.data(), 5));
        for (int i = 5; i < 20; ++i) s.eval(std::span<const token_id>(&ids[i], 1));
        s.rollback(10);
        s.eval(std::span<const token_id>(ids.data() + 10, 8));
        specula::test::g_counting = false;
        EXPECT_EQ(specula::test::g_allocs.load(), 0)
            << stem << ": heap allocations during warmed-up evals";
    }
}

// all_logits = false computes only the last row (and skips the last layer's other rows), and
// that row is bit-identical to the full computation.
TEST(Session, LastLogitsOnlyMatchesFullRow) {
    for (const std::string stem :
         {"rand-llama-tok512-d256-l2-Q8_0", "rand-llama-moe4x2-tok512-d256-l2-Q4_K_M",
          "rand-qwen2-tok512-d256-l2-F16"}) {
        const auto model = specula::Model::load(model_path(stem));
        const int n_vocab = model->hparams().n_vocab;
        const auto ids = first_prompt_ids(stem);
        const std::span<const token_id> prompt(ids.data(), 12);
        auto a = make_session(*model);
        a.eval(prompt);
        auto b = make_session(*model);
        b.eval(prompt, false);
        ASSERT_EQ(b.n_logits(), 1);
        EXPECT_EQ(b.n_past(), 12);
        EXPECT_EQ(std::memcmp(a.logits(11), b.logits(0), sizeof(float) * n_vocab), 0) << stem;
        // The cache it leaves behind is complete: the next token's logits agree too.
        const token_id next = ids[12];
        a.eval(std::span<const token_id>(&next, 1));
        b.eval(std::span<const token_id>(&next, 1));
        EXPECT_EQ(std::memcmp(a.logits(0), b.logits(0), sizeof(float) * n_vocab), 0) << stem;
    }
}

// A long prompt on a 128k vocabulary keeps one logits row, not one per prompt token, and runs
// in passes of n_ubatch tokens: what the session holds stays within the memory plan's pass
// figure, and the last row is bit-identical to one pass over the whole prompt. A verify pass
// afterwards keeps its rows, also within the plan.
TEST(Session, LongPromptKeepsOneLogitsRowWithinThePlan) {
    const auto model = specula::Model::load(model_path("rand-llama-llama3vocab-d64-l1-tied-Q8_0"));
    const int n_vocab = model->hparams().n_vocab;
    ASSERT_GT(n_vocab, 100000);
    constexpr int kPrompt = 1500, kUbatch = 256, kVerify = 9, kCtx = 2048;
    std::vector<token_id> ids(kPrompt + kVerify);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = token_id((i * 7919 + 13) % 120000);
    const std::span<const token_id> prompt(ids.data(), kPrompt);

    specula::SessionParams sp;
    sp.n_ctx = kCtx;
    sp.n_threads = 2;
    sp.type_k = sp.type_v = specula::KVType::F16;
    sp.n_ubatch = kUbatch;
    specula::Session s(*model, sp);
    s.eval(prompt, false);
    ASSERT_EQ(s.n_logits(), 1);
    specula::CachePlan cp;
    cp.n_ctx = kCtx;
    cp.n_threads = 2;
    cp.n_ubatch = kUbatch;
    const specula::MemoryPlan plan = specula::plan_memory(*model, nullptr, cp, 0);
    const double plan_prompt = plan.target_pass + plan.logits;
    EXPECT_LE(s.buffer_bytes(), plan_prompt);
    // One logits row per prompt token would be 1500 x 128k x 4 bytes = 770 MB.
    EXPECT_LT(s.buffer_bytes(), 0.02 * double(kPrompt) * n_vocab * sizeof(float));

    sp.n_ubatch = 4096;  // the whole prompt in one pass
    specula::Session whole(*model, sp);
    whole.eval(prompt, false);
    EXPECT_EQ(std::memcmp(s.logits(0), whole.logits(0), sizeof(float) * n_vocab), 0);

    s.eval(std::span<const token_id>(ids.data() + kPrompt, kVerify));
    ASSERT_EQ(s.n_logits(), kVerify);
    cp.logit_rows = kVerify;
    const specula::MemoryPlan verify = specula::plan_memory(*model, nullptr, cp, 0);
    EXPECT_LE(s.buffer_bytes(), verify.target_pass + verify.logits);

    // Several sessions in one BatchEvaluator: a prompt longer than a pass goes in pieces there
    // too, and its last row is the same.
    specula::ThreadPool pool(2);
    sp.n_ubatch = kUbatch;
    sp.pool = &pool;
    specula::Session a(*model, sp), b(*model, sp);
    specula::BatchEvaluator ev(*model, pool);
    const specula::BatchItem items[] = {{&a, prompt, false},
                                        {&b, std::span<const token_id>(ids.data(), 10), false}};
    ev.eval(items);
    EXPECT_EQ(std::memcmp(a.logits(0), whole.logits(0), sizeof(float) * n_vocab), 0);
    EXPECT_EQ(a.n_past(), kPrompt);
    EXPECT_LE(a.buffer_bytes(), plan_prompt);
}

TEST(Session, BadUbatchIsRefused) {
    const auto model = specula::Model::load(model_path("rand-llama-tok512-d256-l2-Q8_0"));
    specula::SessionParams sp;
    sp.n_ctx = 64;
    sp.n_ubatch = 0;
    try {
        specula::Session s(*model, sp);
        FAIL() << "n_ubatch 0 accepted";
    } catch (const specula::Error& e) {
        EXPECT_NE(std::string(e.what()).find("n_ubatch"), std::string::npos) << e.what();
    }
}

TEST(Session, LogitsStayReadableAfterRollback) {
    const std::string stem = "rand-llama-tok512-d256-l2-F32";
    const auto model = specula::Model::load(model_path(stem));
    const auto ids = first_prompt_ids(stem);
    auto s = make_session(*model);
    s.eval(std::span<const token_id>(ids.data(), 8));
    std::vector<float> row(s.logits(3), s.logits(3) + model->hparams().n_vocab);
    s.rollback(4);
    ASSERT_EQ(s.n_logits(), 8);
    EXPECT_EQ(std::memcmp(row.data(), s.logits(3), row.size() * sizeof(float)), 0);
    EXPECT_THROW(s.logits(8), specula::Error);
}

TEST(Session, MovedSessionKeepsItsState) {
    const std::string stem = "rand-llama-tok512-d256-l2-F32";
    const auto model = specula::Model::load(model_path(stem));
    const auto ids = first_prompt_ids(stem);
    auto a = make_session(*model);
    a.eval(std::span<const token_id>(ids.data(), 6));
    std::vector<float> row(a.logits(5), a.logits(5) + model->hparams().n_vocab);
    specula::Session b = std::move(a);
    EXPECT_EQ(b.n_past(), 6);
    EXPECT_EQ(std::memcmp(row.data(), b.logits(5), row.size() * sizeof(float)), 0);
    b.eval(std::span<const token_id>(ids.data() + 6, 1));
    EXPECT_EQ(b.n_past(), 7);
}

// The cache records its tokens: what eval appended (in one pass or several), less what rollback
// dropped; a failed eval changes nothing; common_prefix is the longest shared prefix.
TEST(Session, TokensAreWhatTheCacheHolds) {
    const std::string stem = "rand-llama-tok512-d256-l2-F32";
    const auto model = specula::Model::load(model_path(stem));
    const auto ids = first_prompt_ids(stem);
    ASSERT_GE(ids.size(), 8u);
    auto s = make_session(*model, 16);
    EXPECT_TRUE(s.tokens().empty());
    s.eval(std::span<const token_id>(ids.data(), 5));
    s.eval(std::span<const token_id>(ids.data() + 5, 3));
    ASSERT_EQ(s.tokens().size(), 8u);
    EXPECT_TRUE(std::equal(ids.begin(), ids.begin() + 8, s.tokens().begin()));
    EXPECT_EQ(s.common_prefix(ids), 8);
    std::vector<token_id> other(ids.begin(), ids.begin() + 8);
    other[3] = (other[3] + 1) % model->hparams().n_vocab;
    EXPECT_EQ(s.common_prefix(other), 3);
    EXPECT_EQ(s.common_prefix(std::span<const token_id>(ids.data(), 2)), 2);
    s.rollback(3);
    ASSERT_EQ(s.tokens().size(), 3u);
    EXPECT_EQ(s.common_prefix(other), 3);
    const std::vector<token_id> too_many(20, ids[0]);
    EXPECT_THROW(s.eval(too_many), specula::Error);  // overflows n_ctx = 16
    EXPECT_EQ(s.tokens().size(), 3u);
    s.reset();
    EXPECT_TRUE(s.tokens().empty());
    EXPECT_EQ(s.common_prefix(ids), 0);
}

TEST(Session, ContextOverflowThrowsNamingNCtx) {
    const auto model =
        specula::Model::load(specula::test::shared_path("models/tinystories/stories260K.gguf"));
    auto s = make_session(*model, 8);
    EXPECT_EQ(s.n_ctx(), 8);
    const std::vector<token_id> six = {1, 403, 385, 410, 317, 407};
    s.eval(six);
    const std::vector<token_id> three = {274, 368, 301};
    try {
        s.eval(three);
        FAIL() << "expected a context overflow";
    } catch (const specula::Error& e) {
        EXPECT_NE(std::string(e.what()).find("n_ctx"), std::string::npos) << e.what();
    }
    EXPECT_EQ(s.n_past(), 6) << "a failed eval must leave the cache unchanged";
    s.eval(std::span<const token_id>(three.data(), 2));
    EXPECT_EQ(s.n_past(), 8);
    const token_id one = 1;
    EXPECT_THROW(s.eval(std::span<const token_id>(&one, 1)), specula::Error);
}

TEST(Session, ImpossibleContextThrows) {
    const auto model =
        specula::Model::load(specula::test::shared_path("models/tinystories/stories260K.gguf"));
    specula::SessionParams sp;
    sp.n_ctx = 1 << 30;  // a 1.25 TiB cache
    try {
        specula::Session s(*model, sp);
        FAIL() << "expected an Error for n_ctx = 2^30";
    } catch (const specula::Error& e) {
        EXPECT_NE(std::string(e.what()).find("n_ctx"), std::string::npos) << e.what();
    }
    sp.n_ctx = -1;
    EXPECT_THROW(specula::Session(*model, sp), specula::Error);
    sp.n_ctx = 0;  // the training context (512)
    EXPECT_EQ(specula::Session(*model, sp).n_ctx(), 512);
}

TEST(Session, OutOfRangeTokenThrows) {
    const auto model =
        specula::Model::load(specula::test::shared_path("models/tinystories/stories260K.gguf"));
    auto s = make_session(*model, 16);
    const std::vector<token_id> bad = {1, 512};
    EXPECT_THROW(s.eval(bad), specula::Error);
    const std::vector<token_id> neg = {-1};
    EXPECT_THROW(s.eval(neg), specula::Error);
    EXPECT_EQ(s.n_past(), 0);
}

// ---------------------------------------------------------------------------------------------
// Load errors, on modified copies of stories260K written to a temp dir.

struct Edit {
    std::string drop_tensor;    // tensor left out
    std::string retype_tensor;  // tensor whose type is relabelled
    specula::GGMLType new_type = specula::GGMLType::F32;
    std::string reshape_tensor;                                // tensor whose dims are reversed
    std::string drop_key;                                      // metadata key left out
    std::string arch;                                          // new general.architecture
    std::vector<std::pair<std::string, int32_t>> set_i32;      // integer keys overwritten
    bool f16_norms = false;                                    // store every *_norm.weight as F16
    std::vector<std::pair<std::string, std::string>> set_str;  // string keys set
    std::vector<std::pair<std::string, float>> set_f32;        // float keys set
    float rope_freqs = 0;  // > 0: add a rope_freqs.weight tensor filled with this factor
};

std::string write_variant(const std::string& tag, const Edit& ed) {
    const auto src =
        specula::GGUFFile::open(specula::test::shared_path("models/tinystories/stories260K.gguf"));
    specula::GGUFWriter w;
    for (const auto& [k, v] : src->metadata()) {
        if (k == ed.drop_key) continue;
        w.set(k, v);
    }
    if (!ed.arch.empty()) w.set_string("general.architecture", ed.arch);
    for (const auto& [k, v] : ed.set_i32) w.set_i32(k, v);
    for (const auto& [k, v] : ed.set_str) w.set_string(k, v);
    for (const auto& [k, v] : ed.set_f32) w.set_f32(k, v);
    for (const auto& t : src->tensors()) {
        if (t.name == ed.drop_tensor) continue;
        auto ne = t.ne;
        auto type = t.type;
        if (t.name == ed.retype_tensor) type = ed.new_type;
        if (t.name == ed.reshape_tensor) std::reverse(ne.begin(), ne.end());
        if (ed.f16_norms && t.name.find("norm.weight") != std::string::npos) {
            std::vector<uint16_t> h(t.n_elements());
            specula::quantize_row(specula::GGMLType::F16, reinterpret_cast<const float*>(t.data),
                                  h.data(), t.n_elements());
            w.add_tensor(t.name, ne, specula::GGMLType::F16, h.data(), h.size() * 2);
            continue;
        }
        w.add_tensor(t.name, ne, type, t.data, t.nbytes);
    }
    if (ed.rope_freqs > 0) {
        const int n = static_cast<int>(src->get_int("llama.rope.dimension_count")) / 2;
        const std::vector<float> ff(n, ed.rope_freqs);
        w.add_tensor("rope_freqs.weight", {n}, specula::GGMLType::F32, ff.data(), n * 4);
    }
    const std::string path = specula::test::temp_dir("model") + "/" + tag + ".gguf";
    w.write(path);
    return path;
}

// Model::load must throw specula::Error whose message contains every `needle`.
void expect_load_error(const std::string& path, const std::vector<std::string>& needles) {
    try {
        specula::Model::load(path);
        ADD_FAILURE() << path << ": loaded without error";
    } catch (const specula::Error& e) {
        const std::string msg = e.what();
        for (const auto& n : needles) {
            EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
        }
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    }
}

TEST(ModelLoad, UnmodifiedCopyLoads) {
    const auto m = specula::Model::load(write_variant("same", {}));
    EXPECT_EQ(m->hparams().n_layer, 5);
    EXPECT_EQ(m->hparams().n_head_kv, 4);
    EXPECT_EQ(m->n_params(), 292800);
    EXPECT_NE(m->describe().find("llama"), std::string::npos);
}

// Norm weights stored as F16 are dequantized at load; the model then computes what the F32 file
// computes up to the F16 rounding of those weights.
TEST(ModelLoad, F16NormWeights) {
    Edit ed;
    ed.f16_norms = true;
    const auto m16 = specula::Model::load(write_variant("f16norms", ed));
    const auto m32 =
        specula::Model::load(specula::test::shared_path("models/tinystories/stories260K.gguf"));
    EXPECT_EQ(m16->owned.size(), 11u);  // 5 layers x 2 norms + output_norm
    const std::vector<token_id> ids = {1, 403, 385, 410, 317, 407, 274, 368};
    auto a = make_session(*m16, 64);
    auto b = make_session(*m32, 64);
    a.eval(ids);
    b.eval(ids);
    double max_diff = 0;
    for (int t = 0; t < 8; ++t) {
        for (int v = 0; v < 512; ++v) {
            max_diff = std::max(max_diff, std::fabs(double(a.logits(t)[v]) - b.logits(t)[v]));
        }
    }
    EXPECT_GT(max_diff, 0.0) << "the F16 norms were not used";
    EXPECT_LT(max_diff, 0.05);
}

TEST(ModelLoad, UnsupportedArchitecture) {
    Edit ed;
    ed.arch = "gpt2";
    expect_load_error(write_variant("arch", ed),
                      {"unsupported architecture 'gpt2'", "llama", "qwen2", "qwen3", "qwen3moe"});
}

TEST(ModelLoad, MissingTensor) {
    Edit ed;
    ed.drop_tensor = "blk.3.ffn_up.weight";
    expect_load_error(write_variant("missing", ed), {"missing tensor", "blk.3.ffn_up.weight"});
}

TEST(ModelLoad, UnsupportedTensorType) {
    Edit ed;
    ed.retype_tensor = "blk.0.attn_q.weight";  // F32 64x64 relabelled I32: same byte size
    ed.new_type = specula::GGMLType::I32;
    expect_load_error(write_variant("type", ed), {"blk.0.attn_q.weight", "I32"});
}

TEST(ModelLoad, MisshapenTensor) {
    Edit ed;
    ed.reshape_tensor = "blk.1.attn_k.weight";  // [64, 32] -> [32, 64]
    expect_load_error(write_variant("shape", ed), {"blk.1.attn_k.weight", "shape"});
}

TEST(ModelLoad, MissingHyperparameter) {
    Edit ed;
    ed.drop_key = "llama.embedding_length";
    expect_load_error(write_variant("key", ed), {"llama.embedding_length"});
}

// Out-of-range or inconsistent hyperparameters are refused with the key named, before any
// buffer is sized from them.
TEST(ModelLoad, BadHyperparameters) {
    const std::vector<std::pair<std::pair<std::string, int32_t>, std::string>> cases = {
        {{"llama.block_count", 1 << 20}, "llama.block_count"},
        {{"llama.block_count", 0}, "llama.block_count"},
        {{"llama.attention.head_count_kv", 3}, "head_count_kv"},
        {{"llama.attention.head_count_kv", 0}, "head_count_kv"},
        {{"llama.attention.head_count", 7}, "head_count"},
        {{"llama.embedding_length", -64}, "llama.embedding_length"},
        {{"llama.rope.dimension_count", 9}, "rope.dimension_count"},
        {{"llama.expert_used_count", 2}, "expert_used_count"},
        {{"llama.feed_forward_length", 173}, "blk.0.ffn_gate.weight"},
    };
    int i = 0;
    for (const auto& [kv, needle] : cases) {
        Edit ed;
        ed.set_i32.push_back(kv);
        SCOPED_TRACE(kv.first + " = " + std::to_string(kv.second));
        expect_load_error(write_variant("hp" + std::to_string(i++), ed), {needle});
    }
}

TEST(ModelLoad, RopeScaling) {
    Edit linear;
    linear.set_str = {{"llama.rope.scaling.type", "linear"}};
    linear.set_f32 = {{"llama.rope.scaling.factor", 4.0f}, {"llama.rope.freq_base", 5e5f}};
    const auto m = specula::Model::load(write_variant("rope_linear", linear));
    EXPECT_EQ(m->hparams().rope_freq_scale, 0.25f);
    EXPECT_EQ(m->hparams().rope_freq_base, 5e5f);
    EXPECT_FALSE(m->hparams().rope_neox);
    // YaRN (gpt-oss's files use it; test_model_parity_arch checks it against ik_llama.cpp): the
    // original context defaults to context_length.
    Edit yarn;
    yarn.set_str = {{"llama.rope.scaling.type", "yarn"}};
    yarn.set_f32 = {{"llama.rope.scaling.factor", 4.0f}};
    const auto my = specula::Model::load(write_variant("rope_yarn", yarn));
    EXPECT_TRUE(my->hparams().rope_yarn);
    EXPECT_EQ(my->hparams().rope_freq_scale, 0.25f);
    EXPECT_EQ(my->hparams().n_ctx_orig, my->hparams().n_ctx_train);
    Edit longrope;
    longrope.set_str = {{"llama.rope.scaling.type", "longrope"}};
    longrope.set_f32 = {{"llama.rope.scaling.factor", 4.0f}};
    expect_load_error(write_variant("rope_longrope", longrope),
                      {"llama.rope.scaling.type", "longrope"});
}

// Llama 3 rope_freqs divide each pair's angle: factors of 2 everywhere must rotate exactly like
// linear scaling by 2 (both halve the same float angle), and differently from no scaling.
TEST(ModelLoad, RopeFreqFactorsActLikeLinearScaling) {
    Edit freqs;
    freqs.rope_freqs = 2.0f;
    Edit linear;
    linear.set_str = {{"llama.rope.scaling.type", "linear"}};
    linear.set_f32 = {{"llama.rope.scaling.factor", 2.0f}};
    const auto mf = specula::Model::load(write_variant("rope_freqs", freqs));
    const auto ml = specula::Model::load(write_variant("rope_lin2", linear));
    const auto m0 =
        specula::Model::load(specula::test::shared_path("models/tinystories/stories260K.gguf"));
    ASSERT_EQ(mf->rope_freq_factors.size(), 4u);
    const std::vector<token_id> ids = {1, 403, 385, 410, 317, 407, 274, 368};
    auto f = make_session(*mf, 64);
    auto l = make_session(*ml, 64);
    auto o = make_session(*m0, 64);
    f.eval(ids);
    l.eval(ids);
    o.eval(ids);
    const size_t bytes = 512 * sizeof(float);
    EXPECT_EQ(std::memcmp(f.logits(0), o.logits(0), bytes), 0) << "position 0 has no rotation";
    for (int t = 1; t < 8; ++t) {
        EXPECT_EQ(std::memcmp(f.logits(t), l.logits(t), bytes), 0) << "position " << t;
        EXPECT_NE(std::memcmp(f.logits(t), o.logits(t), bytes), 0) << "position " << t;
    }
}

}  // namespace

// bytes_per_token counts what a decode step streams: every layer matrix and the output matrix
// (the tied embedding when there is no output tensor), only the used experts' share of MoE expert
// matrices, and no norm vectors or embedding table.
TEST(ModelLoad, BytesPerTokenCountsStreamedWeights) {
    auto streamed = [](const specula::GGUFFile& f, double expert_share) {
        double n = 0;
        for (const auto& t : f.tensors()) {
            const std::string& name = t.name;
            auto ends = [&](const char* s) {
                const std::string suf(s);
                return name.size() >= suf.size() &&
                       name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
            };
            if (ends("_exps.weight")) {
                n += expert_share * double(t.nbytes);
            } else if (ends("attn_q.weight") || ends("attn_k.weight") || ends("attn_v.weight") ||
                       ends("attn_output.weight") || ends("ffn_gate.weight") ||
                       ends("ffn_up.weight") || ends("ffn_down.weight") ||
                       name == "output.weight") {
                n += double(t.nbytes);
            }
        }
        if (!f.find_tensor("output.weight")) n += double(f.tensor("token_embd.weight").nbytes);
        return n;
    };
    for (const char* rel : {"models/tinystories/stories260K.gguf",
                            "models/synthetic/rand-llama-tok512-d256-l2-Q4_K_M.gguf",
                            "models/synthetic/rand-llama-tok512-d256-l2-tied-F16.gguf",
                            "models/synthetic/rand-llama-moe4x2-tok512-d256-l2-Q8_0.gguf"}) {
        const auto m = specula::Model::load(specula::test::shared_path(rel));
        const auto& hp = m->hparams();
        const double share = hp.n_expert > 0 ? double(hp.n_expert_used) / hp.n_expert : 1.0;
        EXPECT_NEAR(double(m->bytes_per_token()), streamed(m->file(), share), 1.0) << rel;
        EXPECT_GT(m->bytes_per_token(), 0) << rel;
        EXPECT_LT(m->bytes_per_token(), int64_t(m->file().file_size())) << rel;
    }
}
