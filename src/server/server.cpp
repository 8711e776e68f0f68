// HttpServer: see server.h.
#include "server/server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <thread>

#include "chat/jinja_template.h"
#include "common/clock.h"
#include "common/error.h"
#include "server/api/anthropic.h"
#include "server/api/native_responses.h"
#include "server/api/openai_responses.h"
#include "server/api/responses.h"
#include "server/http_reply.h"
#include "server/protocol/api_error.h"
#include "server/protocol/json_depth.h"

namespace specula {

using json = nlohmann::json;
using namespace http;

namespace http {

std::string dump(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void send_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
    send_json(res, e.status(), e.body());
}

std::string too_big_message(size_t max_body) {
    return "the request body is larger than the limit of " + std::to_string(max_body) +
           " bytes (--max-body-bytes; counted after any Content-Encoding)";
}

json draining_error(const std::string& message) {
    return {{"code", 503}, {"message", message}, {"type", "unavailable_error"}};
}

}  // namespace http

namespace {

bool write_sse(httplib::DataSink& sink, const json& j) {
    const std::string s = "data: " + dump(j) + "\n\n";
    return sink.write(s.data(), s.size());
}

// Reads a body through httplib's decoding (chunked, gzip, deflate, br), counting the decoded
// bytes as they come: false, with the reason in `error`, past `max` or on a broken encoding.
bool read_body(const httplib::Request& req, const httplib::ContentReader& reader,
               const httplib::Response& res, size_t max, std::string& body, ApiError& error) {
    bool too_big = false;
    // One allocation for a body that says its length (a 40 MiB body grown by doubling touched
    // ~80 MiB of fresh pages, seconds of page faults on a virtual machine).
    // (The framing was checked before routing: one Content-Length, all digits, within max.)
    if (req.has_header("Content-Length"))
        body.reserve(std::min<size_t>(std::stoull(req.get_header_value("Content-Length")), max));
    const bool ok = reader([&](const char* data, size_t n) {
        if (n > max - body.size()) {
            too_big = true;
            return false;
        }
        body.append(data, n);
        return true;
    });
    if (ok) return true;
    error = too_big || res.status == 413
                ? ApiError(413, too_big_message(max))
                : ApiError(400,
                           "the request body could not be read (bad chunked or content "
                           "encoding, or it did not arrive within the read deadline)");
    return false;
}

// The error event that ends a stream cut by the drain deadline.
json shutdown_error() {
    return api_error_body(
        "the server shut down before this completion finished (drain deadline); retry the "
        "request",
        "server_error");
}

// Choice i of a request; the first was admitted before the status line (HttpServer::admit).
Completion run_choice(Service& service, Service::Ticket& first, const PreparedRequest& p, int i,
                      const PieceSink& sink, const std::function<bool()>& keep_waiting) {
    return i == 0 ? service.follow(first, p, sink, keep_waiting)
                  : service.run(p, sink, keep_waiting, i);
}

std::atomic<long> g_request_id{0};

// Response ids: a prefix drawn once per process (time and randomness), then a counter, so that ids
// never repeat across restarts (clients and logs key on them).
const std::string& id_prefix() {
    static const std::string prefix = [] {
        std::random_device rd;
        const uint64_t x = (uint64_t(rd()) << 32 | rd()) ^
                           uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
        return std::string(buf, 12);
    }();
    return prefix;
}

// A failure after the response has started (generation threw): logged, and sent as an error
// object since the 200 status is already out.
json internal_error(const std::exception& e) {
    std::fprintf(stderr, "serve: generation failed: %s\n", e.what());
    return api_error_body(std::string("generation failed: ") + e.what(), "server_error");
}

// The reply could not be made from the model's output (a tool-call or reasoning parser threw):
// logged, and that request answered with a 500 error object naming it (in-band: the 200 status
// is already out); the server goes on.
ApiError reply_failed(const std::exception& e) {
    std::fprintf(stderr, "serve: building the reply failed: %s\n", e.what());
    return ApiError(500,
                    std::string("building the reply from the model's output failed: ") + e.what(),
                    "", "server_error", "reply_failed");
}

}  // namespace

// The wire bytes one request may take: its decoded body's limit, with room for the head and for
// chunk framing or a compressed encoding that is larger than what it decodes to.
static ConnectionLimits wire_limits(const HttpConfig& cfg) {
    ConnectionLimits l = cfg.limits;
    l.max_request_bytes = std::min<size_t>(cfg.max_body_bytes, kMaxBodyBytesLimit) * 8 + (1 << 20);
    return l;
}

void check_http_config(const HttpConfig& cfg) {
    if (cfg.max_body_bytes < 1 || cfg.max_body_bytes > kMaxBodyBytesLimit)
        fail("--max-body-bytes must be in [1, ", kMaxBodyBytesLimit, "], got ",
             cfg.max_body_bytes == SIZE_MAX ? std::string("-1")
                                            : std::to_string(cfg.max_body_bytes));
    check_connection_limits(cfg.limits);
}

HttpServer::HttpServer(Service& service, const HttpConfig& cfg)
    : service_(service),
      cfg_(cfg),
      svr_((check_http_config(cfg), std::make_unique<LimitedServer>(wire_limits(cfg)))) {
    svr_->set_payload_max_length(cfg.max_body_bytes);
    svr_->on_refused = [this] { service_.metrics().record_failure(503); };
    // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second
    // server bind the same port silently and share its connections. TCP_NODELAY (inherited by
    // accepted sockets) sends each streamed token at once.
    svr_->set_socket_options([](int sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    });
    routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::handle_completion(const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader, Api api) {
    const bool anthropic = api == Api::messages, openai_responses = api == Api::responses;
    const bool chat = api == Api::chat || anthropic || openai_responses;
    const bool native = api == Api::native;
    std::shared_ptr<const ResponsesRequest> responses_request;
    bool hide_thinking = false;  // Anthropic's thinking.display "omitted"
    struct Busy {
        std::atomic<int>& n;
        ~Busy() { --n; }
    };
    ++in_flight_;
    auto busy = std::make_shared<Busy>(in_flight_);
    PreparedRequest p;
    try {
        std::string text;
        ApiError read_error(400, "");
        if (!read_body(req, reader, res, cfg_.max_body_bytes, text, read_error)) {
            res.set_header("Connection", "close");  // the rest of the body is not read
            LimitedServer::close_after_response();
            throw read_error;
        }
        check_json_depth(text);
        // Chat templates see the keys in the order sent: a chat body is parsed once, in order,
        // and copied into the sorted form (a copy is far cheaper than a second parse of a big
        // body).
        nlohmann::ordered_json ordered;
        json body;
        if (chat) {
            ordered = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
            if (!ordered.is_discarded()) body = json(ordered);
        } else {
            body = json::parse(text, nullptr, /*allow_exceptions=*/false);
        }
        if (chat ? ordered.is_discarded() : body.is_discarded())
            bad_request("the request body is not valid JSON");
        if (anthropic) {
            hide_thinking = ordered.is_object() && ordered.contains("thinking") &&
                            ordered["thinking"].is_object() &&
                            ordered["thinking"].value("display", "") == "omitted";
            ordered = messages_to_chat(ordered);
            body = json(ordered);
        } else if (openai_responses) {
            responses_request = std::make_shared<const ResponsesRequest>(
                responses_to_chat(ordered, cfg_.drop_unsupported_tools));
            ordered = responses_request->chat;
            body = json(ordered);
        }
        std::string().swap(text);  // the body is parsed: its bytes are not needed again
        CompletionRequest r = parse_completion_request(body, chat, chat ? &ordered : nullptr,
                                                       service_.request_defaults());
        // Agents' APIs send a max_tokens far past a local context (Claude Code: 128000) and an
        // effort whatever the model: the reply stops at a full context, and the effort sets a
        // thinking switch only where the template has one.
        r.lenient_limits = anthropic || openai_responses;
        {  // a client that leaves while its chat template renders stops the render
            const RenderCancelScope cancel([] { return LimitedServer::client_gone(); });
            p = service_.prepare(std::move(r));
        }
        if (native && p.req.n != 1) bad_request("/completion gives one completion (n = 1)", "n");
    } catch (const ApiError& e) {
        service_.metrics().record_failure(e.status());
        anthropic ? send_json(res, e.status(), anthropic_error(e)) : send_error(res, e);
        return;
    } catch (const Error& e) {
        service_.metrics().record_failure(400);
        const ApiError bad(400, e.what());
        anthropic ? send_json(res, 400, anthropic_error(bad)) : send_error(res, bad);
        return;
    }
    const long n = ++g_request_id;
    // Every field by name (a field added to ResponseHead cannot shift the others).
    auto head = std::make_shared<ResponseHead>(
        ResponseHead{.id = (chat ? "chatcmpl-" : "cmpl-") + id_prefix() + std::to_string(n),
                     .object = chat ? (p.req.stream ? "chat.completion.chunk" : "chat.completion")
                                    : "text_completion",
                     .created = long(std::time(nullptr)),
                     .model = service_.served_name(),
                     .chat = chat,
                     .logprobs = p.req.logprobs,
                     .split_reasoning = p.split_reasoning,
                     .reasoning_open = p.reasoning_open,
                     .parse_tools = p.parse_tools,
                     .parallel_tool_calls = p.req.parallel_tool_calls,
                     .native = native,
                     .n_prompt = int(p.prompt.size()),
                     .settings = native ? generation_settings(p.req, service_.n_ctx()) : json(),
                     .tool_format = p.tool_format,
                     .tools = p.req.tools,
                     .anthropic = anthropic,
                     .hide_thinking = hide_thinking,
                     .responses = responses_request,
                     .trace = p.req.trace,
                     .echo = p.req.echo,
                     .prompt_logprobs = p.req.prompt_logprobs});
    auto prepared = std::make_shared<PreparedRequest>(std::move(p));
    std::shared_ptr<Service::Ticket> first = admit(res, *head, *prepared);
    if (!first) return;
    if (prepared->req.stream) {
        send_stream(res, head, prepared, std::move(first), std::move(busy));
    } else {
        send_whole(res, head, prepared, std::move(first), std::move(busy));
    }
}

std::shared_ptr<Service::Ticket> HttpServer::admit(httplib::Response& res, const ResponseHead& head,
                                                   const PreparedRequest& prepared) {
    std::shared_ptr<Service::Ticket> t = service_.submit(prepared, 0);
    try {
        // One that got its slot as the drain deadline passed has sent nothing: it is refused as
        // if still queued (the dropped ticket cancels it).
        if (service_.wait_started(*t, prepared, [] { return !LimitedServer::client_gone(); }) &&
            !service_.cancelling_all())
            return t;
    } catch (const ApiError& e) {  // the KV pool stayed full: retry later
        service_.metrics().record_failure(e.status());
        head.anthropic ? send_json(res, e.status(), anthropic_error(e)) : send_error(res, e);
        res.set_header("Retry-After", "1");
        return nullptr;
    } catch (const std::exception& e) {
        service_.metrics().record_failure(500);
        const ApiError err(500, std::string("generation failed: ") + e.what(), "", "server_error");
        head.anthropic ? send_json(res, 500, anthropic_error(err)) : send_error(res, err);
        return nullptr;
    }
    if (service_.cancelling_all()) {  // the drain deadline passed while it was queued
        service_.metrics().record_failure(503);
        send_json(res, 503, shutdown_error());
        res.set_header("Retry-After", "1");
    } else {  // the client left: nothing reads an answer
        res.status = 499;
        LimitedServer::close_after_response();
    }
    return nullptr;
}

// SSE, choice after choice: a start chunk (chat: the role; completions: the echo), a chunk per
// batch of released text, a chunk with finish_reason; then, with stream_options.include_usage, a
// chunk with "choices": [] and the usage; then [DONE].
void HttpServer::send_stream(httplib::Response& res, std::shared_ptr<const ResponseHead> head,
                             std::shared_ptr<const PreparedRequest> prepared,
                             std::shared_ptr<Service::Ticket> first, std::shared_ptr<void> busy) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [this, head, prepared, first, busy](
                                                              size_t, httplib::DataSink& sink) {
        static const std::string waiting = ": waiting for a free slot\n\n";  // SSE comment
        const Tokenizer& tok = service_.target().tokenizer();
        std::vector<Completion> done;
        // Anthropic's or the Responses API's events instead of chat chunks.
        std::unique_ptr<MessageStream> message;
        std::unique_ptr<ResponseEventStream> events;
        const auto write_raw = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
        const auto emit = [&](const json& chunk) {
            return message  ? write_raw(message->chunk(chunk))
                   : events ? write_raw(events->chunk(chunk))
                            : write_sse(sink, chunk);
        };
        for (int i = 0; i < prepared->req.n; ++i) {
            Completion c;
            StreamCursor cursor = stream_cursor(*head);
            bool started = false;
            const auto start = [&](const Completion& so_far) {
                started = true;
                if (head->anthropic) {
                    message = std::make_unique<MessageStream>(head->id, head->model, head->n_prompt,
                                                              so_far.n_cached, head->hide_thinking);
                    return write_raw(message->start());
                }
                if (head->responses) {
                    events = std::make_unique<ResponseEventStream>(head->id, head->model,
                                                                   head->created, *head->responses);
                    return write_raw(events->start());
                }
                return head->native || write_sse(sink, stream_start_chunk(*head, i, so_far, tok));
            };
            try {
                c = run_choice(
                    service_, *first, *prepared, i,
                    [&](const Completion& so_far, const std::vector<TokenPiece>& pieces) {
                        if (!started && !start(so_far)) return false;
                        json chunk = head->native
                                         ? native_chunk(*head, pieces, so_far, tok, cursor)
                                         : stream_chunk(*head, i, pieces, so_far, tok, cursor);
                        if (prepared->req.timings_per_token)
                            chunk["timings"] = timings_json({so_far});
                        return emit(chunk);
                    },
                    [&] { return sink.write(waiting.data(), waiting.size()); });
            } catch (const ApiError& e) {  // a refusal after the status line (kv_pool_full)
                head->anthropic
                    ? write_raw("event: error\ndata: " + dump(anthropic_error(e)) + "\n\n")
                    : write_sse(sink, e.body());
                sink.done();
                return true;
            } catch (const std::exception& e) {  // the status line is gone: report in-band
                write_sse(sink, internal_error(e));
                return false;
            }
            if (c.finish_reason == "abort" && service_.cancelling_all()) {  // drain deadline
                write_sse(sink, shutdown_error());
                sink.done();
                return true;
            }
            if (c.finish_reason == "abort") return false;
            if (!started && !start(c)) return false;
            if (head->native) {  // llama-server's last event: the whole reply; no [DONE]
                write_sse(sink, native_final(*head, c, tok, /*streamed=*/true));
                sink.done();
                return true;
            }
            try {
                for (const json& rest : stream_flush_chunks(*head, i, cursor))
                    if (!emit(rest)) return false;
                if (message || events) {  // one message or response, no usage chunk, no [DONE]
                    write_raw(message ? message->finish(c, cursor.called_tools)
                                      : events->finish(c, head->n_prompt));
                    sink.done();
                    return true;
                }
            } catch (const std::exception& e) {
                const ApiError err = reply_failed(e);
                service_.metrics().record_failure(500);
                head->anthropic
                    ? write_raw("event: error\ndata: " + dump(anthropic_error(err)) + "\n\n")
                    : write_sse(sink, err.body());
                sink.done();
                return true;
            }
            if (cursor.called_tools && c.finish_reason == "stop") c.finish_reason = "tool_calls";
            if (!write_sse(sink, finish_chunk(*head, i, c))) return false;
            done.push_back(std::move(c));
        }
        if (prepared->req.include_usage) write_sse(sink, usage_chunk(*head, done));
        static const std::string end = "data: [DONE]\n\n";
        sink.write(end.data(), end.size());
        sink.done();
        return true;
    });
}

