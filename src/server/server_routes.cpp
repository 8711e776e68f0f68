// HttpServer's routes (see server.h): the checks every request passes before routing, httplib's
// own errors, and the route groups, one function per API family: health, metrics, the web UI and
// the model list; llama-server's slots; its token and template endpoints; Anthropic's token
// count; and the generations (OpenAI's completions and chat, Anthropic's Messages, OpenAI's
// Responses, llama-server's /completion), which HttpServer::handle_completion answers.
#include <httplib.h>

#include <cstdio>
#include <ctime>

#include "common/clock.h"
#include "common/error.h"
#include "server/api/anthropic.h"
#include "server/api/native_responses.h"
#include "server/api/token_routes.h"
#include "server/http_reply.h"
#include "server/protocol/api_error.h"
#include "server/protocol/json_depth.h"
#include "server/protocol/request.h"
#include "server/server.h"
#include "server/serving/slot_files.h"
#include "server/web_ui.h"

namespace specula {

using json = nlohmann::json;
using namespace http;

namespace {

std::string status_message(int status, size_t max_body, const httplib::Request& req) {
    switch (status) {
        case 404:
            return "not found: " + req.method + " " + req.path + " (this server answers " +
                   "/v1/completions, /v1/chat/completions, /v1/responses, /v1/messages, "
                   "/v1/messages/count_tokens, /v1/models, /completion, /props, " +
                   "/slots, /slots/{id}, /health, /metrics, /tokenize, /detokenize, "
                   "/apply-template)";
        case 405:
            return "method not allowed: " + req.method + " " + req.path;
        case 413:
            return too_big_message(max_body);
        case 414:
            return "the request URI is too long";
        default:
            return "request failed with HTTP status " + std::to_string(status);
    }
}

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The methods each path answers (a known path with another method gets 405), "" if unknown.
const char* allowed_methods(const std::string& path) {
    struct PathMethods {
        const char* path;
        const char* methods;
    };
    static constexpr PathMethods kPaths[] = {{"/v1/completions", "POST"},
                                             {"/v1/chat/completions", "POST"},
                                             {"/completion", "POST"},
                                             {"/completions", "POST"},
                                             {"/chat/completions", "POST"},
                                             {"/tokenize", "POST"},
                                             {"/detokenize", "POST"},
                                             {"/v1/embeddings", "POST"},
                                             {"/embeddings", "POST"},
                                             {"/apply-template", "POST"},
                                             {"/", "GET, HEAD"},
                                             {"/health", "GET, HEAD"},
                                             {"/metrics", "GET, HEAD"},
                                             {"/v1/models", "GET, HEAD"},
                                             {"/models", "GET, HEAD"},
                                             {"/props", "GET, HEAD"},
                                             {"/slots", "GET, HEAD"}};
    if (path.starts_with("/slots/")) return "POST";
    for (const PathMethods& p : kPaths)
        if (path == p.path) return p.methods;
    return "";
}

// The paths --api-key guards: all but /health (balancers probe it) and / (the web UI page, which
// then asks for the key), as llama-server; /v1/models stays guarded (OpenAI's API requires it).
bool needs_key(const std::string& path) {
    return path != "/health" && path != "/";
}

// A request whose framing is ambiguous (HTTP request smuggling): Content-Length together with
// Transfer-Encoding, or Content-Length headers that disagree or are not a number. "" if fine.
std::string framing_error(const httplib::Request& req) {
    const size_t n_len = req.get_header_value_count("Content-Length");
    if (n_len > 0 && req.has_header("Transfer-Encoding"))
        return "the request has both Content-Length and Transfer-Encoding (ambiguous framing)";
    std::string first;
    for (size_t i = 0; i < n_len; ++i) {
        const std::string v = req.get_header_value("Content-Length", i);
        if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
            return "the Content-Length header '" + v + "' is not a number";
        if (i == 0) first = v;
        if (std::stoull(v) != std::stoull(first))  // "016" and "16" are one length
            return "the request has conflicting Content-Length headers (" + first + ", " + v + ")";
    }
    return "";
}

// A POST body must be JSON by its Content-Type (a browser sends text/plain cross-origin without
// asking first; application/json needs a preflight this server never grants).
bool is_json_content_type(const std::string& value) {
    const std::string v = lower(value.substr(0, value.find(';')));
    const size_t b = v.find_first_not_of(" \t"), e = v.find_last_not_of(" \t");
    return b != std::string::npos && v.substr(b, e - b + 1) == "application/json";
}

// The paths that start a generation (refused while draining).
bool is_generation_path(const std::string& path) {
    return path == "/v1/completions" || path == "/completions" || path == "/v1/chat/completions" ||
           path == "/chat/completions" || path == "/completion";
}

// llama-server's 503 while the model loads (every path), with our `status` beside it.
json loading_body() {
    return {{"error", {{"code", 503}, {"message", "Loading model"}, {"type", "unavailable_error"}}},
            {"status", "loading"}};
}

// The start of the request being served on this thread (set before routing), for the log line.
thread_local clock_type::time_point t_request_start{};

// The hooks every request passes through (server.h's "Every request" and "Framing"): the log line,
// the checks before routing, httplib's own errors and a handler's exception.
void install_logger(httplib::Server& s) {
    // One line per request, refused ones included (method, path, status, milliseconds), as
    // llama-server logs them; a streamed one is logged when its stream ends.
    s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
        const double ms =
            t_request_start == clock_type::time_point{}
                ? 0.0
                : std::chrono::duration<double, std::milli>(clock_type::now() - t_request_start)
                      .count();
        t_request_start = {};
        std::fprintf(stderr, "serve: request: %s %s %d %.0f ms\n", req.method.c_str(),
                     req.path.c_str(), res.status, ms);
    });
}

