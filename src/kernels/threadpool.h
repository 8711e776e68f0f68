// A fixed pool of worker threads for the matrix kernels. run() hands the same job to every
// thread (the caller is thread 0) and returns when all are done; workers spin briefly before
// sleeping so that the many short barriers of a decode step cost microseconds.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <mutex>
#include <thread>
#include <vector>

namespace specula {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(ith, nth) once on each of the nth = size() threads, ith = 0..nth-1, and waits.
    // `fn` must not throw.
    template <class F>
    void run(F&& fn) {
        run_impl(
            [](void* ctx, int ith, int nth) { (*static_cast<std::remove_reference_t<F>*>(ctx))(ith, nth); },
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
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::condition_variable cv_;
};

}  // namespace specula
