// ApiError: see api_error.h.
#include "server/protocol/api_error.h"

namespace specula {

nlohmann::json api_error_body(const std::string& message, const std::string& type,
                              const std::string& param, const std::string& code) {
    nlohmann::json e = {{"message", message}, {"type", type}};
    e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
    e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
    return {{"error", e}};
}

nlohmann::json ApiError::body() const {
    return api_error_body(what(), type_, param_, code_);
}

void bad_request(const std::string& message, const std::string& param) {
    throw ApiError(400, message, param);
}

}  // namespace specula
