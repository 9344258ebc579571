//===- VectorizedKernelsTest.cpp - AVX-512 builds round as the baseline ---===//
//
// The kernels compiled twice (STRATA_VECTOR_DISPATCHED, VectorMath.h) must
// give the same bits whichever build the CPU picks: the dispatched exp and
// GELU against their baseline-only builds, and graph.adamw_update against
// the update written out element by element in the kernel's order, and
// softmax's row division against its formula. On a CPU with AVX-512 the
// dispatched builds are the x86-64-v4 ones, so a fused multiply-add or a
// reassociation there fails these tests. rowMax, the lane-wise max of the
// softmax rows, against the serial scan it replaces, bit for bit. The
// attention kernels' row loops (probabilities, softmax gradient) and cross
// entropy's rows dispatched against the same bodies built here for the
// baseline; batch_norm's channel moments against LaneSums written out.
//
//===----------------------------------------------------------------------===//

#include "GradKernelTestUtils.h"
#include "kernels/KernelUtils.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace strata::runtime;
using namespace strata::runtime::testing;
namespace cpu = strata::runtime::cpu;

namespace {

/// Normal values with the edge cases exp and erf clamp or pass through.
std::vector<float> probeValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = normal(rng);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> edges = {0.0f,   -0.0f,  88.7f, 88.8f,  -86.6f,
                              -86.7f, 1e30f,  -1e30f, inf,   -inf,
                              std::numeric_limits<float>::quiet_NaN(),
                              1e-40f, -3.0f,  3.0f};
  std::copy_n(edges.begin(), std::min(n, edges.size()), v.begin());
  return v;
}

/// Bit for bit, except that any two NaNs match: which operand's NaN an
/// operation returns, and so its sign, depends on the order the compiler
/// gives a commutative operation's operands (the sanitizer build's
/// baseline GELU returned -nan where the AVX-512 one returned nan), and
/// IEEE 754 leaves a NaN's sign unspecified.
bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 &&
        !(std::isnan(a[i]) && std::isnan(b[i])))
      return false;
  return true;
}

TEST(VectorizedKernels, DispatchedVectorMathEqualsBaseline) {
  // Lengths around the vector widths exercise the remainder loops too.
  for (size_t n : {1u, 7u, 16u, 33u, 1000u, 4099u}) {
    std::vector<float> x = probeValues(n, 1), dy = probeValues(n, 2);
    std::vector<float> a(n), b(n);
    cpu::expShifted(x.data(), 0.75f, a.data(), n);
    cpu::baseline::expShifted(x.data(), 0.75f, b.data(), n);
    EXPECT_TRUE(sameBits(a, b)) << "exp, n " << n;
    cpu::geluExactF32(x.data(), a.data(), n);
    cpu::baseline::geluExactF32(x.data(), b.data(), n);
    EXPECT_TRUE(sameBits(a, b)) << "gelu, n " << n;
    cpu::geluExactGradF32(x.data(), dy.data(), a.data(), n);
    cpu::baseline::geluExactGradF32(x.data(), dy.data(), b.data(), n);
    EXPECT_TRUE(sameBits(a, b)) << "gelu grad, n " << n;
  }
}

TEST(VectorizedKernels, AdamWEqualsTheElementwiseFormula) {
  const int64_t n = 1003; // a remainder after every vector width
  std::vector<float> p = probeValues(n, 3), g = probeValues(n, 4);
  std::vector<float> m = probeValues(n, 5), v(n);
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> positive(0.0f, 2.0f);
  for (float &x : v)
    x = positive(rng);
  for (int64_t i = 0; i < 14; ++i) // finite operands: the edges are for exp
    p[i] = g[i] = m[i] = 0.5f * float(i) - 3.0f;
  const double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.01;
  const int64_t step = 3;
  const float gradScale = 0.5f;
  // The kernel's arithmetic (OptimizerKernels.cpp), one element at a time.
  const float decay = float(1 - lr * wd), b1 = float(beta1),
              b2 = float(beta2), oneMinusB1 = float(1 - beta1),
              oneMinusB2 = float(1 - beta2),
              bc2Sqrt = float(std::sqrt(1 - std::pow(beta2, double(step)))),
              tEps = float(eps),
              negStep = float(-(lr / (1 - std::pow(beta1, double(step)))));
  std::vector<float> pRef(n), mRef(n), vRef(n);
  for (int64_t i = 0; i < n; ++i) {
    float grad = g[i] * gradScale;
    float param = p[i] * decay;
    float expAvg = m[i] * b1 + oneMinusB1 * grad;
    float expAvgSq = v[i] * b2 + oneMinusB2 * grad * grad;
    float denom = std::sqrt(expAvgSq) / bc2Sqrt + tEps;
    pRef[i] = param + negStep * expAvg / denom;
    mRef[i] = expAvg;
    vRef[i] = expAvgSq;
  }
  OwnedTensor tp = f32({n}, p), tg = f32({n}, g), tm = f32({n}, m),
              tv = f32({n}, v);
  OwnedTensor tlr = f64({}, {lr}), tstep = i64({}, {step}),
              tscale = f32({}, {gradScale});
  KernelAttrs attrs;
  attrs.set("beta1", beta1);
  attrs.set("beta2", beta2);
  attrs.set("eps", eps);
  attrs.set("weight_decay", wd);
  std::vector<TensorView> in = {tp.view(),  tg.view(),    tm.view(),
                                tv.view(),  tlr.view(),   tstep.view(),
                                tscale.view()};
  std::vector<TensorView> out = {tp.view(), tm.view(), tv.view()};
  KernelContext ctx{in, out, attrs};
  Status st = (*getCpuKernels().lookup("graph.adamw_update"))(ctx);
  ASSERT_TRUE(st) << st.message();
  EXPECT_TRUE(sameBits(tp.values<float>(), pRef));
  EXPECT_TRUE(sameBits(tm.values<float>(), mRef));
  EXPECT_TRUE(sameBits(tv.values<float>(), vRef));
}

