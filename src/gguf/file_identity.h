// What a mapped file is, beyond its size and modification time: the status-change time (ctime),
// which a rewrite in place changes and no one can set back (touch -d restores only the mtime),
// the device and inode, and a hash of sampled blocks of its content. GGUFFile::changed_on_disk
// (gguf.h) compares them; a server's slot files record the hash (a model of the same size is
// not taken for the one a cache was saved with).
#pragma once

#include <cstdint>

namespace specula {

struct FileIdentity {
    uint64_t size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    uint64_t dev = 0, ino = 0;
    uint64_t sample_hash = 0;  // sampled_hash() of the content
};

// kSampleBlocks blocks of kSampleBytes, spread evenly from the first byte to the last (the whole
// file when smaller), hashed with the size (64-bit FNV-1a): a few preads, whatever the file's
// size. 0 when the file cannot be read.
constexpr int kSampleBlocks = 16;
constexpr uint64_t kSampleBytes = 4096;
uint64_t sampled_hash(int fd, uint64_t size);

// fstat of an open file and its sampled hash; false when fstat fails.
bool file_identity(int fd, FileIdentity& out);

}  // namespace specula
