//===- Conformance.h - CUDA kernels against the CPU's -----------*- C++ -*-===//
//
// The backend conformance suite: a case is one instruction (op, operand
// values, result shapes, attributes); expectConformance runs it through the
// CPU backend's kernel and through the CUDA device (allocate, copy in,
// prepare, launch on a stream, synchronize, copy out) and expects every
// result to agree within the case's tolerance. The CPU kernel is the
// specification. Without a GPU every test skips with the probe's reason;
// with STRATA_CONFORMANCE_QUEUED=1 the "CUDA" side is the queued device
// running the CPU's kernels (ctest conformance.cases-on-queued: a check of
// the cases and the harness, not of CUDA), and STRATA_CONFORMANCE_REJECTS=1
// prints every case the CPU rejects.
//
// Tolerances (docs/cuda.md): integers and moves exactly; f64 rtol 1e-12;
// f32 elementwise rtol 1e-5, reductions and matmuls rtol 1e-4 (the GPU sums
// in another order); TF32 matmuls rtol 5e-3; bf16 results rtol 8e-3 and
// fp16 rtol 1e-3 (one unit in the last place: the f32 values before the
// rounding differ in their last bits).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_TESTS_CONFORMANCE_H
#define STRATA_RUNTIME_CUDA_TESTS_CONFORMANCE_H

#include "strata/Runtime/Device.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace strata::runtime::conformance {

/// An operand or result of a case. Operands carry their values; a result's
/// bytes are its contents before the kernel runs (zeros unless set: a
/// gradient that accumulates starts from them).
struct CaseTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
  int64_t numel() const;
};

/// Uniform in [lo, hi) for floats; integers uniform in [lo, hi) too (i1: 0
/// or 1).
CaseTensor randomTensor(DType dtype, std::vector<int64_t> shape,
                        std::mt19937_64 &rng, double lo = -1.0,
                        double hi = 1.0);
CaseTensor zeros(DType dtype, std::vector<int64_t> shape);
/// Values converted to `dtype`.
CaseTensor fromValues(DType dtype, std::vector<int64_t> shape,
                      const std::vector<double> &values);

struct Case {
  std::string op;
  std::vector<CaseTensor> inputs, outputs;
  KernelAttrs attrs;
  /// aliases[i] = j: result i is operand j's memory (an in-place update,
  /// as the optimizer's kernels are); -1 or absent: its own.
  std::vector<int> aliases;
  double rtol = 1e-5, atol = 1e-6;
  uint64_t seed = 0;
};

/// The process's CUDA device, created once; null with the reason.
Device *getCudaDevice(std::string &why);

/// Runs `c` on the CPU kernels alone (the specification): the results'
/// bytes into `results` (an aliased result is its operand's buffer after
/// the run), or the kernel's error.
Status runOnCpu(const Case &c,
                std::vector<std::vector<unsigned char>> &results);

/// Runs `c` on the CUDA device alone, for the checks the CPU cannot share
/// (what a kernel does with bad data a CPU kernel rejects): the results'
/// bytes into `results`, or why it could not run.
Status runOnCuda(const Case &c,
                 std::vector<std::vector<unsigned char>> &results);

/// Runs `c` on both backends; every result agrees elementwise within
/// |cuda - cpu| <= atol + rtol * |cpu| (integers and i1 exactly, NaN where
/// the CPU has NaN). When the CPU kernel rejects the case, the CUDA kernel
/// must reject it with the same message.
void expectConformance(const Case &c);

} // namespace strata::runtime::conformance

/// Skips the test, with the probe's one-line reason, where there is no GPU.
#define STRATA_REQUIRE_GPU()                                                   \
  do {                                                                         \
    std::string strataWhy;                                                     \
    if (!::strata::runtime::conformance::getCudaDevice(strataWhy))             \
      GTEST_SKIP() << strataWhy;                                               \
  } while (0)

#endif // STRATA_RUNTIME_CUDA_TESTS_CONFORMANCE_H
