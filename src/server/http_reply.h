// The JSON answers HttpServer's handlers send (server.cpp's generations, server_routes.cpp's
// route groups), written once.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "server/protocol/api_error.h"
#include "server/serving/metrics.h"

namespace specula::http {

// JSON text; invalid UTF-8 replaced, never thrown.
std::string dump(const nlohmann::json& j);
void send_json(httplib::Response& res, int status, const nlohmann::json& body);
void send_error(httplib::Response& res, const ApiError& e);  // its status and OpenAI's shape
// Runs answer(); an ApiError it throws (or an Error, as a 400) is counted in `metrics` and sent
// by `send` (OpenAI's error shape unless the route has its own) instead of the answer.
template <class Answer, class Send = void (*)(httplib::Response&, const ApiError&)>
void answer_or_refuse(Metrics& metrics, httplib::Response& res, Answer&& answer,
                      Send send = send_error) {
    try {
        answer();
    } catch (const ApiError& e) {
        metrics.record_failure(e.status());
        send(res, e);
    } catch (const Error& e) {
        metrics.record_failure(400);
        send(res, ApiError(400, e.what()));
    }
}

// The 413 message for a body over --max-body-bytes.
std::string too_big_message(size_t max_body);
// The `error` object of a 503 while draining.
nlohmann::json draining_error(const std::string& message);

}  // namespace specula::http