// A CORS preflight answered (true) or the Origin's headers added when --cors-origin allows it.
bool cors(const HttpConfig& cfg, const httplib::Request& req, httplib::Response& res) {
    if (cfg.cors_origin.empty() || !req.has_header("Origin")) return false;
    const std::string origin = req.get_header_value("Origin");
    if (cfg.cors_origin != "*" && origin != cfg.cors_origin) return false;
    res.set_header("Access-Control-Allow-Origin", cfg.cors_origin == "*" ? "*" : origin);
    res.set_header("Vary", "Origin");
    if (req.method != "OPTIONS" || !*allowed_methods(req.path)) return false;
    res.status = 204;  // preflight
    res.set_header("Access-Control-Allow-Methods",
                   std::string(allowed_methods(req.path)) + ", OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    res.set_header("Access-Control-Max-Age", "600");
    return true;
}

// Before routing: framing, the body limit, the server's state, CORS, the Host header, the
// Content-Type and the API key, in that order.
httplib::Server::HandlerResponse pre_route(const HttpServer& server, const HttpConfig& cfg,
                                           Metrics& metrics, const httplib::Request& req,
                                           httplib::Response& res) {
    t_request_start = clock_type::now();
    const auto refuse = [&](const ApiError& e) {
        metrics.record_failure(e.status());
        send_error(res, e);
        res.set_header("Connection", "close");  // its body, if any, is left unread
        LimitedServer::close_after_response();
        return httplib::Server::HandlerResponse::Handled;
    };
    // Framing first: a request that could be read two ways is refused and its connection
    // closed, so that nothing after it on the wire is taken for a next request.
    if (const std::string bad = framing_error(req); !bad.empty()) return refuse(ApiError(400, bad));
    // A declared body over the limit: 413 now, without waiting for (or skipping) the body.
    if (req.has_header("Content-Length") &&
        std::stoull(req.get_header_value("Content-Length")) > cfg.max_body_bytes)
        return refuse(ApiError(413, too_big_message(cfg.max_body_bytes)));
    const ServerState state = server.state();
    if (state == ServerState::loading) {  // llama-server's answer, on every path
        send_json(res, 503, loading_body());
        res.set_header("Retry-After", "1");
        return httplib::Server::HandlerResponse::Handled;
    }
    if (state == ServerState::draining) {
        res.set_header("Connection", "close");
        LimitedServer::close_after_response();
        if (req.method == "POST" && is_generation_path(req.path)) {
            metrics.record_failure(503);
            send_json(res, 503,
                      {{"error", draining_error("the server is shutting down (draining) and "
                                                "takes no new requests; retry on another "
                                                "replica")}});
            res.set_header("Retry-After", "1");
            return httplib::Server::HandlerResponse::Handled;
        }
    }
    if (cors(cfg, req, res)) return httplib::Server::HandlerResponse::Handled;
    if (cfg.api_key.empty() && !host_header_allowed(req.get_header_value("Host"), cfg.host)) {
        return refuse(ApiError(403,
                               "the Host header '" + req.get_header_value("Host") +
                                   "' is not this server (without --api-key only IP "
                                   "addresses, localhost and the --host name are served)",
                               "", "invalid_request_error", "host_not_allowed"));
    }
    if (req.method == "POST" && allowed_methods(req.path)[0] == 'P' &&
        !is_json_content_type(req.get_header_value("Content-Type"))) {
        return refuse(ApiError(415,
                               "the request body must be sent as Content-Type: "
                               "application/json, got '" +
                                   req.get_header_value("Content-Type") + "'"));
    }
    if (cfg.api_key.empty() || !needs_key(req.path))
        return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + cfg.api_key ||
        req.get_header_value("x-api-key") == cfg.api_key)  // Anthropic's header
        return httplib::Server::HandlerResponse::Unhandled;
    return refuse(ApiError(401,
                           req.has_header("Authorization")
                               ? "invalid API key"
                               : "missing API key (Authorization: Bearer KEY)",
                           "", "invalid_request_error", "invalid_api_key"));
}

