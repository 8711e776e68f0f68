// The Jinja engine's budgets (jinja::Limits) against the hostile templates of issue 45: each
// ends, fast, with an Error naming the limit it hit (or renders, where the fix makes the work
// small), never a crash, a hang or gigabytes. Most run under the default limits, as `serve` and
// `chat` render; a few lower one limit to stay fast.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/jinja_template.h"
#include "common/error.h"

namespace {

using specula::ChatTemplate;
using specula::jinja::Limits;

struct Outcome {
    std::string output, error;
    double seconds = 0;
};

Outcome run(const std::string& tmpl, const Limits& limits = {},
            const nlohmann::json& context = nlohmann::json::object()) {
    Outcome o;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        o.output = ChatTemplate(tmpl, limits).render(context);
    } catch (const specula::Error& e) {
        o.error = e.what();
    }
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return o;
}

// The template fails with an error containing `limit`, in well under the time a hang would take
// (the bound is loose for sanitizer builds; a Release build takes a fraction of it).
void expect_refused(const std::string& tmpl, const std::string& limit, const Limits& limits = {}) {
    const Outcome o = run(tmpl, limits);
    EXPECT_NE(o.error.find(limit), std::string::npos)
        << "template: " << tmpl << "\nerror: " << o.error << "\noutput: " << o.output.size()
        << " bytes";
    EXPECT_LT(o.seconds, 5.0) << tmpl;
}

// Sets `name`.s to 2^n copies of `unit`, built by doubling.
std::string doubled(const std::string& unit, int n, const std::string& name = "ns") {
    return "{% set " + name + " = namespace(s='" + unit + "') %}{% for i in range(" +
           std::to_string(n) + ") %}{% set " + name + ".s = " + name + ".s ~ " + name +
           ".s %}{% endfor %}";
}

}  // namespace

TEST(ChatJinjaLimits, ListNestedDeepIsRefusedOnCreation) {
    // The template: SIGSEGV in serve and chat before (the destructors recursed).
    expect_refused(
        "{% set ns = namespace(x=[]) %}{% for i in range(300000) %}{% set ns.x = [ns.x] %}{% "
        "endfor %}{{ ns.x }}",
        "value nested deeper than the limit of 512 levels");
    expect_refused(
        "{% set ns = namespace(x={}) %}{% for i in range(1000) %}{% set ns.x = {'a': "
        "ns.x} %}{% endfor %}",
        "nested deeper than the limit of 512 levels");
}

// A chain built by append escapes the check on creation (each list is made empty): freeing,
// printing, comparing and tojson of it must still not recurse on the C stack. The renders run
// on a thread with a 2 MiB stack, which a recursion over 40,000 levels overflows (it did).
TEST(ChatJinjaLimits, DeepChainBuiltByAppendIsFreedAndWalkedWithoutRecursion) {
    const std::string chain =
        "{% set a = [] %}{% set ns = namespace(c=a) %}{% for i in range(40000) %}{% set n = [] "
        "%}{% set _ = ns.c.append(n) %}{% set ns.c = n %}{% endfor %}";
    struct Job {
        std::string chain;
        Outcome freed, printed, json, compared;
    } job{chain, {}, {}, {}, {}};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 2048 * 1024);
    pthread_t thread;
    ASSERT_EQ(pthread_create(
                  &thread, &attr,
                  [](void* p) -> void* {
                      auto& j = *static_cast<Job*>(p);
                      j.freed = run(j.chain + "done");
                      j.printed = run(j.chain + "{{ a }}");
                      j.json = run(j.chain + "{{ a | tojson(indent=2) }}");
                      j.compared =
                          run(j.chain + "{{ a == a }}{{ a == [a] }}{{ (a + [a]) | length }}");
                      return nullptr;
                  },
                  &job),
              0);
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
    EXPECT_EQ(job.freed.output, "done") << job.freed.error;
    EXPECT_NE(job.printed.error.find("nested deeper than the limit of 512 levels"),
              std::string::npos)
        << job.printed.error;
    EXPECT_NE(job.json.error.find("nested deeper than the limit of 512 levels"), std::string::npos)
        << job.json.error;
    EXPECT_EQ(job.compared.output, "truefalse2") << job.compared.error;
}

