// HttpServer: the OpenAI-compatible HTTP API over an Service (cpp-httplib).
//
//   POST /v1/completions, POST /v1/chat/completions   (stream: true -> SSE chunks, data: [DONE])
//   POST /completion, GET /props, GET /slots: llama-server's own (server/api/native_responses.h)
//   GET  /v1/models, GET /health, GET /metrics (Prometheus text), GET / (the embedded web UI)
//   POST /tokenize, POST /detokenize (llama-server's), POST /v1/embeddings (501): token_routes.h
//   OPTIONS (CORS preflight) on any of them when --cors-origin allows the request's Origin
//
// Errors go out in OpenAI's shape (server/protocol/api_error.h): 400 malformed JSON or fields (or
// JSON nested deeper than 128 levels, refused before parsing: json_depth.h), 401 bad or missing API
// key (when one is set; every path but /health and the web UI's /, as llama-server), 403 a Host
// header naming another site (when no key is set), 404 an unknown path (named in the message; any
// `model` is accepted), 405 a known path with the wrong method, 413 body too large, 415 a POST body
// not sent as application/json, 503 too many connections, 500 internal. A failing request never
// affects the others.
//
// Framing: Content-Length with Transfer-Encoding, disagreeing Content-Length headers and any
// request httplib cannot read are 400 and close the connection (no smuggled request behind them
// is read); a Content-Length over the body limit is 413 as soon as the headers are in.
//
// Limits, all enforced here or in server/connection.h: the body is at most max_body_bytes after
// decoding (whatever its Transfer-Encoding or Content-Encoding; counted while it is read, so an
// oversized or expanding body is cut off, answered 413 and its connection closed); a request must
// arrive within limits.read_deadline_s; at most limits.max_connections are open at once.
//
// Browsers: a POST must say Content-Type: application/json, which a page on another origin can
// only send after a CORS preflight this server grants only to --cors-origin (off by default);
// without --api-key the Host header must be an IP address, localhost or the --host name, so a
// DNS-rebound name cannot read the API.
//
// Every request gets one log line on stderr (method, path, status, milliseconds), refused ones
// too. Ids are unique across restarts (a random prefix per process, then a counter).
//
// Responses carry the usual OpenAI fields plus llama-server's `timings` (responses.h) and, in
// `usage`, a `speculative` block (drafts, drafted, accepted, accepted_per_pos, acceptance_rate,
// mean_acceptance_length); each streamed chunk's choice carries a `specula` object {"tokens":
// [{"text", "drafted"}]} listing the tokens of the chunk and whether each was an accepted draft
// token.
//
// States (GET /health tells them apart): `loading` from bind() until set_ready() (every path
// answers 503 {"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}, as
// llama-server does), `ready` (/health: 200 {"status":"ok"}), `draining` from drain() on (/health:
// 503 {"status":"draining",...}; a new completion is refused 503 with Retry-After, which a
// balancer may retry elsewhere since nothing was generated; every response closes its
// connection; requests already in flight go on until the drain deadline, then are cancelled with
// an error event in their stream).
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

#include "server/connection.h"
#include "server/host_check.h"
#include "server/serving/service.h"

namespace specula {

struct ResponseHead;  // id, object, created, model of one response (server/api/responses.h)

constexpr size_t kMaxBodyBytesLimit = size_t(1) << 30;  // the largest --max-body-bytes

struct HttpConfig {
    std::string host = "127.0.0.1";
    int port = 8080;  // 0: any free port (see port())
    std::string api_key;
    // --cors-origin: "" (default) sends no CORS headers and answers no preflight; "*" or one
    // origin (e.g. https://app.example.com) is allowed to call the API from a browser.
    std::string cors_origin;
    size_t max_body_bytes = 1 << 20;
    ConnectionLimits limits;
    // --drop-unsupported-tools: /v1/responses drops tool types it cannot run (web_search, ...)
    // instead of refusing the request (server/api/openai_responses.h).
    bool drop_unsupported_tools = false;
};

// Throws Error naming the flag when a limit is out of range (--max-body-bytes,
// --max-connections, --read-deadline); HttpServer checks too, `serve` before loading anything.
void check_http_config(const HttpConfig& config);

enum class ServerState { loading, ready, draining };

class HttpServer {
  public:
    // The service may still be loading: nothing but its metrics is used before set_ready().
    HttpServer(Service& service, const HttpConfig& config);
    ~HttpServer();

    // Binds (throws Error naming host:port when it cannot); the server is `loading`.
    void bind();
    // Serves (after bind) until stop(); call it on a thread of its own while the model loads.
    void serve();
    // The service has loaded: requests are served from now on ("listening on" goes to stderr).
    void set_ready();
    // Stops taking new completions and waits up to `timeout_s` for those in flight (a second
    // call of hurry() cuts the wait short); what is left then is cancelled (an error event ends
    // each stream) and given up to 5 s to end; then stop(). Returns the number cancelled.
    int drain(double timeout_s);
    // The first step of drain() alone (from a signal's thread: /health says "draining" at once).
    void begin_drain() { state_.store(ServerState::draining, std::memory_order_release); }
    void hurry() { hurry_.store(true); }
    // Ends serve() (from another thread), also when it is called before serve() starts.
    void stop();

    ServerState state() const { return state_.load(std::memory_order_acquire); }
    int port() const { return cfg_.port; }
    int in_flight() const { return in_flight_.load(); }  // completions being answered

  private:
    void routes();
    // native: llama-server's /completion; messages: Anthropic's /v1/messages over the chat path
    // (server/api/anthropic.h).
    // responses: OpenAI's /v1/responses over the chat path (server/api/openai_responses.h).
    enum class Api { completions, chat, native, messages, responses };
    void handle_completion(const httplib::Request& req, httplib::Response& res,
                           const httplib::ContentReader& reader, Api api);
    // `busy` (held by the response until it is written) counts the request in in_flight_.
    // The first choice waits for a slot here, before the status line, so that what the queue
    // refuses gets its own status (503 with Retry-After); null when the reply is made.
    std::shared_ptr<Service::Ticket> admit(httplib::Response& res, const ResponseHead& head,
                                           const PreparedRequest& prepared);
    void send_stream(httplib::Response& res, std::shared_ptr<const ResponseHead> head,
                     std::shared_ptr<const PreparedRequest> prepared,
                     std::shared_ptr<Service::Ticket> first, std::shared_ptr<void> busy);
    void send_whole(httplib::Response& res, std::shared_ptr<const ResponseHead> head,
                    std::shared_ptr<const PreparedRequest> prepared,
                    std::shared_ptr<Service::Ticket> first, std::shared_ptr<void> busy);
    bool wait_idle(double timeout_s);

    Service& service_;
    HttpConfig cfg_;
    std::unique_ptr<LimitedServer> svr_;
    std::atomic<bool> stop_requested_{false}, serve_ended_{false};
    std::atomic<ServerState> state_{ServerState::loading};
    std::atomic<int> in_flight_{0};
    std::atomic<bool> hurry_{false};
};

}  // namespace specula