// httplib's own errors (404, 405 for a known path, 400/413/414/431) and a handler's exception,
// in OpenAI's error shape.
void install_error_handlers(httplib::Server& s, const HttpConfig& cfg, Metrics& metrics) {
    s.set_error_handler(httplib::Server::HandlerWithResponse(
        [&cfg, &metrics](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
            // httplib's own 400/413/414/431 (a request it could not read): what follows on the
            // wire cannot be trusted to start a request, so the connection closes.
            if (res.status == 400 || res.status == 413 || res.status == 414 || res.status == 431) {
                res.set_header("Connection", "close");
                LimitedServer::close_after_response();
            }
            if (res.status == 404 && *allowed_methods(req.path)) {
                res.status = 405;
                res.set_header("Allow", allowed_methods(req.path));
            }
            metrics.record_failure(res.status);
            const char* type = res.status >= 500 ? "server_error" : "invalid_request_error";
            send_json(res, res.status,
                      api_error_body(status_message(res.status, cfg.max_body_bytes, req), type));
            return httplib::Server::HandlerResponse::Handled;
        }));
    s.set_exception_handler(
        [&metrics](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
            std::string msg = "internal error";
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                msg = e.what();
            } catch (...) {
            }
            metrics.record_failure(500);
            send_json(res, 500, api_error_body(msg, "server_error"));
        });
}

// Route group: health, metrics, the web UI, the model list and llama-server's /props.
void add_info_routes(httplib::Server& s, const HttpServer& server, Service& service) {
    s.Get("/health", [&server](const httplib::Request&, httplib::Response& res) {
        if (server.state() != ServerState::draining) return send_json(res, 200, {{"status", "ok"}});
        send_json(res, 503,
                  {{"status", "draining"},
                   {"in_flight", server.in_flight()},
                   {"error", draining_error("the server is shutting down (draining)")}});
    });
    s.Get("/metrics", [&service](const httplib::Request&, httplib::Response& res) {
        res.set_content(service.metrics().render(), "text/plain; version=0.0.4");
    });
    s.Get("/", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(web_ui_html(), "text/html; charset=utf-8");
    });
    for (const char* path : {"/v1/models", "/models"}) {
        s.Get(path, [&service](const httplib::Request&, httplib::Response& res) {
            json model = {{"id", service.served_name()},
                          {"object", "model"},
                          {"created", long(std::time(nullptr))},
                          {"owned_by", "specula"},
                          {"max_model_len", service.n_ctx()}};
            send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
        });
    }
    // llama-server's /props (what its web UI and dashboards read).
    s.Get("/props", [&service](const httplib::Request&, httplib::Response& res) {
        // What a request that sends no sampling field gets: the launch flags (--temp, ...).
        const CompletionRequest defaults = parse_completion_request(
            json{{"prompt", ""}}, /*chat=*/false, nullptr, service.request_defaults());
        const Tokenizer& tok = service.target().tokenizer();
        send_json(res, 200,
                  {{"default_generation_settings",
                    {{"n_ctx", service.n_ctx()},
                     {"params", generation_settings(defaults, service.n_ctx())}}},
                   {"total_slots", service.n_slots()},
                   {"model_path", service.served_name()},  // the name, never the path
                   {"model_alias", service.served_name()},
                   {"chat_template", service.chat_prompter().describe()},
                   {"bos_token", tok.bos() >= 0 ? tok.token_text(tok.bos()) : ""},
                   {"eos_token", tok.eos() >= 0 ? tok.token_text(tok.eos()) : ""},
                   {"modalities", {{"vision", false}, {"audio", false}}},
                   {"build_info", "specula"}});
    });
}

