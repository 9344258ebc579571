//===- ScratchArena.cpp - Kernel scratch memory without the allocator -----===//
//
// The replacement global operator new and delete (every form the standard
// lists) and the per-thread current arena.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/ScratchArena.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace strata::runtime {
namespace {

std::atomic<uint64_t> gHeapAllocations{0};
thread_local ScratchArena *tCurrent = nullptr;
/// The block of the arena last current on this thread: memory handed out
/// by it may be deleted after its scope (an error message returned by a
/// kernel), and must not reach free().
thread_local ScratchArena *tLast = nullptr;
/// The arena of the last scope that closed inside another (its memory is
/// deleted by then, but a delete of it must never reach free() either).
thread_local ScratchArena *tLastInner = nullptr;

void *heapAllocate(size_t bytes, size_t alignment) {
  gHeapAllocations.fetch_add(1, std::memory_order_relaxed);
  if (bytes == 0)
    bytes = 1;
  void *p = nullptr;
  if (alignment <= alignof(std::max_align_t))
    p = std::malloc(bytes);
  else if (posix_memalign(&p, alignment, bytes) != 0)
    p = nullptr;
  return p;
}

void *allocateOrNull(size_t bytes, size_t alignment) noexcept {
  if (ScratchArena *arena = tCurrent)
    if (void *p = arena->allocate(bytes, alignment))
      return p;
  return heapAllocate(bytes, alignment);
}

void *allocateOrThrow(size_t bytes, size_t alignment) {
  void *p = allocateOrNull(bytes, alignment);
  if (!p)
    throw std::bad_alloc();
  return p;
}

void release(void *p) noexcept {
  if (!p)
    return;
  if (ScratchArena *arena = tLast; arena && arena->owns(p))
    return; // rewound with its scope
  if (ScratchArena *arena = tLastInner; arena && arena->owns(p))
    return;
  std::free(p);
}

} // namespace

uint64_t heapAllocations() {
  return gHeapAllocations.load(std::memory_order_relaxed);
}

ScratchArena::~ScratchArena() {
  if (tLast == this)
    tLast = nullptr;
  if (tLastInner == this)
    tLastInner = nullptr;
  std::free(block_);
}

void *ScratchArena::allocate(size_t bytes, size_t alignment) {
  if (alignment < alignof(std::max_align_t))
    alignment = alignof(std::max_align_t);
  // `used_` advances as if the block were large enough, so that the
  // high-water mark is what this scope needs even when it overflows.
  size_t at = (used_ + alignment - 1) / alignment * alignment;
  used_ = at + bytes;
  if (used_ > demanded_)
    demanded_ = used_;
  if (used_ > capacity_)
    return nullptr; // from the heap this time; the block grows after
  return block_ + at;
}

ScratchArena::Scope::Scope(ScratchArena &arena)
    : arena_(arena), outerCurrent_(tCurrent), outerLast_(tLast) {
  // Grow to what the last scopes needed, before handing anything out.
  if (arena.highWater_ > arena.capacity_) {
    std::free(arena.block_);
    arena.block_ = static_cast<unsigned char *>(
        heapAllocate(arena.highWater_, alignof(std::max_align_t)));
    arena.capacity_ = arena.block_ ? arena.highWater_ : 0;
  }
  arena.used_ = 0;
  arena.demanded_ = 0;
  tCurrent = &arena;
  tLast = &arena;
}

ScratchArena::Scope::~Scope() {
  tCurrent = outerCurrent_;
  if (outerCurrent_) { // closing a scope inside another
    tLastInner = &arena_;
    tLast = outerLast_;
  }
  if (arena_.demanded_ > arena_.highWater_)
    arena_.highWater_ = arena_.demanded_;
  arena_.used_ = 0;
}

} // namespace strata::runtime

using strata::runtime::allocateOrNull;
using strata::runtime::allocateOrThrow;
using strata::runtime::release;
constexpr size_t kDefault = alignof(std::max_align_t);

void *operator new(size_t n) { return allocateOrThrow(n, kDefault); }
void *operator new[](size_t n) { return allocateOrThrow(n, kDefault); }
void *operator new(size_t n, const std::nothrow_t &) noexcept {
  return allocateOrNull(n, kDefault);
}
void *operator new[](size_t n, const std::nothrow_t &) noexcept {
  return allocateOrNull(n, kDefault);
}
void *operator new(size_t n, std::align_val_t a) {
  return allocateOrThrow(n, size_t(a));
}
void *operator new[](size_t n, std::align_val_t a) {
  return allocateOrThrow(n, size_t(a));
}
void *operator new(size_t n, std::align_val_t a,
                   const std::nothrow_t &) noexcept {
  return allocateOrNull(n, size_t(a));
}
void *operator new[](size_t n, std::align_val_t a,
                     const std::nothrow_t &) noexcept {
  return allocateOrNull(n, size_t(a));
}
void operator delete(void *p) noexcept { release(p); }
void operator delete[](void *p) noexcept { release(p); }
void operator delete(void *p, size_t) noexcept { release(p); }
void operator delete[](void *p, size_t) noexcept { release(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { release(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept {
  release(p);
}
void operator delete(void *p, std::align_val_t) noexcept { release(p); }
void operator delete[](void *p, std::align_val_t) noexcept { release(p); }
void operator delete(void *p, size_t, std::align_val_t) noexcept {
  release(p);
}
void operator delete[](void *p, size_t, std::align_val_t) noexcept {
  release(p);
}
void operator delete(void *p, std::align_val_t,
                     const std::nothrow_t &) noexcept {
  release(p);
}
void operator delete[](void *p, std::align_val_t,
                       const std::nothrow_t &) noexcept {
  release(p);
}