TEST(ChatJinjaLimits, RangeEndsPastTwoToThe53AndRefusesHugeCounts) {
    // Looped forever before (i += 1 leaves 2^54 unchanged), growing ~80 MB/s.
    const Outcome o = run("{% for i in range(2**54, 2**54 + 8) %}{{ i }} {% endfor %}");
    EXPECT_EQ(o.error, "");
    EXPECT_NE(o.output.find("18014398509481984 "), std::string::npos);
    EXPECT_LT(o.seconds, 1.0);
    expect_refused("{{ range(2**40) | length }}",
                   "range() of 1099511627776 items: longer than the limit of 1000000 items");
    expect_refused("{% for i in range(0, 10**15, 3) %}{% endfor %}", "longer than the limit");
}

TEST(ChatJinjaLimits, LoopIterationsAreCountedAcrossLoops) {
    // (The default, 1,000,000, is hit through the server: chat/server_template.test.mjs.)
    Limits some;
    some.max_iterations = 100000;
    expect_refused(
        "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(10) %}{% endfor %}"
        "{% endfor %}{% endfor %}",
        "more than 100000 loop iterations (the limit per render)", some);
    Limits few;
    few.max_iterations = 50;
    expect_refused("{% for i in range(10) %}{% for c in 'abcdefghij' %}{% endfor %}{% endfor %}",
                   "more than 50 loop iterations", few);
}

TEST(ChatJinjaLimits, StepsAreChargedForTheBytesAnOperationWalks) {
    Limits small;
    small.max_steps = 200000;
    // Few iterations, each searching 64 KiB: the bytes searched run the budget out.
    expect_refused(doubled("abcdefgh", 13) +
                       "{% for i in range(1000) %}{% if 'zz' in ns.s %}x{% endif %}{% endfor %}",
                   "evaluation budget of 200000 steps exhausted", small);
    expect_refused("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nesting deeper than");
}

TEST(ChatJinjaLimits, StringAndListSizes) {
    // Smaller limits than the defaults (32 MiB, 1,000,000 items) keep this fast under ASan.
    Limits small;
    small.max_output = 1 << 20;
    small.max_items = 100000;
    expect_refused(doubled("xxxxxxxx", 18), "string longer than the limit of 1048576 bytes", small);
    // |list and split count before they build: a list past the limit is never allocated
    // (|list on a long string reached 6 GB before).
    expect_refused(doubled("ab", 17) + "{{ ns.s | list | length }}",
                   "list longer than the limit of 100000 items", small);
    expect_refused(doubled(", ", 17) + "{{ ns.s.split(',') | length }}",
                   "list longer than the limit of 100000 items", small);
    expect_refused(doubled("a b ", 17) + "{{ ns.s.split() | length }}",
                   "list longer than the limit of 100000 items", small);
    // wordcount counts without a list (3.8 GB before).
    const Outcome words = run(doubled("a b ", 17) + "{{ ns.s | wordcount }}", small);
    EXPECT_EQ(words.output, "262144") << words.error;
    EXPECT_LT(words.seconds, 2.0);
}

TEST(ChatJinjaLimits, BytesAllocatedPerRender) {
    Limits small;
    small.max_bytes = 16u << 20;
    // Each append keeps a new 1 MiB string: no one string or list is long, all together are.
    expect_refused(doubled("xxxxxxxx", 17) +
                       "{% set l = [] %}{% for i in range(100) %}{% set _ = l.append(ns.s ~ i) "
                       "%}{% endfor %}",
                   "allocated more than 16777216 bytes of strings and lists (the limit per "
                   "render)",
                   small);
    // Copies of one string share its bytes: a thousand references cost no budget.
    const Outcome shared = run(doubled("xxxxxxxx", 17) +
                                   "{% set l = [] %}{% for i in range(1000) %}{% set _ = "
                                   "l.append(ns.s) %}{% endfor %}{{ l | length }}",
                               small);
    EXPECT_EQ(shared.output, "1000") << shared.error;
}

