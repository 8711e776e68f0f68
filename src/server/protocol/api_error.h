// Errors of the HTTP API in OpenAI's shape:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens",
//              "code": null}}
// with the HTTP status they go out with. Request handlers throw ApiError; the server turns it
// (and any other exception, as a 500) into a response and keeps serving.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace specula {

class ApiError : public std::runtime_error {
  public:
    ApiError(int status, std::string message, std::string param = "",
             std::string type = "invalid_request_error", std::string code = "")
        : std::runtime_error(message),
          status_(status),
          param_(std::move(param)),
          type_(std::move(type)),
          code_(std::move(code)) {}

    int status() const { return status_; }
    nlohmann::json body() const;

  private:
    int status_;
    std::string param_, type_, code_;
};

// The error body for a status and message (param/code null when empty).
nlohmann::json api_error_body(const std::string& message, const std::string& type,
                              const std::string& param = "", const std::string& code = "");

// Shorthands for the common 400.
[[noreturn]] void bad_request(const std::string& message, const std::string& param = "");

}  // namespace specula