// POST /slots/{id}?action=save|restore|erase: the answer to one slot action (throws ApiError or
// Error for a bad request; std::out_of_range for a slot that does not exist).
json slot_action(Service& service, const httplib::Request& req) {
    check_json_depth(req.body);
    const json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object())
        bad_request("the request body must be a JSON object");
    auto act = std::make_shared<SlotAction>();
    act->slot = std::stoi(req.matches[1].str());
    const std::string action = req.get_param_value("action");
    if (action == "erase") {
        act->kind = SlotAction::erase;
    } else if (action == "save" || action == "restore") {
        act->kind = action == "save" ? SlotAction::save : SlotAction::restore;
        if (service.slot_save_path().empty())
            throw ApiError(501, "slot " + action + " needs --slot-save-path DIR", "action",
                           "not_supported_error");
        if (!body.contains("filename") || !body["filename"].is_string())
            bad_request("'filename' (a string) is required for action=" + action, "filename");
        act->path = slot_file_path(service.slot_save_path(), body["filename"].get<std::string>());
    } else {
        bad_request("'action' must be save, restore or erase, got '" + action + "'", "action");
    }
    service.slot_action(act);
    if (!act->error.empty()) throw ApiError(act->status, act->error);
    json out = {{"id_slot", act->slot}};
    if (act->kind == SlotAction::erase) {
        out["n_erased"] = act->n_tokens;
        return out;
    }
    const bool save = act->kind == SlotAction::save;
    out.update({{"filename", body["filename"].get<std::string>()},
                {save ? "n_saved" : "n_restored", act->n_tokens},
                {save ? "n_written" : "n_read", act->n_bytes},
                {"timings", {{save ? "save_ms" : "restore_ms", act->ms}}}});
    return out;
}

// Route group: llama-server's slots, GET /slots and POST /slots/{id} (a file named by "filename"
// in --slot-save-path, or erase; on a slot that holds no request).
void add_slot_routes(httplib::Server& s, Service& service) {
    s.Get("/slots", [&service](const httplib::Request&, httplib::Response& res) {
        json slots = json::array();
        for (int i = 0; i < service.n_slots(); ++i)
            slots.push_back({{"id", i},
                             {"id_task", -1},
                             {"n_ctx", service.n_ctx()},
                             {"speculative", service.speculative()},
                             {"is_processing", service.slot_busy(i)}});
        send_json(res, 200, slots);
    });
    s.Post(R"(/slots/(\d+))", [&service](const httplib::Request& req, httplib::Response& res) {
        answer_or_refuse(service.metrics(), res, [&] {
            try {
                send_json(res, 200, slot_action(service, req));
            } catch (const std::out_of_range&) {
                throw ApiError(404, "no such slot: " + req.matches[1].str());
            }
        });
    });
}