TEST(VectorizedKernels, DivideRowEqualsTheFormula) {
  std::vector<float> e = probeValues(1003, 7), a(e.size()), b(e.size());
  cpu::divideRow(e.data(), 3.25, a.data(), int64_t(e.size()));
  for (size_t j = 0; j < e.size(); ++j)
    b[j] = static_cast<float>(double(e[j]) / 3.25);
  EXPECT_TRUE(sameBits(a, b));
}

/// The scan rowMax stands for (NaN wins; the first of equal maxima).
float serialMax(const std::vector<float> &row) {
  float max = row[0];
  for (float v : row)
    if (v > max || v != v)
      max = v;
  return max;
}

TEST(VectorizedKernels, RowMaxEqualsTheSerialScan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> rows = {
      {1.0f},
      {-inf, -inf, -inf},
      {-0.0f, 0.0f, -1.0f, -2.0f, -3.0f, -4.0f, -5.0f, -6.0f, 0.0f},
      {0.0f, -1.0f, -2.0f, -3.0f, -4.0f, -5.0f, -6.0f, -7.0f, -0.0f},
      {1.0f, nan, 3.0f, 2.0f, 5.0f, 4.0f, 7.0f, 6.0f, 9.0f, 8.0f},
      {-inf, 2.0f, inf, 1.0f}};
  // Inside the vector loop (16 floats a step), not only its tail: a NaN
  // at 20 of 40, and a row whose max is a zero of either sign at 17 and 33.
  std::vector<float> late(40), zeros(40);
  for (int i = 0; i < 40; ++i) {
    late[size_t(i)] = float(i % 7) - 3.0f;
    zeros[size_t(i)] = -1.0f - float(i);
  }
  late[20] = nan;
  zeros[17] = -0.0f;
  zeros[33] = 0.0f;
  rows.push_back(late);
  rows.push_back(zeros);
  for (size_t n : {5u, 8u, 15u, 16u, 17u, 64u, 257u})
    rows.push_back(probeValues(n, uint32_t(n)));
  std::vector<float> noNan = probeValues(300, 9);
  for (float &v : noNan)
    v = v != v ? 1.0f : v;
  rows.push_back(noNan);
  for (const std::vector<float> &row : rows) {
    float got = cpu::rowMax(row.data(), int64_t(row.size()));
    float want = serialMax(row);
    EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0)
        << "row of " << row.size() << ": " << got << " vs " << want;
  }
}

