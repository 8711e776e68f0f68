// ThreadPool: persistent workers released by a generation counter. Each run publishes its job and
// a claim word (generation, next index); the caller and any awake worker take indices from it
// with a compare-and-swap until none is left, and the caller waits until every index is done.
// A worker that wakes after the caller has claimed everything finds the generation finished and
// goes back to waiting, so a preempted worker never delays a run. Idle workers spin on the
// generation for a short while (decode issues hundreds of short jobs per token), then sleep on
// the condition variable.
#include "common/threadpool.h"

#include <algorithm>
#include <chrono>
#include <system_error>

#include "common/clock.h"
#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPECULA_CPU_RELAX() _mm_pause()
#else
#define SPECULA_CPU_RELAX() ((void)0)
#endif

namespace specula {

namespace {
// How long an idle worker polls before sleeping. Long enough to bridge the gap between two
// matmuls of one layer, short enough not to steal a shared core for long (a draft model's pool
// idles while the target's works, and vice versa).
constexpr auto kSpinTime = std::chrono::microseconds(100);

constexpr uint64_t pack_claim(uint64_t gen, uint32_t next) {
    return (gen << 32) | next;
}
}  // namespace

int hardware_threads() {
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? static_cast<int>(hw) : 1;
}

int default_threads(int requested) {
    return requested > 0 ? requested : hardware_threads();
}

int max_pool_threads() {
    return std::max(8, 4 * int(std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    if (n_threads_ > max_pool_threads()) {
        fail("a thread pool of ", n_threads_, " threads is more than the limit of ",
             max_pool_threads(), " (4x the ", std::thread::hardware_concurrency(),
             " hardware threads)");
    }
    threads_.reserve(n_threads_ - 1);
    try {
        for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
    } catch (const std::system_error& e) {
        // The destructor will not run: stop the workers started so far, or their joinable
        // std::threads would terminate the process as the vector unwinds.
        const size_t started = threads_.size();
        stop_workers();
        fail("cannot start thread ", started + 1, " of ", n_threads_, ": ", e.what(),
             " (out of memory or of the process's thread limit; use fewer threads)");
    }
}

ThreadPool::~ThreadPool() {
    stop_workers();
}

void ThreadPool::stop_workers() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    threads_.clear();
}

bool ThreadPool::claim(uint64_t gen, int* ith) {
    uint64_t c = claim_.load(std::memory_order_acquire);
    for (;;) {
        const uint32_t next = static_cast<uint32_t>(c);
        if ((c >> 32) != (gen & 0xFFFFFFFFu) || next >= static_cast<uint32_t>(n_threads_)) {
            return false;
        }
        if (claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
            *ith = static_cast<int>(next);
            return true;
        }
    }
}

void ThreadPool::run_claimed(uint64_t gen) {
    int ith;
    while (claim(gen, &ith)) {
        job_(ctx_, ith, n_threads_);
        done_.fetch_add(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::run_impl(Job job, void* ctx) {
    if (n_threads_ == 1) {
        job(ctx, 0, 1);
        return;
    }
    const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
    job_ = job;
    ctx_ = ctx;
    done_.store(0, std::memory_order_relaxed);
    // Index 0 is the caller's; workers claim from 1.
    claim_.store(pack_claim(gen & 0xFFFFFFFFu, 1), std::memory_order_release);
    {
        // Publishing under the mutex means a worker about to sleep cannot miss the new run.
        std::lock_guard<std::mutex> lk(mu_);
        generation_.store(gen, std::memory_order_release);
    }
    cv_.notify_all();
    job(ctx, 0, n_threads_);
    done_.fetch_add(1, std::memory_order_acq_rel);
    run_claimed(gen);  // whatever the workers have not picked up yet
    for (int spins = 0; done_.load(std::memory_order_acquire) != n_threads_; ++spins) {
        if (spins < 4096) {
            SPECULA_CPU_RELAX();
        } else {
            std::this_thread::yield();
        }
    }
}

void ThreadPool::worker(int) {
    uint64_t seen = 0;
    for (;;) {
        // Spin for a new run first; fall back to sleeping.
        const auto spin_until = clock_type::now() + kSpinTime;
        uint64_t gen = generation_.load(std::memory_order_acquire);
        for (int i = 0; gen == seen && !stop_.load(std::memory_order_relaxed); ++i) {
            SPECULA_CPU_RELAX();
            if ((i & 1023) == 1023) std::this_thread::yield();  // let an oversubscribed core go
            if ((i & 63) == 63 && clock_type::now() > spin_until) {
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
        run_claimed(gen);
    }
}

}  // namespace specula
