// ThreadPool: persistent workers released by a generation counter. A worker spins on the counter
// for a short while after each job (decode issues hundreds of short jobs per token), then sleeps on
// the condition variable; the caller takes part as thread 0 and spins (then yields) on the count of
// workers still busy.
#include "kernels/threadpool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPECULA_CPU_RELAX() _mm_pause()
#else
#define SPECULA_CPU_RELAX() ((void)0)
#endif

namespace specula {

namespace {
// How long an idle worker polls before sleeping. Long enough to bridge the gap between two
// matmuls of one layer, short enough not to steal a shared core for long.
constexpr auto kSpinTime = std::chrono::microseconds(200);
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    threads_.reserve(n_threads_ - 1);
    for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
}

void ThreadPool::run_impl(Job job, void* ctx) {
    if (n_threads_ == 1) {
        job(ctx, 0, 1);
        return;
    }
    job_ = job;
    ctx_ = ctx;
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    {
        // Publishing under the mutex means a worker about to sleep cannot miss the new job.
        std::lock_guard<std::mutex> lk(mu_);
        generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    job(ctx, 0, n_threads_);
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < 4096) {
            SPECULA_CPU_RELAX();
        } else {
            std::this_thread::yield();
        }
    }
}

void ThreadPool::worker(int ith) {
    uint64_t seen = 0;
    for (;;) {
        // Spin for new work first; fall back to sleeping.
        const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
        uint64_t gen = generation_.load(std::memory_order_acquire);
        for (int i = 0; gen == seen && !stop_.load(std::memory_order_relaxed); ++i) {
            SPECULA_CPU_RELAX();
            if ((i & 1023) == 1023) std::this_thread::yield();  // let an oversubscribed core go
            if ((i & 63) == 63 && std::chrono::steady_clock::now() > spin_until) {
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait(lk, [&] {
                    return generation_.load(std::memory_order_acquire) != seen ||
                           stop_.load(std::memory_order_acquire);
                });
            }
            gen = generation_.load(std::memory_order_acquire);
        }
        if (stop_.load(std::memory_order_acquire)) return;
        seen = gen;
        job_(ctx_, ith, n_threads_);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

}  // namespace specula