TEST(VectorizedKernels, AttentionRowsDispatchedEqualBaseline) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t keys : {1, 9, 64, 150, 301}) {
    std::vector<float> scores = probeValues(size_t(keys), uint32_t(keys));
    for (float &v : scores)
      v = v != v || std::isinf(v) ? 0.5f : v;
    std::vector<float> mask(size_t(keys), 0.0f);
    for (int64_t j = 0; j < keys; j += 3)
      mask[size_t(j)] = j % 2 ? -1e9f : -0.5f;
    std::vector<float> allMasked(size_t(keys), -inf);
    const std::vector<const float *> masks = {nullptr, mask.data(),
                                              allMasked.data()};
    for (const float *m : masks)
      for (bool causal : {false, true})
        for (int64_t i : {int64_t(0), keys / 2, keys - 1}) {
          std::vector<float> a = scores, b = scores;
          std::vector<float> ea(scores.size()), eb(scores.size());
          cpu::attentionRowProbabilitiesF32(a.data(), i, keys, 0.125f, m, 0,
                                            1, causal, ea.data());
          cpu::attentionRowProbabilitiesBody<float>(b.data(), i, keys, 0.125f,
                                                    m, 0, 1, causal, eb.data());
          EXPECT_TRUE(sameBits(a, b))
              << "probabilities, keys " << keys << ", row " << i
              << (causal ? ", causal" : "") << (m ? ", masked" : "");
        }
    std::vector<float> p = probeValues(size_t(keys), 11);
    std::vector<float> keep(p.size());
    for (float &v : p)
      v = v != v || std::isinf(v) ? 0.25f : std::fabs(v) / 16.0f;
    for (int64_t j = 0; j < keys; ++j)
      keep[size_t(j)] = j % 4 ? 1.25f : 0.0f;
    const std::vector<const float *> keeps = {nullptr, keep.data()};
    for (const float *k : keeps) {
      std::vector<float> a = probeValues(size_t(keys), 12);
      for (float &v : a)
        v = v != v || std::isinf(v) ? -1.0f : v;
      std::vector<float> b = a;
      cpu::attentionGradRowF32(a.data(), p.data(), k, keys, 0.125);
      cpu::attentionGradRowBody<float>(b.data(), p.data(), k, keys, 0.125);
      EXPECT_TRUE(sameBits(a, b))
          << "softmax gradient, keys " << keys << (k ? ", dropout" : "");
    }
  }
}

TEST(VectorizedKernels, LossRowsDispatchedEqualBaseline) {
  // Cross entropy's rows (a row's max, exponentials and sum; the
  // gradient's quotients), dispatched against the bodies built here.
  for (int64_t classes : {1, 9, 64, 257, 2048}) {
    std::vector<float> row = probeValues(size_t(classes), uint32_t(classes));
    for (float &v : row)
      v = v != v || std::isinf(v) ? 1.5f : v;
    std::vector<float> ea(row.size()), eb(row.size());
    double sa = 0, sb = 0;
    float ma = cpu::rowMaxExpSumF32(row.data(), classes, ea.data(), sa);
    float mb = cpu::rowMaxExpSumBody<float>(row.data(), classes, eb.data(), sb);
    EXPECT_EQ(std::memcmp(&ma, &mb, sizeof ma), 0) << "max, " << classes;
    EXPECT_EQ(std::memcmp(&sa, &sb, sizeof sa), 0) << "sum, " << classes;
    EXPECT_TRUE(sameBits(ea, eb)) << "exponentials, " << classes;
    std::vector<float> da(row.size()), db(row.size());
    cpu::crossEntropyGradRowF32(row.data(), classes, classes / 2, 0.37,
                                ea.data(), da.data());
    cpu::crossEntropyGradRowBody<float>(row.data(), classes, classes / 2, 0.37,
                                        eb.data(), db.data());
    EXPECT_TRUE(sameBits(da, db)) << "gradient, " << classes;
  }
}

TEST(VectorizedKernels, ChannelMomentsEqualTheLaneSums) {
  // batch_norm's statistics of one channel (planes 3 x 5 x 7 apart),
  // against LaneSums written out here in the same order.
  const int64_t batch = 3, channels = 5, spatial = 49;
  std::vector<float> x = probeValues(size_t(batch * channels * spatial), 13);
  for (float &v : x)
    v = v != v || std::isinf(v) || std::fabs(v) > 1e20f ? 0.75f : v;
  for (int64_t c = 0; c < channels; ++c) {
    double mean = 0, sq = 0;
    const float *in = x.data() + c * spatial;
    cpu::channelMoments(in, batch, channels * spatial, spatial,
                        double(batch * spatial), mean, sq);
    cpu::LaneSum sum, squares;
    for (int64_t n = 0; n < batch; ++n)
      sum.add(spatial, [&](int64_t s) {
        return double(in[n * channels * spatial + s]);
      });
    double wantMean = sum.total() / double(batch * spatial);
    for (int64_t n = 0; n < batch; ++n)
      squares.add(spatial, [&](int64_t s) {
        double d = in[n * channels * spatial + s] - wantMean;
        return d * d;
      });
    double wantSq = squares.total();
    EXPECT_EQ(std::memcmp(&mean, &wantMean, sizeof mean), 0) << c;
    EXPECT_EQ(std::memcmp(&sq, &wantSq, sizeof sq), 0) << c;
  }
}

} // namespace
