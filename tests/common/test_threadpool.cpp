// ThreadPool: every thread index runs exactly once per run(), runs do not overlap, results are
// visible to the caller when run() returns, and parallel_for covers [0, n) exactly once.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/threadpool.h"

using specula::ThreadPool;

TEST(ThreadPool, SizeIsAtLeastOne) {
    EXPECT_EQ(ThreadPool(0).size(), 1);
    EXPECT_EQ(ThreadPool(-3).size(), 1);
    EXPECT_EQ(ThreadPool(3).size(), 3);
}

TEST(ThreadPool, SingleThreadRunsInline) {
    ThreadPool pool(1);
    const auto caller = std::this_thread::get_id();
    int calls = 0;
    pool.run([&](int ith, int nth) {
        EXPECT_EQ(ith, 0);
        EXPECT_EQ(nth, 1);
        EXPECT_EQ(std::this_thread::get_id(), caller);
        ++calls;
    });
    EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, EveryIndexOncePerRunOverManyRuns) {
    for (int n : {2, 3}) {
        ThreadPool pool(n);
        std::vector<int> counts(n, 0);  // plain ints: run() must publish the writes
        constexpr int kRuns = 1000;
        for (int run = 0; run < kRuns; ++run) {
            pool.run([&](int ith, int nth) {
                ASSERT_EQ(nth, n);
                ASSERT_GE(ith, 0);
                ASSERT_LT(ith, nth);
                counts[ith] += 1;
            });
            // After each run every index has run exactly run+1 times: nothing is late.
            for (int i = 0; i < n; ++i) ASSERT_EQ(counts[i], run + 1) << "thread " << i;
        }
    }
}

TEST(ThreadPool, WorkersWakeAfterSleeping) {
    ThreadPool pool(2);
    std::atomic<int> total{0};
    for (int run = 0; run < 5; ++run) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin window
        pool.run([&](int, int) { total.fetch_add(1); });
        EXPECT_EQ(total.load(), 2 * (run + 1));
    }
}

TEST(ThreadPool, ParallelForCoversRangeExactlyOnce) {
    ThreadPool pool(3);
    for (int64_t n : {0, 1, 2, 3, 5, 17, 1000, 4099}) {
        std::vector<int> hits(n, 0);
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
            ASSERT_LE(0, b);
            ASSERT_LT(b, e);
            ASSERT_LE(e, n);
            for (int64_t i = b; i < e; ++i) hits[i] += 1;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n=" << n << " i=" << i;
    }
}

TEST(ThreadPool, ParallelSumMatchesSerial) {
    ThreadPool pool(2);
    std::vector<int64_t> v(100000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i * 7 % 13);
    int64_t serial = 0;
    for (auto x : v) serial += x;
    for (int rep = 0; rep < 50; ++rep) {
        std::atomic<int64_t> sum{0};
        pool.parallel_for(static_cast<int64_t>(v.size()), [&](int64_t b, int64_t e) {
            int64_t s = 0;
            for (int64_t i = b; i < e; ++i) s += v[i];
            sum.fetch_add(s);
        });
        ASSERT_EQ(sum.load(), serial);
    }
}

// More threads than cores: workers are often not running when a run starts, and the caller takes
// over their indices. Every index must still run exactly once, and never twice in parallel.
TEST(ThreadPool, OversubscribedPoolStillRunsEveryIndexOnce) {
    ThreadPool pool(8);
    std::vector<std::atomic<int>> active(8), total(8);
    for (int run = 0; run < 300; ++run) {
        pool.run([&](int ith, int nth) {
            ASSERT_EQ(nth, 8);
            ASSERT_EQ(active[ith].fetch_add(1), 0) << "index " << ith << " ran twice at once";
            if (run % 50 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
            total[ith].fetch_add(1);
            active[ith].fetch_sub(1);
        });
        for (int i = 0; i < 8; ++i) ASSERT_EQ(total[i].load(), run + 1) << "index " << i;
    }
}

// A pool whose thread creation fails part-way (here: the address space runs out, as under
// `ulimit -v`) throws a clear Error and leaves no thread behind, instead of terminating or
// deadlocking in its own unwinding. Run in a child process so the limit stays there.
TEST(ThreadPool, FailedThreadCreationThrowsAndDoesNotHang) {
    const int n = specula::max_pool_threads();
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(20);  // a deadlock ends the child by SIGALRM, which the parent reports
        long pages = 0;
        std::ifstream("/proc/self/statm") >> pages;
        const rlim_t now = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE));
        const rlimit lim{now + (24u << 20), now + (24u << 20)};  // room for ~2 thread stacks
        if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(10);
        try {
            ThreadPool pool(n);
            _exit(11);  // every thread started: the limit did not bite
        } catch (const specula::Error& e) {
            const std::string msg = e.what();
            _exit(msg.find("cannot start thread") != std::string::npos &&
                          msg.find(" of " + std::to_string(n)) != std::string::npos
                      ? 0
                      : 12);
        } catch (...) {
            _exit(13);
        }
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status)
                                   << " (SIGABRT: terminate; SIGALRM: deadlock)";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setrlimit, 11: no failure, 12: message, 13: type";
}

TEST(ThreadPool, MoreThreadsThanTheLimitIsAnError) {
    const int cap = specula::max_pool_threads();
    EXPECT_GE(cap, 8);
    EXPECT_GE(cap, 4 * int(std::thread::hardware_concurrency()));
    try {
        ThreadPool pool(cap + 1);
        ADD_FAILURE() << "a pool over the limit was created";
    } catch (const specula::Error& e) {
        EXPECT_NE(std::string(e.what()).find("more than the limit of " + std::to_string(cap)),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(ThreadPool(cap).size(), cap);
}

// -t 0 (and SessionParams/LoadOptions n_threads 0) means every hardware thread.
TEST(ThreadPool, DefaultThreads) {
    EXPECT_EQ(specula::default_threads(3), 3);
    const int hw = int(std::thread::hardware_concurrency());
    EXPECT_EQ(specula::default_threads(0), hw > 0 ? hw : 1);
    EXPECT_GE(specula::default_threads(-2), 1);
}
