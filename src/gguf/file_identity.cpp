// sampled_hash / file_identity: see file_identity.h.
#include "gguf/file_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "common/fnv.h"

namespace specula {

uint64_t sampled_hash(int fd, uint64_t size) {
    uint64_t h = fnv1a(kFnv1aBasis, &size, sizeof size);
    std::vector<unsigned char> buf(kSampleBytes);
    const uint64_t last = size > kSampleBytes ? size - kSampleBytes : 0;
    for (int b = 0; b < kSampleBlocks; ++b) {
        const uint64_t off = last * uint64_t(b) / (kSampleBlocks - 1);
        size_t got = 0;
        while (got < buf.size() && off + got < size) {
            const ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, off_t(off + got));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return 0;
            if (n == 0) break;
            got += size_t(n);
        }
        h = fnv1a(h, buf.data(), got);
        if (last == 0) break;  // one block holds the whole file
    }
    return h;
}

bool file_identity(int fd, FileIdentity& out) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return false;
    out.size = uint64_t(st.st_size);
    out.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    out.ctime_ns = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
    out.dev = uint64_t(st.st_dev);
    out.ino = uint64_t(st.st_ino);
    out.sample_hash = sampled_hash(fd, out.size);
    return true;
}

}  // namespace specula
