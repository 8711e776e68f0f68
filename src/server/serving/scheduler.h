// Scheduler: runs every request of `specula serve` on one thread. A request that holds a slot is
// a Sequence (speculative/sequence.h) over the slot's target Session, and every step is ONE
// Engine::step (speculative/engine.h) over all of them: prompt chunks for the ones still
// prefilling (at most SchedulerConfig::prefill_chunk prompt tokens per step over all slots), one
// draft pass per draft round for all that draft, one target pass for everything, then each
// verifies, rolls back and emits on its own. It is the engine `specula run` steps as a batch of
// one, so a request's greedy output is `specula run`'s whatever shares its passes.
//
// Sequences under `--draft auto` (Job::draft_auto) share one draft length per step, chosen by
// the engine from the load (speculative/draft_length/load_draft.h).
//
// New requests join between steps, taking the free slot whose cache shares the longest prefix
// with their prompt (that prefix is not evaluated again: Job::n_cached) unless that would
// overwrite another conversation's cache for a few shared tokens (then the least recently used
// slot: server/serving/slots.h best_slot). Under a KV pool, a request whose reservation cannot
// grow takes the room of the youngest running one, which waits and resumes later where it
// stopped (server/serving/kv_pool.h; Engine::resume). A request is cancelled
// (Job::cancel) by its client leaving or by a stop string; a cancelled one that waits for a slot
// leaves the queue.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "runtime/runtime.h"
#include "server/serving/kv_pool.h"
#include "server/serving/logprobs.h"
#include "server/serving/metrics.h"
#include "server/serving/prefix_blocks.h"
#include "server/serving/prompt_cache.h"
#include "server/serving/slots.h"
#include "server/serving/text_stream.h"
#include "speculative/engine.h"
#include "speculative/stats.h"

namespace specula {

struct SchedulerConfig {
    int n_slots = 1;
    int n_ctx = 0;
    int n_threads = 0;       // the one pool every pass runs on (0: hardware threads)
    int prefill_chunk = 64;  // prompt tokens evaluated per step, over all prefilling slots,
                             // (their tokens wait on the pass) ...
    int prefill_chunk_idle = SessionParams::kDefaultUbatch;  // ... and for a lone prompt
    int n_ubatch = SessionParams::kDefaultUbatch;            // a slot session's longest pass (-ub)
    Metrics* metrics = nullptr;  // gets every pass (batch size, rows, cost, draft length by load)
    KVType type_k = KVType::F32, type_v = KVType::F32;  // the slots' and drafters' KV caches
    // --cache-ram's pool (server/serving/prompt_cache.h), or null: a slot given to a request that
    // shares less with it than it holds keeps what it held there first; a request that shares more
    // with a pooled entry than with its slot gets the entry copied into the slot (target and
    // draft).
    PromptCache* prompt_cache = nullptr;
    // The KV pool every slot draws from, in positions (server/serving/kv_pool.h): a request starts
    // when its reservation fits, evicting idle slots' cached prefixes if need be, and waits
    // otherwise, at most kv_wait_s seconds (then it ends with an error naming the pool). 0: no
    // pool, each slot may fill its whole context at any time.
    int64_t kv_pool = 0;
    double kv_wait_s = 600;
    // Shared prompt prefixes (server/serving/prefix_blocks.h): prompts that share at least this
    // many tokens read one block's KV rows, evaluated once (0: off; also off where the target's
    // cache cannot share: sliding-window layers, a recurrent state, -ngl). At most n_slots blocks.
    int prefix_min_tokens = 0;
};

// One generation: the service fills the inputs, submits it, and reads the outputs under `mu`.
struct Job {
    // Inputs (not changed after submit).
    std::vector<token_id> prompt;
    GenParams gen;
    SamplingParams sampling;
    bool draft_auto = false;  // use the slot's draft-length controller (gen.n_draft unused)
    std::vector<std::string> stops;
    bool include_stop_str = false;        // the text keeps the stop string that ended it
    std::vector<int32_t> stop_token_ids;  // generating one of these ends the request (kept)
    clock_type::time_point t_arrival;
    std::unique_ptr<Constraints>
        constraints;             // the request's (server/protocol/sampling_setup.h), or null
    int n_logprobs = -1;         // >= 0: a TokenLogprob per generated token, with this many top
    bool echo_logprobs = false;  // also one per prompt token (echo with logprobs, prompt_logprobs)
    int n_prompt_top = 0;        // ... with this many top
    bool running_stats = false;  // keep `stats` current at every token (timings_per_token)

