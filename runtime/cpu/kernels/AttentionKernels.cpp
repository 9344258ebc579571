//===- AttentionKernels.cpp - Scaled-dot-product attention on the CPU -----===//
//
// graph.attention, evaluated as PyTorch's explicit ("math") formula
//   s = (q @ k^T) * scale + mask; s[i, j > i] = -inf if causal
//   p = dropout(softmax(s, -1)); out = p @ v
// one batch matrix at a time, in the same order of roundings: the products
// are gemms in the element type, the softmax sums in double. A row with
// every score -inf (fully masked) gives NaN, as torch.softmax of an all -inf
// row does (-inf - -inf), and so a NaN output row.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace strata::runtime::cpu {

// The probabilities are dropped by graph.dropout's rule (dropoutKeeps in
// KernelUtils.h), their flat index in [..., S, T] being the counter.

namespace {

Status attentionKernel(KernelContext &ctx) {
  constexpr const char *kOp = "graph.attention";
  if (Status s = checkArity(ctx, kOp, 3, 4, 1); !s)
    return s;
  if (!ctx.attrs.has("scale"))
    return Status::error("graph.attention: missing attribute 'scale'");
  const TensorView &q = ctx.inputs[0], &k = ctx.inputs[1], &v = ctx.inputs[2];
  const TensorView *mask = ctx.inputs.size() > 3 ? &ctx.inputs[3] : nullptr;
  TensorView &out = ctx.outputs[0];
  if (k.dtype != q.dtype || v.dtype != q.dtype || out.dtype != q.dtype ||
      (mask && mask->dtype != q.dtype))
    return Status::error("graph.attention: operands and result must share "
                         "one element type");
  int64_t rank = q.rank();
  if (rank < 2 || k.rank() != rank || v.rank() != rank)
    return Status::error("graph.attention: query, key and value must have "
                         "one rank >= 2");
  int64_t s = q.shape[rank - 2], d = q.shape[rank - 1];
  int64_t t = k.shape[rank - 2], dv = v.shape[rank - 1];
  std::vector<int64_t> batchShape(q.shape.begin(), q.shape.end() - 2);
  if (!std::equal(batchShape.begin(), batchShape.end(), k.shape.begin()) ||
      !std::equal(batchShape.begin(), batchShape.end(), v.shape.begin()) ||
      k.shape[rank - 1] != d || v.shape[rank - 2] != t)
    return Status::error("graph.attention: query " + q.describe() + ", key " +
                         k.describe() + " and value " + v.describe() +
                         " do not fit");
  std::vector<int64_t> expected = batchShape;
  expected.push_back(s);
  expected.push_back(dv);
  if (out.shape != expected)
    return Status::error("graph.attention: result shape does not fit, got " +
                         out.describe());
  std::vector<int64_t> scoreShape = batchShape;
  scoreShape.push_back(s);
  scoreShape.push_back(t);
  // Strides of the mask over the scores [..., S, T]; 0 where it broadcasts.
  // scratch: one stride per dim.
  std::vector<int64_t> maskStrides(rank, 0);
  if (mask) {
    if (mask->rank() > rank)
      return Status::error("graph.attention: mask " + mask->describe() +
                           " does not broadcast to the scores");
    std::vector<int64_t> strides = rowMajorStrides(mask->shape);
    int64_t offset = rank - mask->rank();
    for (int64_t i = 0; i < mask->rank(); ++i) {
      int64_t md = mask->shape[i], sd = scoreShape[offset + i];
      if (md != sd && md != 1)
        return Status::error("graph.attention: mask " + mask->describe() +
                             " does not broadcast to the scores");
      maskStrides[offset + i] = md == 1 ? 0 : strides[i];
    }
  }
  double ratio = ctx.attrs.getFloat("dropout_ratio", 0.0);
  if (!(ratio >= 0 && ratio < 1))
    return Status::error("graph.attention: dropout_ratio must be in [0, 1)");
  bool causal = ctx.attrs.getBool("causal", false);
  double scale = ctx.attrs.getFloat("scale");
  for (int64_t dim : {s, t, d, dv})
    if (dim > INT_MAX)
      return Status::error("graph.attention: sizes exceed BLAS int range");

  return dispatchFloat(q.dtype, kOp, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T *pq = q.as<T>(), *pk = k.as<T>(), *pv = v.as<T>();
    const T *pm = mask ? mask->as<T>() : nullptr;
    T *po = out.as<T>();
    const T tScale = static_cast<T>(scale);
    const T dropScale = T(1) / T(1 - ratio);
    const T negInf = -std::numeric_limits<T>::infinity();
    int64_t batches = 1;
    for (int64_t dim : batchShape)
      batches *= dim;
    // scratch: the scores of one batch matrix and a batch coordinate.
    std::vector<T> p(static_cast<size_t>(s * t));
    std::vector<int64_t> coord(batchShape.size(), 0);
    int64_t maskBase = 0;
    for (int64_t b = 0; b < batches; ++b) {
      gemm<T>(true, s, t, d, pq + b * s * d, pk + b * t * d, p.data());
      for (int64_t i = 0; i < s; ++i) {
        T *row = p.data() + i * t;
        for (int64_t j = 0; j < t; ++j) {
          T score = row[j] * tScale;
          if (pm)
            score += pm[maskBase + i * maskStrides[rank - 2] +
                        j * maskStrides[rank - 1]];
          row[j] = causal && j > i ? negInf : score;
        }
        // Softmax as graph.softmax computes it (max first, sum in double).
        T max = t > 0 ? row[0] : T(0);
        for (int64_t j = 1; j < t; ++j)
          if (row[j] > max || row[j] != row[j])
            max = row[j];
        double sum = 0;
        for (int64_t j = 0; j < t; ++j)
          sum += std::exp(double(row[j]) - double(max));
        for (int64_t j = 0; j < t; ++j) {
          T prob = static_cast<T>(std::exp(double(row[j]) - double(max)) / sum);
          if (ratio > 0) {
            uint64_t index = static_cast<uint64_t>((b * s + i) * t + j);
            prob *= dropoutKeeps(seedOf(ctx), index, ratio) ? dropScale : T(0);
          }
          row[j] = prob;
        }
      }
      gemm<T>(false, s, dv, t, p.data(), pv + b * t * dv, po + b * s * dv);
      // Advance the mask's batch offset (odometer over the batch dims).
      for (int64_t dim = static_cast<int64_t>(batchShape.size()) - 1; dim >= 0;
           --dim) {
        if (++coord[dim] < batchShape[dim]) {
          maskBase += maskStrides[dim];
          break;
        }
        maskBase -= maskStrides[dim] * (batchShape[dim] - 1);
        coord[dim] = 0;
      }
    }
    return Status::ok();
  });
}

} // namespace

void registerAttentionKernels(KernelRegistry &registry) {
  registry.add("graph.attention", attentionKernel);
}

} // namespace strata::runtime::cpu