// A JSON-in, JSON-out route: respond(req, body) gives the answer; a body that is not JSON,
// an ApiError or an Error is a 4xx JSON error (and counted).
template <class Respond>
httplib::Server::Handler json_route(Metrics& metrics, Respond respond) {
    return [&metrics, respond](const httplib::Request& req, httplib::Response& res) {
        answer_or_refuse(metrics, res, [&] {
            check_json_depth(req.body);
            json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
            if (body.is_discarded()) bad_request("the request body is not valid JSON");
            send_json(res, 200, respond(req, body));
        });
    };
}

// Route group: llama-server's token and template endpoints, and the embeddings we refuse.
// (The model is loaded by the time a request gets here: see the pre-routing handler.)
void add_token_routes(httplib::Server& s, Service& service) {
    Metrics& metrics = service.metrics();
    s.Post("/tokenize", json_route(metrics, [&service](const httplib::Request&, const json& body) {
               return tokenize_response(service.target().tokenizer(), body);
           }));
    // llama-server's /apply-template: a chat request's prompt as the template renders it.
    s.Post("/apply-template",
           json_route(metrics, [&service](const httplib::Request& req, const json& body) -> json {
               const auto ordered = nlohmann::ordered_json::parse(req.body);  // valid: parsed
               const CompletionRequest r = parse_completion_request(body, true, &ordered);
               return {{"prompt", service.chat_prompt(r).text}};
           }));
    s.Post("/detokenize",
           json_route(metrics, [&service](const httplib::Request&, const json& body) {
               return detokenize_response(service.target().tokenizer(), body);
           }));
    for (const char* path : {"/v1/embeddings", "/embeddings"}) {
        s.Post(path, [&metrics](const httplib::Request&, httplib::Response& res) {
            metrics.record_failure(501);
            send_error(res, ApiError(501,
                                     "embeddings are not implemented by this server (it serves "
                                     "completions and chat completions only)",
                                     "", "not_implemented_error", "not_implemented"));
        });
    }
}

// Route group: Anthropic's token count, the prompt the chat template renders for a Messages
// request (the Messages endpoint itself is a completion route).
void add_anthropic_routes(httplib::Server& s, Service& service) {
    s.Post("/v1/messages/count_tokens",
           [&service](const httplib::Request& req, httplib::Response& res) {
               const auto answer = [&] {
                   const auto body = nlohmann::ordered_json::parse(req.body, nullptr, false);
                   if (body.is_discarded()) bad_request("the request body is not valid JSON");
                   nlohmann::ordered_json with = body;
                   if (with.is_object() && !with.contains("max_tokens")) with["max_tokens"] = 1;
                   const nlohmann::ordered_json chat = messages_to_chat(with);
                   const PreparedRequest p =
                       service.prepare(parse_completion_request(json(chat), true, &chat));
                   send_json(res, 200, {{"input_tokens", p.prompt.size()}});
               };
               answer_or_refuse(service.metrics(), res, answer, [](auto& r, const ApiError& e) {
                   send_json(r, e.status(), anthropic_error(e));
               });
           });
}

}  // namespace

void HttpServer::routes() {
    httplib::Server& s = *svr_;
    Metrics& metrics = service_.metrics();
    install_logger(s);
    s.set_pre_routing_handler(
        [this, &metrics](const httplib::Request& req, httplib::Response& res) {
            return pre_route(*this, cfg_, metrics, req, res);
        });
    install_error_handlers(s, cfg_, metrics);

    add_info_routes(s, *this, service_);
    add_slot_routes(s, service_);
    add_token_routes(s, service_);
    add_anthropic_routes(s, service_);
    // Route group: the generations, one API each (OpenAI's completions and chat, Anthropic's
    // Messages, OpenAI's Responses, llama-server's /completion).
    const std::pair<const char*, Api> completion_routes[] = {
        {"/v1/messages", Api::messages},       {"/v1/responses", Api::responses},
        {"/v1/completions", Api::completions}, {"/completions", Api::completions},
        {"/v1/chat/completions", Api::chat},   {"/chat/completions", Api::chat},
        {"/completion", Api::native}};
    for (const auto& [path, api] : completion_routes) {
        s.Post(path, [this, api](const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& reader) {
            handle_completion(req, res, reader, api);
        });
    }
}

}  // namespace specula