TEST(ChatJinjaLimits, StringIndexingIsConstantTimePerCharacter) {
    // 2^20 two-byte code points indexed here and there: each index decoded the whole string
    // before (a 2 MB decode per character).
    const Outcome o = run(doubled("é", 20) +
                          "{% set n = namespace(c=0) %}{% for i in range(0, 1048576, 97) %}{% if "
                          "ns.s[i] == 'é' and ns.s[-i - 1] == 'é' %}{% set n.c = n.c + 1 %}{% "
                          "endif %}{% endfor %}{{ n.c }} {{ ns.s[5:8] }} {{ ns.s[::524288] }}");
    EXPECT_EQ(o.output, "10811 ééé éé") << o.error;
    EXPECT_LT(o.seconds, 2.0);
}

TEST(ChatJinjaLimits, SubstringSearchIsLinear) {
    // A needle that matches almost everywhere until its last byte: quadratic in a naive search.
    const Outcome o = run(doubled("a", 20) + doubled("a", 14, "n2") +
                          "{% set n2.s = n2.s ~ 'b' %}{{ n2.s in ns.s }}{{ ns.s.find(n2.s) }}"
                          "{{ ns.s.rfind(n2.s) }}{{ ns.s.count(n2.s) }}");
    EXPECT_EQ(o.output, "false-1-10") << o.error;
    EXPECT_LT(o.seconds, 2.0);
}

TEST(ChatJinjaLimits, TojsonOfSharedHalvesStopsAtTheStringLimit) {
    // 2^40 leaves in a few bytes of lists: the text, not the walk, is what is bounded.
    Limits small;
    small.max_output = 1 << 20;
    expect_refused(
        "{% set ns = namespace(l=['xxxxxxxxxxxxxxxx']) %}{% for i in range(40) %}{% set ns.l = "
        "[ns.l, ns.l] %}{% endfor %}{{ ns.l | tojson }}",
        "text longer than the limit of 1048576 bytes", small);
    expect_refused(
        "{% set ns = namespace(l=['xxxxxxxxxxxxxxxx']) %}{% for i in range(40) %}{% set ns.l = "
        "[ns.l, ns.l] %}{% endfor %}{{ ns.l }}",
        "text longer than the limit of 1048576 bytes", small);
}

TEST(ChatJinjaLimits, ARenderStopsWhenItsScopeSaysCancelled) {
    std::atomic<int> polls{0};
    const specula::RenderCancelScope scope([&] { return ++polls >= 3; });
    const Outcome o =
        run("{% for i in range(1000) %}{% for j in range(1000) %}{{ j }}{% endfor %}{% endfor %}");
    EXPECT_NE(o.error.find("render cancelled"), std::string::npos) << o.error;
    EXPECT_EQ(polls.load(), 3);
    EXPECT_LT(o.seconds, 1.0);
}

TEST(ChatJinjaLimits, RealTemplatesStayFarBelowTheLimits) {
    // A ChatML-style template over a 2,000-message conversation: renders under the defaults.
    nlohmann::json messages = nlohmann::json::array();
    for (int i = 0; i < 2000; ++i)
        messages.push_back(
            {{"role", i % 2 ? "assistant" : "user"},
             {"content", "message " + std::to_string(i) + " " + std::string(200, 'x')}});
    const Outcome o = run(
        "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% "
        "endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        {}, {{"messages", messages}, {"add_generation_prompt", true}});
    EXPECT_EQ(o.error, "");
    EXPECT_GT(o.output.size(), 2000u * 200);
}
