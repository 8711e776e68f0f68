// SIGBUS on a mapped model file, survived. A GGUF file is used in place through a read-only
// private mapping (gguf.h); when the file is truncated on disk while mapped (`cp smaller.gguf
// served.gguf` truncates the same inode), touching a page past the new end raises SIGBUS, which
// would kill the whole process (a server with every client on it) at its next forward pass.
//
// guard_mapping() registers a mapping's range; one process-wide SIGBUS handler, on a fault inside
// a registered range, replaces that whole range with anonymous zero pages (mmap MAP_FIXED) and
// marks it faulted, so the faulting thread resumes (reading zeros) instead of dying. No
// siglongjmp: the fault can hit any worker of the thread pool in the middle of a pass, and
// unwinding one of them would leave the pass half done; resuming with zeros leaves the pass to
// finish with meaningless numbers, which the caller must never hand out: it checks
// mapping_faulted() (through GGUFFile::changed_on_disk()) before it uses a pass's result, and
// refuses from then on. A fault outside every registered range goes to the handler that was
// installed before (or the default action: the process dies, as it would have).
//
// Why not hold the weights in anonymous memory instead (copy on load, or MAP_POPULATE + mlock)?
// It doubles nothing for small files but costs the model's size in RAM and load time for large
// ones, and mlock needs RLIMIT_MEMLOCK; detecting the change and refusing (naming the file) keeps
// the mapping's cost at zero. mmap() in a signal handler is a plain system call on Linux (the
// fault is synchronous, the handler touches only a fixed table of atomics).
#pragma once

#include <cstddef>

namespace specula {

// Registers [base, base + size); returns its slot, or -1 when the table (64 entries) is full
// (the range is then unguarded: a fault on it kills the process as before).
int guard_mapping(void* base, size_t size);
// Unregisters a slot (before the range is unmapped); -1 is ignored.
void unguard_mapping(int slot);
// Whether a fault hit the slot's range (its contents are zeros now, not the file's).
bool mapping_faulted(int slot);

}  // namespace specula
