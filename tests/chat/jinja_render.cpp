// jinja_render: reads {"template": "...", "context": {...}} (JSON) on stdin and writes the
// render of Specula's Jinja engine on stdout, nothing else; on an error it writes the message
// to stderr and exits 1. Given {"cases": [{"template", "context"}, ...]} instead, it writes one
// JSON array with {"output": "..."} or {"error": "..."} per case (one process for many renders).
// The Node test (tests/chat/jinja_compare.test.mjs) compares its output byte for byte with
// @huggingface/jinja's.
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/jinja_template.h"
#include "common/error.h"

int main() {
    std::ios::sync_with_stdio(false);
    const std::string input((std::istreambuf_iterator<char>(std::cin)),
                            std::istreambuf_iterator<char>());
    try {
        const auto req = nlohmann::ordered_json::parse(input);
        if (req.contains("cases")) {
            nlohmann::ordered_json results = nlohmann::ordered_json::array();
            for (const auto& c : req.at("cases")) {
                try {
                    results.push_back(
                        {{"output", specula::render_chat_template(
                                        c.at("template").get<std::string>(),
                                        c.value("context", nlohmann::ordered_json::object()))}});
                } catch (const std::exception& e) {
                    results.push_back({{"error", e.what()}});
                }
            }
            std::cout << results.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
            return 0;
        }
        const std::string out =
            specula::render_chat_template(req.at("template").get<std::string>(),
                                          req.value("context", nlohmann::ordered_json::object()));
        std::cout.write(out.data(), std::streamsize(out.size()));
        return 0;
    } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
        return 1;
    }
}
