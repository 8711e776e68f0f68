// Fuzzes the server's request parsing and validation: the input is a request body, parsed as
// JSON the way the server does and validated as a completion and as a chat request. Bad input
// must throw ApiError (a 400); the input's text is also checked as a Host header.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/host_check.h"
#include "server/protocol/api_error.h"
#include "server/protocol/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string body(reinterpret_cast<const char*>(data), size);
    (void)specula::host_header_allowed(body, "127.0.0.1");
    (void)specula::is_loopback_host(body);
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    for (bool chat : {false, true}) {
        try {
            const auto r = specula::parse_completion_request(j, chat);
            if (r.max_tokens < -1 || r.max_tokens > INT32_MAX) __builtin_trap();
            for (auto id : r.prompt_ids)
                if (id < 0) __builtin_trap();
            (void)specula::api_error_body(r.model, "x").dump();
        } catch (const specula::ApiError& e) {
            if (e.status() != 400) __builtin_trap();
            (void)e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        }
    }
    return 0;
}
