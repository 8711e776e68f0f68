// Heap-allocation counter for "allocates nothing once warmed up" tests: replaces every form of the
// global operator new/delete, so include it from exactly one source file of a test executable.
// Set specula::test::g_counting, run the code, read specula::test::g_allocs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

// Counts heap allocations made while `g_counting` is set (to check that decoding allocates
// nothing once warmed up).
namespace specula::test {
inline std::atomic<bool> g_counting{false};
inline std::atomic<long> g_allocs{0};
}  // namespace specula::test

// Every form of global new/delete is replaced (so that sanitizers only ever see malloc/free).
// GCC cannot see that these replacements pair malloc with free.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
void* counted_alloc(std::size_t n, std::size_t align) {
    if (specula::test::g_counting.load(std::memory_order_relaxed))
        specula::test::g_allocs.fetch_add(1);
    if (n == 0) n = 1;
    if (align > alignof(std::max_align_t)) n = (n + align - 1) / align * align;
    return align > alignof(std::max_align_t) ? std::aligned_alloc(align, n) : std::malloc(n);
}
void* counted_alloc_or_throw(std::size_t n, std::size_t align) {
    if (void* p = counted_alloc(n, align)) return p;
    throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) {
    return counted_alloc_or_throw(n, 0);
}
void* operator new[](std::size_t n) {
    return counted_alloc_or_throw(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
    return counted_alloc_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
    return counted_alloc_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    return counted_alloc(n, 0);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    return counted_alloc(n, 0);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
#pragma GCC diagnostic pop