    std::atomic<bool> cancel{false};  // set by the service: the client left

    // Outputs, guarded by mu; cv is notified at every change.
    std::mutex mu;
    std::condition_variable cv;
    bool started = false;            // holds a slot
    bool done = false;               // finished (or abandoned in the queue: !started)
    std::vector<TokenPiece> pieces;  // text ready to send, taken by the service
    // Pushed before the text of their tokens; prompt_logprobs is complete once started is set.
    std::vector<TokenLogprob> logprobs, prompt_logprobs;
    std::string error;       // set when the scheduler failed (done is set too)
    std::string error_code;  // its OpenAI error code: "kv_pool_full" when the pool wait timed out
    int slot_id = -1, n_cached = 0;
    SpecStats stats;            // final once done; with running_stats, the generation so far before
    bool text_stopped = false;  // a stop string (or a stop token id) ended it
    std::string stop_word;      // the stop string that ended it
    double ttft_s = 0;
};

// llama-server's POST /slots/{id}?action=save|restore|erase, run on the scheduler thread between
// steps on a slot that holds no request. `path`: the slot file (server/serving/slot_files.h).
struct SlotAction {
    enum Kind { save, restore, erase } kind = erase;
    int slot = 0;
    std::string path;
    // Outputs, set once `done` (guarded by mu): tokens saved / restored / erased, file bytes,
    // the time it took; `error` non-empty (with its HTTP status) when it could not be done.
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int n_tokens = 0;
    size_t n_bytes = 0;
    double ms = 0;
    int status = 200;
    std::string error;
};

class Scheduler {
  public:
    // Builds the pool, the slots (KV caches; an Error when they do not fit) and starts the thread.
    // The runtime (its target, its draft setup: runtime/runtime.h) outlives the scheduler; the
    // slots' drafters come from its new_drafter.
    Scheduler(const Runtime& runtime, const SchedulerConfig& config);
    ~Scheduler();  // stops the thread; jobs still running are finished as cancelled

    // Prompt rows an echo with logprobs evaluates per pass with all their logits: what a slot's
    // target session keeps at most besides a verify pass's rows (the memory plan counts it).
    static constexpr int kEchoChunk = 16;

    void submit(std::shared_ptr<Job> job);
    // Runs the action between two steps and returns when it is done (any thread).
    void slot_action(const std::shared_ptr<SlotAction>& action);
    int n_threads() const { return pool_.size(); }
    int n_slots() const { return int(slots_.size()); }
    // Whether slot i holds a request now (GET /slots; any thread).
    bool slot_busy(int i) const;
    // The KV pool (server/serving/kv_pool.h), any thread: its positions (0: no pool), those counted
    // now (busy reservations and idle slots' cached prefixes), the requests waiting for room in it
    // (a slot is free but the pool is not), the waits that timed out, the idle slots emptied.
    KvPoolGauges pool_state() const;
    // Batched drafting so far (scheduler thread writes, any thread reads): draft-model passes and
    // the sequences they drafted for, summed over the passes.
    long draft_passes() const { return draft_passes_; }
    long draft_sequences() const { return draft_seqs_; }
    // "" while the target's, the draft's and the MTP sidecar's files on disk are the ones loaded,
    // else why not (GGUFFile::changed_on_disk: named file); checked before every token is handed
    // out.
    std::string models_changed() const;

