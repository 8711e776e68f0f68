// schema_walk: the JSON grammar (src/sampling/json_grammar.h) driven from a Node test. Reads
// {"cases": [{"schema": S, "walks": N, "seed": K, "checks": ["text", ...]}, ...]} on stdin and
// writes {"results": [{"texts": [...], "accepted": [...]} or {"error": "..."}, ...]}:
//  - texts: N byte-level random walks over the grammar of S (uniform over the accepted bytes,
//    ASCII ones half of the time, for a random number of steps, then the byte with the shortest
//    completion until the value is complete). A walk that meets a dead end, or whose shortest
//    completion does not shrink by one byte, makes the helper fail (exit 1).
//  - accepted: for each check text, whether the grammar accepts it as one complete value.
// A schema the grammar refuses gives {"error": what()}.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "common/error.h"
#include "sampling/grammar_state.h"
#include "sampling/json_grammar.h"

using namespace specula;
using json = nlohmann::json;

namespace {

std::string walk(const std::shared_ptr<const JsonGrammar>& g, std::mt19937& rng) {
    GrammarState st(g);
    std::string text;
    const int uniform = int(rng() % 100);
    for (int step = 0; step < 4000; ++step) {
        if (st.finished()) return text;
        std::string ok, ascii;
        const size_t before = st.min_remaining();
        size_t best_rem = SIZE_MAX;
        char best = 0;
        for (int b = 0; b < 256; ++b) {
            GrammarState s(st);
            if (!s.step(uint8_t(b))) continue;
            ok.push_back(char(b));
            if (b < 0x80) ascii.push_back(char(b));
            if (s.min_remaining() < best_rem) best_rem = s.min_remaining(), best = char(b);
        }
        if (ok.empty()) fail("a dead end after: ", text);
        char c = best;
        if (step < uniform) {
            const std::string& from = !ascii.empty() && rng() % 2 ? ascii : ok;
            c = from[rng() % from.size()];
        } else if (best_rem + 1 != before) {
            fail("min_remaining ", before, " is not exact after: ", text);
        }
        st.step(uint8_t(c));
        text.push_back(c);
    }
    fail("no end after 4000 bytes: ", text);
}

bool accepts(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
    GrammarState st(g);
    return st.advance(text) && st.can_end();
}

}  // namespace

int main() {
    try {
        const json in = json::parse(std::string(std::istreambuf_iterator<char>(std::cin), {}));
        json results = json::array();
        for (const json& c : in.at("cases")) {
            std::shared_ptr<const JsonGrammar> g;
            try {
                g = json_schema_grammar(c.at("schema"));
            } catch (const Error& e) {
                results.push_back({{"error", e.what()}});
                continue;
            }
            std::mt19937 rng(c.value("seed", 1u));
            json texts = json::array(), accepted = json::array();
            for (int k = 0; k < c.value("walks", 0); ++k) texts.push_back(walk(g, rng));
            for (const json& t : c.value("checks", json::array()))
                accepted.push_back(accepts(g, t.get<std::string>()));
            results.push_back({{"texts", texts}, {"accepted", accepted}});
        }
        std::cout << json{{"results", results}}.dump(-1, ' ', false, json::error_handler_t::strict);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "schema_walk: %s\n", e.what());
        return 1;
    }
}
