// guard_mapping / the SIGBUS handler: see mapping_guard.h; GGUFFile::changed_on_disk (gguf.h),
// which reads both the guard and the file's identity.
#include "gguf/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "gguf/gguf.h"

namespace specula {

namespace {

struct Range {
    std::atomic<uintptr_t> base{0};  // 0: a free slot
    std::atomic<size_t> size{0};
    std::atomic<bool> faulted{false};
};

constexpr int kSlots = 64;
Range g_ranges[kSlots];
struct sigaction g_prev {};
std::once_flag g_installed;

void on_sigbus(int sig, siginfo_t* info, void* context) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (Range& r : g_ranges) {
        const uintptr_t base = r.base.load(std::memory_order_acquire);
        const size_t size = r.size.load(std::memory_order_acquire);
        if (base == 0 || addr < base || addr - base >= size) continue;
        void* p = mmap(reinterpret_cast<void*>(base), size, PROT_READ,
                       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            r.faulted.store(true, std::memory_order_release);
            return;  // the faulting read runs again, on zeros
        }
    }
    if ((g_prev.sa_flags & SA_SIGINFO) && g_prev.sa_sigaction) {
        g_prev.sa_sigaction(sig, info, context);
        return;
    }
    if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN && g_prev.sa_handler) {
        g_prev.sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL);  // not a guarded mapping: the fault repeats and kills, as unguarded
}

void install() {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_prev);
}

}  // namespace

int guard_mapping(void* base, size_t size) {
    if (!base || size == 0) return -1;
    std::call_once(g_installed, install);
    static std::mutex mu;  // registrations one at a time (the handler only reads)
    std::lock_guard<std::mutex> lk(mu);
    for (int i = 0; i < kSlots; ++i) {
        uintptr_t expected = 0;
        // Size first (a handler that sees the base sees the size), then claim the slot.
        if (g_ranges[i].base.load() != 0) continue;
        g_ranges[i].size.store(size, std::memory_order_release);
        g_ranges[i].faulted.store(false);
        if (g_ranges[i].base.compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(base)))
            return i;
    }
    return -1;
}

void unguard_mapping(int slot) {
    if (slot < 0 || slot >= kSlots) return;
    g_ranges[slot].base.store(0, std::memory_order_release);
}

bool mapping_faulted(int slot) {
    return slot >= 0 && slot < kSlots && g_ranges[slot].faulted.load(std::memory_order_acquire);
}

std::string GGUFFile::changed_on_disk() const {
    if (mapping_faulted(guard_))
        return path_ + ": the model file changed on disk while in use (truncated under its " +
               "mapping, " + std::to_string(size_) +
               " bytes when loaded); it is no longer served: restart to load the file again";
    struct stat st {};
    if (fd_ < 0 || fstat(fd_, &st) != 0) return "";
    const int64_t mtime = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    const int64_t ctime = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
    if (uint64_t(st.st_size) == size_ && mtime == id_.mtime_ns) {
        // Same size and mtime: a new ctime is a chmod, a link... or a rewrite with the mtime set
        // back; the sampled content tells them apart (once per ctime).
        if (ctime == id_.ctime_ns || ctime == verified_ctime_.load()) return "";
        if (sampled_hash(fd_, size_) == id_.sample_hash) {
            verified_ctime_.store(ctime);
            return "";
        }
        return path_ + ": the model file was rewritten on disk since it was loaded (same size " +
               "and modification time, but its status-change time and sampled content differ); " +
               "it is no longer served: restart to load the file again";
    }
    return path_ + ": the model file changed on disk since it was loaded (" +
           std::to_string(size_) + " -> " + std::to_string(st.st_size) +
           " bytes, modified again); it is no longer served: restart to load the file again";
}

}  // namespace specula