  private:
    // A job holding a slot (or preempted, waiting to resume): its Sequence, stepped by the engine.
    struct Active {
        std::shared_ptr<Job> job;
        Slot* slot = nullptr;  // null while preempted
        std::unique_ptr<Sampler> sampler;
        std::unique_ptr<Drafter> own_drafter;  // a sampling request's own drafter
        Sequence seq;
        std::unique_ptr<TextStream> text;
        bool stopped = false;        // a stop string or the client ended it
        bool token_stopped = false;  // a stop token id ended it
        int n_emitted = 0;           // tokens handed to the text stream (their index)
        // The KV pool (kv_pool.h): the positions its reservation reaches now, and the most it may
        // (its prompt, max_tokens or the rest of the context, a verify pass).
        int64_t reach = 0, full = 0;
    };
    void loop();
    void admit();
    // Whether the job may start on the slot now (kv_pool): evicts the idle slots it needs; false
    // (it waits) when its reservation does not fit.
    // `prompt` (the job's, or a preempted one's history) and `n` its reservation (need()).
    bool fits_pool(std::span<const token_id> prompt, int64_t n, Slot& slot, const PrefixPlan& plan);
    // Before a step: each decoding request whose next pass would run past its reservation grows
    // it, evicting idle slots, or else preempting the youngest running requests (kv_pool.h).
    void grow_reservations();
    // Active i gives its slot and KV back and waits in preempted_ to resume.
    void preempt(size_t i);
    // The oldest preempted requests take free slots while their reservations fit (admit()).
    // False: the queue behind them waits.
    bool resume_preempted();
    // vLLM's gauges count a preempted request as waiting, not running: moves it (true) to the
    // waiting count or back (the service counts it as running when it ends).
    void count_waiting(bool preempted);
    // A preempted job whose client left (or the server stops): ended as cancelled.
    void drop_preempted(Active& a);
    // A job leaves its slot: the text held back for stop strings goes out, its stats, done.
    void complete(Active& a);
    // An entry of pool_slots() emptied: an idle slot, or a block with its idle readers.
    void evict_entry(std::span<const int> which);
    // The slot's target joins, builds, extends or branches a prefix block as planned (after the
    // prompt cache).
    void share_prefix(Slot& slot, Drafter* drafter, std::span<const token_id> prompt,
                      const PrefixPlan& plan);
    // A new block holding kv's rows (and the draft session's dkv's), built on by the slot with
    // prefix p (all of a prompt but its last token); the block counts p's rows from now on.
    void new_block(Slot& slot, Session* d, std::span<const token_id> p, std::shared_ptr<KVCache> kv,
                   std::shared_ptr<KVCache> dkv);
    // The reservation a job starts with (reserve_ahead() past its prompt), or resumes with after
    // generating n_out tokens (past its prompt and those); the most it may grow to; the rows one
    // verify pass of it writes past its history.
    int64_t need(const Job& job, size_t n_out = 0) const;
    int64_t full_need(const Job& job) const;
    int lookahead(const Job& job) const;
    // The slots as the pool counts them, then the prefix blocks (busy: a running request reads
    // or builds it, or one admitted in this round will: pinned_).
    std::vector<PoolSlot> pool_slots() const;
    void pool_timeout(Job& job);
    // Recounts pool_state_.used; waiting >= 0 sets the waiting count too.
    void update_pool_state(int waiting = -1);
    void run_slot_actions();
    void start(std::shared_ptr<Job> job, Slot* slot, const PrefixPlan& plan);
    void use_prompt_cache(Slot& slot, Drafter* drafter, std::span<const token_id> prompt,
                          const PrefixPlan& plan);
    // A prompt cache entry sharing at least prefix_min_tokens with p becomes a new prefix block
    // holding those rows, which the slot builds on (false: it does not, or there is no room).
    bool block_from_cache(Slot& slot, Drafter* drafter, std::span<const token_id> p,
                          const PromptCacheEntry& hit);
    void echo_logprobs(Job& job, Session& target);
    void step();
    void finish(Active& a, const char* why);
    bool on_token(Active& a, token_id id, bool drafted);
    Drafter* drafter_for(Slot& slot, const SamplingParams& sp, std::unique_ptr<Drafter>& own);

    const Runtime& rt_;
    const Model& target_;
    const SpeculativeSetup& spec_;
    SchedulerConfig cfg_;
    ThreadPool pool_;
    // The pass buffers every slot's target session shares, and every draft session
    // (SessionParams::shared_pass): the sessions of one model never eval at once.
    std::shared_ptr<ForwardPass> target_pass_, draft_pass_;
    Engine engine_;
    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<Slot*> free_;
    std::unique_ptr<PrefixBlocks> prefixes_;         // null: prefix sharing off
    std::vector<const PrefixBlock*> pinned_;         // blocks joined by jobs admitted this round
    std::vector<std::unique_ptr<Active>> active_;    // in the order they were admitted
    std::deque<std::unique_ptr<Active>> preempted_;  // the oldest first
    std::vector<Sequence*> seqs_;
    std::atomic<long> draft_passes_{0}, draft_seqs_{0};

    std::mutex mu_;  // guards queue_ and stop_
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::deque<std::shared_ptr<SlotAction>> actions_;
    long slot_uses_ = 0;          // stamps Slot::last_used
    mutable std::mutex pool_mu_;  // guards pool_state_
    KvPoolGauges pool_state_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace specula