// One JSON object, preceded by whitespace written while generating or while a later choice is
// queued (disconnect probe).
// Sent uncompressed whatever Accept-Encoding says: a compressor would hold the probe's bytes back
// and a client that left would go unnoticed. httplib compresses "application/json" exactly, so
// the charset parameter keeps this reply out of it.
void HttpServer::send_whole(httplib::Response& res, std::shared_ptr<const ResponseHead> head,
                            std::shared_ptr<const PreparedRequest> prepared,
                            std::shared_ptr<Service::Ticket> first, std::shared_ptr<void> busy) {
    res.set_chunked_content_provider(
        "application/json; charset=utf-8",
        [this, head, prepared, first, busy](size_t, httplib::DataSink& sink) {
            auto last_write = clock_type::now();
            auto probe = [&] {
                last_write = clock_type::now();
                return sink.write(" ", 1);  // JSON allows leading whitespace
            };
            std::vector<Completion> choices;
            for (int i = 0; i < prepared->req.n; ++i) {
                Completion c;
                try {
                    c = run_choice(
                        service_, *first, *prepared, i,
                        [&](const Completion&, const std::vector<TokenPiece>&) {
                            return clock_type::now() - last_write <
                                       std::chrono::milliseconds(100) ||
                                   probe();
                        },
                        probe);
                } catch (const ApiError& e) {  // a refusal after the status line: whole
                    const std::string body = dump(head->anthropic ? anthropic_error(e) : e.body());
                    sink.write(body.data(), body.size());
                    sink.done();
                    return true;
                } catch (const std::exception& e) {  // the status line is gone: report in-band
                    const std::string body = dump(internal_error(e));
                    sink.write(body.data(), body.size());
                    return false;
                }
                if (c.finish_reason == "abort" && service_.cancelling_all()) {  // drain deadline
                    const std::string body = dump(shutdown_error());
                    sink.write(body.data(), body.size());
                    sink.done();
                    return true;
                }
                if (c.finish_reason == "abort") return false;
                choices.push_back(std::move(c));
            }
            const Tokenizer& tok = service_.target().tokenizer();
            std::string body;
            try {
                const json reply = head->native ? native_final(*head, choices[0], tok, false)
                                                : full_response(*head, choices, tok);
                body =
                    dump(head->anthropic   ? chat_to_message(reply, choices[0], head->hide_thinking)
                         : head->responses ? chat_to_response(reply, choices[0], *head->responses)
                                           : reply);
            } catch (const std::exception& e) {
                const ApiError err = reply_failed(e);
                service_.metrics().record_failure(500);
                body = dump(head->anthropic ? anthropic_error(err) : err.body());
            }
            sink.write(body.data(), body.size());
            sink.done();
            return true;
        });
}

}  // namespace specula
