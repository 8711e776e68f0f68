// HttpServer: the OpenAI-compatible HTTP API over an Engine (cpp-httplib).
//
//   POST /v1/completions, POST /v1/chat/completions   (stream: true -> SSE chunks, data: [DONE])
//   GET  /v1/models, GET /health, GET /metrics (Prometheus text), GET / (the embedded web UI)
//
// Errors go out in OpenAI's shape (server/api_error.h): 400 malformed JSON or fields, 401 bad or
// missing API key (when one is set; /v1/* only), 404 unknown model or path, 413 body too large,
// 500 internal. A failing request never affects the others.
//
// Responses carry the usual OpenAI fields plus, in `usage`, a `speculative` block (drafts,
// drafted, accepted, accepted_per_pos, acceptance_rate, mean_acceptance_length); each streamed
// chunk's choice carries a `specula` object {"tokens": [{"text", "drafted"}]} listing the tokens
// of the chunk and whether each was an accepted draft token.
//
// Client disconnects: a streaming request stops at the first failed write. A non-streaming one
// is sent with chunked encoding and JSON-insignificant leading whitespace at most every 100 ms
// while it generates, so that a closed connection is noticed and its slot freed within ~2 writes.
// A request queued for a slot is probed the same way every 100 ms (an SSE comment line when
// streaming, a space otherwise) and leaves the queue when its client is gone.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "server/engine.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace specula {

struct ResponseHead;  // id, object, created, model of one response (server.cpp)

struct HttpConfig {
    std::string host = "127.0.0.1";
    int port = 8080;  // 0: any free port (see port())
    std::string api_key;
    size_t max_body_bytes = 1 << 20;
    int n_http_threads = 0;  // 0: enough for every slot plus queued and metrics requests
};

class HttpServer {
  public:
    HttpServer(Engine& engine, const HttpConfig& config);
    ~HttpServer();

    // Binds (throws Error naming host:port when it cannot) and serves until stop().
    void listen();
    void stop();

  private:
    void routes();
    void handle_completion(const httplib::Request& req, httplib::Response& res, bool chat);
    void send_stream(httplib::Response& res, std::shared_ptr<const ResponseHead> head,
                     std::shared_ptr<const PreparedRequest> prepared);
    void send_whole(httplib::Response& res, std::shared_ptr<const ResponseHead> head,
                    std::shared_ptr<const PreparedRequest> prepared);

    Engine& engine_;
    HttpConfig cfg_;
    std::unique_ptr<httplib::Server> svr_;
};

// The JSON of a finished request's usage (with the speculative block).
nlohmann::json usage_json(const SpecStats& st);

}  // namespace specula
