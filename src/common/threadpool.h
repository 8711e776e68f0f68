// A fixed pool of worker threads for the matrix kernels. run() hands the job's nth indices to
// the threads (the caller always takes index 0) and returns when all are done; workers spin
// briefly before sleeping so that the many short barriers of a decode step cost microseconds.
// Indices are claimed, not assigned: when a worker is slow to wake (the machine is shared, or
// oversubscribed), the caller runs the indices it has not claimed yet instead of waiting for it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace specula {

// std::thread::hardware_concurrency(), or 1 where it is unknown.
int hardware_threads();

// The one default thread count (-t / --threads, SessionParams::n_threads, LoadOptions):
// `requested` when > 0, else hardware_threads().
int default_threads(int requested);

// The most threads a pool (and so -t / --threads) may have: 4x the hardware threads, at least 8.
// More only oversubscribes the cores, and an unbounded count exhausts the process limits.
int max_pool_threads();

class ThreadPool {
  public:
    // Starts n_threads - 1 workers (n_threads < 1 counts as 1). Throws specula::Error when
    // n_threads is above max_pool_threads() or a thread cannot be started; the workers already
    // started are stopped and joined first, so a failed construction leaves nothing behind.
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(ith, nth) exactly once for each ith = 0..nth-1 (nth = size()), in parallel on up
    // to nth threads, and waits. Two indices may run one after the other on the same thread, so
    // per-index scratch must be indexed by ith, not by thread. `fn` must not throw, and run()
    // must not be called from inside `fn` or from two threads at once (one pool per session).
    template <class F>
    void run(F&& fn) {
        run_impl([](void* ctx, int ith,
                    int nth) { (*static_cast<std::remove_reference_t<F>*>(ctx))(ith, nth); },
                 &fn);
    }

    // Splits [0, n) into contiguous chunks, one per thread: fn(begin, end).
    template <class F>
    void parallel_for(int64_t n, F&& fn) {
        run([&](int ith, int nth) {
            const int64_t per = (n + nth - 1) / nth;
            const int64_t b = ith * per, e = b + per < n ? b + per : n;
            if (b < e) fn(b, e);
        });
    }

  private:
    using Job = void (*)(void*, int, int);
    void run_impl(Job job, void* ctx);
    void worker(int ith);

    int n_threads_;
    std::vector<std::thread> threads_;
    Job job_ = nullptr;
    void* ctx_ = nullptr;
    bool claim(uint64_t gen, int* ith);  // takes the next unclaimed index of run `gen`
    void run_claimed(uint64_t gen);      // runs indices of run `gen` until none is left
    void stop_workers();                 // wakes every worker to exit, and joins them

    std::atomic<uint64_t> generation_{0};  // bumped to start a run (workers sleep on it)
    std::atomic<uint64_t> claim_{0};       // (generation << 32) | next unclaimed index
    std::atomic<int> done_{0};             // indices finished in the current run
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::condition_variable cv_;
};

}  // namespace specula
