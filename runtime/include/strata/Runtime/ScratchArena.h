//===- ScratchArena.h - Kernel scratch memory without the allocator -*- C++ -*-===//
//
// Kernels use ordinary C++ containers for their scratch (shapes, strides,
// per-row buffers). While an instruction runs, the executor makes a
// ScratchArena current on its thread: every operator new on that thread is
// then served by bumping through the arena's one block, every delete of such
// memory does nothing, and the arena rewinds when the instruction ends. When
// an instruction needs more than the block holds, the excess comes from the
// heap and the block grows to the high-water mark before the next
// instruction, so after the first step a training step calls the allocator
// zero times. heapAllocations() counts the operator-new calls the heap
// served, process-wide (the executor reports them per run).
//
// The replacement operator new/delete live in ScratchArena.cpp, which the
// executor references, so they are part of every binary that runs
// artifacts and of nothing else.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_SCRATCHARENA_H
#define STRATA_RUNTIME_SCRATCHARENA_H

#include <cstddef>
#include <cstdint>

namespace strata::runtime {

/// operator new calls served by the heap since the process started.
uint64_t heapAllocations();

class ScratchArena {
public:
  ScratchArena() = default;
  ~ScratchArena();
  ScratchArena(const ScratchArena &) = delete;
  ScratchArena &operator=(const ScratchArena &) = delete;

  /// Bytes of the block, and the most one scope has needed.
  size_t capacity() const { return capacity_; }
  size_t highWater() const { return highWater_; }

  /// While alive, the arena serves this thread's operator new. A scope
  /// opened inside another (a parallel loop's part, in the CPU kernels'
  /// pool, inside an instruction's) serves until it closes, then the outer
  /// one serves again; memory of the inner one must not outlive it.
  class Scope {
  public:
    explicit Scope(ScratchArena &arena);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    ScratchArena &arena_;
    ScratchArena *outerCurrent_, *outerLast_;
  };

  /// Makes the next scope's block at least `bytes` (what another thread's
  /// arena needed for the same kind of work).
  void reserve(size_t bytes) {
    if (bytes > highWater_)
      highWater_ = bytes;
  }

  /// For the replacement operator new/delete.
  void *allocate(size_t bytes, size_t alignment);
  bool owns(const void *p) const {
    return p >= block_ && p < block_ + capacity_;
  }

private:
  unsigned char *block_ = nullptr;
  size_t capacity_ = 0, used_ = 0, demanded_ = 0, highWater_ = 0;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_SCRATCHARENA_H
