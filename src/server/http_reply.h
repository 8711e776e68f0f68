// The JSON answers HttpServer's handlers send (server.cpp's generations, server_routes.cpp's
// route groups), written once.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/protocol/api_error.h"

namespace specula::http {

// JSON text; invalid UTF-8 replaced, never thrown.
std::string dump(const nlohmann::json& j);
void send_json(httplib::Response& res, int status, const nlohmann::json& body);
void send_error(httplib::Response& res, const ApiError& e);  // its status and OpenAI's shape
// The 413 message for a body over --max-body-bytes.
std::string too_big_message(size_t max_body);
// The `error` object of a 503 while draining.
nlohmann::json draining_error(const std::string& message);

}  // namespace specula::http
