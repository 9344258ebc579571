//===- OptimizerKernelsTest.cpp - AdamW and SGD updates -------------------===//
//
// graph.adamw_update and graph.sgd_update run in place (every result in its
// operand's storage, as codegen emits them) over three steps, against
// torch.optim (1.13, foreach=False) on the same numbers:
//   p0 = [0.5, -1.25, 2.0, 0.0, -0.375]
//   grads = [[0.1, -0.2, 0.3, 0.05, -1.5], [-0.4, 0.25, 0.0, 1.0, 0.75],
//            [0.2, 0.2, -0.6, -0.3, 0.125]]
//   lr per step [1e-2, 5e-3, 2e-3] (param_groups[0]['lr'] set before each)
//   p.grad = torch.tensor(grads[s]) * torch.tensor(0.5)  (grad_scale 0.5)
//   AdamW(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
//   SGD(momentum, dampening, weight_decay, nesterov) as each test says.
// f32 within 1e-6 relative: PyTorch's vectorized add with alpha is a fused
// multiply-add, an ulp away from the kernel's multiply then add.
//
//===----------------------------------------------------------------------===//

#include "GradKernelTestUtils.h"

#include <cmath>
#include <limits>

using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

const std::vector<float> kParam = {0.5f, -1.25f, 2.0f, 0.0f, -0.375f};
const std::vector<std::vector<float>> kGrads = {
    {0.1f, -0.2f, 0.3f, 0.05f, -1.5f},
    {-0.4f, 0.25f, 0.0f, 1.0f, 0.75f},
    {0.2f, 0.2f, -0.6f, -0.3f, 0.125f}};
const double kLr[] = {1e-2, 5e-3, 2e-3};

/// Runs `op` on views: results may be the operands' own storage.
Status runViews(const std::string &op, std::vector<TensorView> in,
                std::vector<TensorView> out, const KernelAttrs &attrs) {
  KernelContext ctx{in, out, attrs};
  return (*getCpuKernels().lookup(op))(ctx);
}

struct Scalars {
  OwnedTensor lr, step, scale;
  Scalars(double lr, int64_t step, float scale)
      : lr(f64({}, {lr})), step(i64({}, {step})), scale(f32({}, {scale})) {}
};

KernelAttrs adamwAttrs() {
  KernelAttrs a;
  a.set("beta1", 0.9);
  a.set("beta2", 0.999);
  a.set("eps", 1e-8);
  a.set("weight_decay", 0.1);
  return a;
}

/// One AdamW step in place.
Status adamwInPlace(OwnedTensor &p, const OwnedTensor &g, OwnedTensor &m,
                    OwnedTensor &v, const Scalars &s,
                    const KernelAttrs &attrs = adamwAttrs()) {
  return runViews("graph.adamw_update",
                  {p.view(), g.view(), m.view(), v.view(), s.lr.view(),
                   s.step.view(), s.scale.view()},
                  {p.view(), m.view(), v.view()}, attrs);
}

TEST(OptimizerKernels, AdamWInPlaceMatchesPyTorch) {
  OwnedTensor p = f32({5}, kParam);
  OwnedTensor m = f32({5}, std::vector<float>(5, 0.0f));
  OwnedTensor v = f32({5}, std::vector<float>(5, 0.0f));
  for (int s = 0; s < 3; ++s) {
    OwnedTensor g = f32({5}, kGrads[s]);
    Status st = adamwInPlace(p, g, m, v, Scalars(kLr[s], s + 1, 0.5f));
    ASSERT_TRUE(st) << st.message();
    if (s == 0) {
      expectClose(p.values<float>(),
                  {0.489500016f, -1.23874998f, 1.98800004f, -0.00999999605f,
                   -0.364625007f},
                  1e-6, 1e-9);
      expectClose(m.values<float>(),
                  {0.00500000035f, -0.0100000007f, 0.0150000006f,
                   0.00250000018f, -0.075000003f},
                  1e-6, 1e-12);
      expectClose(v.values<float>(),
                  {2.50000016e-06f, 1.00000007e-05f, 2.25000022e-05f,
                   6.25000041e-07f, 0.000562499976f},
                  1e-6, 1e-14);
    }
  }
  expectClose(
      p.values<float>(),
      {0.492174715f, -1.23958707f, 1.98393905f, -0.0146587603f, -0.362722814f},
      1e-6, 1e-9);
  expectClose(m.values<float>(),
              {-0.00395000027f, 0.01315f, -0.0178500023f, 0.0320249982f,
               -0.0207500011f},
              1e-6, 1e-12);
  expectClose(v.values<float>(),
              {5.24550087e-05f, 3.55893862e-05f, 0.000112455033f,
               0.00027287376f, 0.000705766142f},
              1e-6, 1e-14);
}

TEST(OptimizerKernels, AdamWF64MatchesPyTorch) {
  // The same run in float64 (grads are the f32 values widened).
  auto widen = [](const std::vector<float> &v) {
    return f64({5}, std::vector<double>(v.begin(), v.end()));
  };
  OwnedTensor p = widen(kParam), m = f64({5}, std::vector<double>(5, 0.0));
  OwnedTensor v = f64({5}, std::vector<double>(5, 0.0));
  for (int s = 0; s < 3; ++s) {
    OwnedTensor g = widen(kGrads[s]);
    ASSERT_TRUE(adamwInPlace(p, g, m, v, Scalars(kLr[s], s + 1, 0.5f)));
  }
  expectClose(p.values<double>(),
              {0.49217470603472274, -1.2395870715335555, 1.9839390474753256,
               -0.014658760543198264, -0.36272281308566973},
              1e-13, 1e-16);
  expectClose(m.values<double>(),
              {-0.0039500000588595851, 0.013150000028312204,
               -0.01785000070929527, 0.032024999434128398,
               -0.020750000000000001},
              1e-13, 1e-18);
  expectClose(v.values<double>(),
              {5.2455004063280953e-05, 3.5589385595450739e-05,
               0.0001124550314371225, 0.00027287375243172882,
               0.00070576618750000058},
              1e-13, 1e-20);
}

TEST(OptimizerKernels, AdamWOutOfPlaceEqualsInPlace) {
  OwnedTensor p = f32({5}, kParam), g = f32({5}, kGrads[1]);
  OwnedTensor m = f32({5}, {0.01f, -0.02f, 0.0f, 0.3f, 0.1f});
  OwnedTensor v = f32({5}, {1e-4f, 2e-4f, 0.0f, 1e-3f, 5e-5f});
  Scalars s(3e-3, 4, 0.25f);
  OwnedTensor p2(DType::F32, {5}), m2(DType::F32, {5}), v2(DType::F32, {5});
  ASSERT_TRUE(runCpuKernel("graph.adamw_update",
                           {&p, &g, &m, &v, &s.lr, &s.step, &s.scale},
                           {&p2, &m2, &v2}, adamwAttrs()));
  EXPECT_EQ(p.values<float>(), kParam); // operands untouched
  ASSERT_TRUE(adamwInPlace(p, g, m, v, s));
  EXPECT_EQ(p.values<float>(), p2.values<float>());
  EXPECT_EQ(m.values<float>(), m2.values<float>());
  EXPECT_EQ(v.values<float>(), v2.values<float>());
  EXPECT_NE(p.values<float>(), kParam);
}

TEST(OptimizerKernels, NonFiniteGradScaleSkipsTheUpdate) {
  // fp16 loss scaling: an overflowed step leaves every state as it was.
  for (float bad : {std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    OwnedTensor p = f32({5}, kParam), g = f32({5}, kGrads[0]);
    OwnedTensor m = f32({5}, {1, 2, 3, 4, 5}), v = f32({5}, {1, 1, 1, 1, 1});
    ASSERT_TRUE(adamwInPlace(p, g, m, v, Scalars(1e-2, 2, bad)));
    EXPECT_EQ(p.values<float>(), kParam);
    EXPECT_EQ(m.values<float>(), (std::vector<float>{1, 2, 3, 4, 5}));
    Scalars s(1e-2, 2, bad);
    OwnedTensor p2(DType::F32, {5}), m2(DType::F32, {5}), v2(DType::F32, {5});
    ASSERT_TRUE(runCpuKernel("graph.adamw_update",
                             {&p, &g, &m, &v, &s.lr, &s.step, &s.scale},
                             {&p2, &m2, &v2}, adamwAttrs()));
    EXPECT_EQ(p2.values<float>(), kParam);
    EXPECT_EQ(v2.values<float>(), std::vector<float>(5, 1.0f));
  }
}

TEST(OptimizerKernels, AdamWChecksOperands) {
  OwnedTensor p = f32({5}, kParam), g = f32({5}, kGrads[0]);
  OwnedTensor m(DType::F32, {5}), v(DType::F32, {5}), shortV(DType::F32, {4});
  Scalars ok(1e-2, 1, 1.0f);
  OwnedTensor lr32 = f32({}, {1e-2f}), step0 = i64({}, {0});
  OwnedTensor p2(DType::F32, {5}), m2(DType::F32, {5}), v2(DType::F32, {5});
  const std::string op = "graph.adamw_update";
  expectErrorNaming(
      runCpuKernel(op, {&p, &g, &m, &shortV, &ok.lr, &ok.step, &ok.scale},
                   {&p2, &m2, &v2}, adamwAttrs()),
      op);
  expectErrorNaming(runCpuKernel(op,
                                 {&p, &g, &m, &v, &lr32, &ok.step, &ok.scale},
                                 {&p2, &m2, &v2}, adamwAttrs()),
                    op);
  expectErrorNaming(runCpuKernel(op,
                                 {&p, &g, &m, &v, &ok.lr, &step0, &ok.scale},
                                 {&p2, &m2, &v2}, adamwAttrs()),
                    op);
  expectErrorNaming(runCpuKernel(op,
                                 {&p, &g, &m, &v, &ok.lr, &ok.step, &ok.scale},
                                 {&p2, &m2, &v2}, KernelAttrs{}),
                    op);
  expectErrorNaming(runCpuKernel(op, {&p, &g, &m, &v, &ok.lr, &ok.step},
                                 {&p2, &m2, &v2}, adamwAttrs()),
                    op);
}

//===----------------------------------------------------------------------===//
// SGD
//===----------------------------------------------------------------------===//

KernelAttrs sgdAttrs(double momentum, double dampening, double weightDecay,
                     bool nesterov) {
  KernelAttrs a;
  a.set("momentum", momentum);
  a.set("dampening", dampening);
  a.set("weight_decay", weightDecay);
  a.set("nesterov", int64_t(nesterov));
  return a;
}

/// Three in-place SGD steps from kParam; the buffer starts as garbage,
/// which step 1 must ignore (torch clones d there).
void runSgd(const KernelAttrs &attrs, OwnedTensor &p, OwnedTensor &buf) {
  for (int s = 0; s < 3; ++s) {
    OwnedTensor g = f32({5}, kGrads[s]);
    Scalars sc(kLr[s], s + 1, 0.5f);
    Status st = runViews("graph.sgd_update",
                         {p.view(), g.view(), buf.view(), sc.lr.view(),
                          sc.step.view(), sc.scale.view()},
                         {p.view(), buf.view()}, attrs);
    ASSERT_TRUE(st) << st.message();
  }
}

TEST(OptimizerKernels, SgdMomentumDampeningInPlaceMatchesPyTorch) {
  // SGD(momentum=0.9, dampening=0.1, weight_decay=0.01)
  OwnedTensor p = f32({5}, kParam), buf = f32({5}, std::vector<float>(5, 7));
  runSgd(sgdAttrs(0.9, 0.1, 0.01, false), p, buf);
  expectClose(
      p.values<float>(),
      {0.500117838f, -1.24903262f, 1.99764121f, -0.00319293747f, -0.365227968f},
      1e-6, 1e-9);
  expectClose(buf.values<float>(),
              {-0.0189037342f, 0.0787692294f, -0.0981367826f, 0.290224433f,
               -0.256805599f},
              1e-6, 1e-9);
}

TEST(OptimizerKernels, SgdNesterovInPlaceMatchesPyTorch) {
  // SGD(momentum=0.9, dampening=0, weight_decay=0.01, nesterov=True)
  OwnedTensor p = f32({5}, kParam), buf = f32({5}, std::vector<float>(5, -3));
  runSgd(sgdAttrs(0.9, 0.0, 0.01, true), p, buf);
  expectClose(
      p.values<float>(),
      {0.500421524f, -1.24882662f, 1.99667573f, -0.00560244499f, -0.360880792f},
      1e-6, 1e-9);
  expectClose(buf.values<float>(),
              {-0.0259535536f, 0.0976594761f, -0.124370173f, 0.320192456f,
               -0.217395157f},
              1e-6, 1e-9);
}

TEST(OptimizerKernels, SgdWithoutMomentumKeepsTheBuffer) {
  // SGD(lr) alone: p -= lr * g; the buffer passes through unchanged.
  OwnedTensor p = f32({5}, kParam), buf = f32({5}, {1, 2, 3, 4, 5});
  runSgd(sgdAttrs(0.0, 0.0, 0.0, false), p, buf);
  expectClose(
      p.values<float>(),
      {0.50030005f, -1.249825f, 1.99909997f, -0.00245000003f, -0.369500011f},
      1e-6, 1e-9);
  EXPECT_EQ(buf.values<float>(), (std::vector<float>{1, 2, 3, 4, 5}));

  // Out of place too.
  OwnedTensor g = f32({5}, kGrads[0]), p2(DType::F32, {5}),
              buf2(DType::F32, {5});
  Scalars s(0.1, 1, 1.0f);
  ASSERT_TRUE(runCpuKernel("graph.sgd_update",
                           {&p, &g, &buf, &s.lr, &s.step, &s.scale},
                           {&p2, &buf2}, sgdAttrs(0.0, 0.0, 0.0, false)));
  EXPECT_EQ(buf2.values<float>(), (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST(OptimizerKernels, SgdChecksOperands) {
  OwnedTensor p = f32({5}, kParam), g = f32({4}, {1, 2, 3, 4});
  OwnedTensor buf(DType::F32, {5}), p2(DType::F32, {5}), b2(DType::F32, {5});
  Scalars s(0.1, 1, 1.0f);
  expectErrorNaming(runCpuKernel("graph.sgd_update",
                                 {&p, &g, &buf, &s.lr, &s.step, &s.scale},
                                 {&p2, &b2}, sgdAttrs(0.9, 0, 0, false)),
                    "graph.sgd_update");
  OwnedTensor g5 = f32({5}, kGrads[0]);
  expectErrorNaming(runCpuKernel("graph.sgd_update",
                                 {&p, &g5, &buf, &s.lr, &s.step, &s.scale},
                                 {&p2, &b2}, KernelAttrs{}),
                    "graph.sgd_update");
}

//===----------------------------------------------------------------------===//
// Multi-tensor updates (strata-group-updates)
//===----------------------------------------------------------------------===//

/// Parameters of several sizes (one empty), with gradients and states.
struct Params {
  std::vector<OwnedTensor> tensors; // per parameter: param, grad, states
  size_t perParameter;
  Params(size_t perParameter, uint32_t seed) : perParameter(perParameter) {
    uint32_t x = seed;
    auto next = [&] {
      x = x * 1664525u + 1013904223u;
      return float(int(x >> 9) % 2001 - 1000) / 1000.0f;
    };
    for (int64_t n : {5, 0, 17, 64, 3}) {
      for (size_t i = 0; i < perParameter; ++i) {
        std::vector<float> v(static_cast<size_t>(n));
        for (float &e : v)
          e = i == 3 ? std::abs(next()) : next(); // exp_avg_sq >= 0
        tensors.push_back(f32({n}, v));
      }
    }
  }
  size_t parameters() const { return tensors.size() / perParameter; }
  std::vector<float> values() const {
    std::vector<float> all;
    for (const OwnedTensor &t : tensors) {
      std::vector<float> v = t.values<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
};

/// Updates `params` in place: one instruction over all of them (`multi`)
/// or one per parameter.
Status updateInPlace(const std::string &op, Params &params, const Scalars &s,
                     const KernelAttrs &attrs, bool multi) {
  size_t per = params.perParameter;
  auto run = [&](size_t begin, size_t end) {
    std::vector<TensorView> in, out;
    for (size_t k = begin; k < end; ++k) {
      for (size_t i = 0; i < per; ++i)
        in.push_back(params.tensors[k * per + i].view());
      for (size_t i = 0; i < per - 1; ++i) // the parameter and the states
        out.push_back(params.tensors[k * per + (i == 0 ? 0 : i + 1)].view());
    }
    in.push_back(s.lr.view());
    in.push_back(s.step.view());
    in.push_back(s.scale.view());
    return runViews(op, in, out, attrs);
  };
  if (multi)
    return run(0, params.parameters());
  for (size_t k = 0; k < params.parameters(); ++k)
    if (Status st = run(k, k + 1); !st)
      return st;
  return Status::ok();
}

TEST(OptimizerKernels, MultiTensorUpdatesEqualOnePerParameter) {
  for (const char *op : {"graph.adamw_update", "graph.sgd_update"}) {
    bool adamw = std::string(op) == "graph.adamw_update";
    KernelAttrs attrs = adamw ? adamwAttrs() : sgdAttrs(0.9, 0.1, 0.01, true);
    Params multi(adamw ? 4 : 3, 7), single(adamw ? 4 : 3, 7);
    // Three steps, then a skipped one (an overflowed fp16 gradient).
    for (int step = 1; step <= 4; ++step) {
      Scalars s(kLr[(step - 1) % 3], step,
                step == 4 ? std::numeric_limits<float>::infinity() : 0.5f);
      ASSERT_TRUE(updateInPlace(op, multi, s, attrs, true)) << op;
      ASSERT_TRUE(updateInPlace(op, single, s, attrs, false)) << op;
      EXPECT_EQ(multi.values(), single.values()) << op << " step " << step;
    }
    EXPECT_NE(multi.values(), Params(adamw ? 4 : 3, 7).values()) << op;
  }
}

TEST(OptimizerKernels, MultiTensorChecksEachParameter) {
  Params params(4, 3);
  Scalars s(1e-3, 1, 1.0f);
  std::vector<TensorView> in, out;
  for (size_t k = 0; k < 2; ++k) {
    for (size_t i = 0; i < 4; ++i)
      in.push_back(params.tensors[k * 4 + i].view());
    for (size_t i : {0, 2, 3})
      out.push_back(params.tensors[k * 4 + i].view());
  }
  std::vector<TensorView> scalars = {s.lr.view(), s.step.view(),
                                     s.scale.view()};
  auto run = [&](std::vector<TensorView> tensors, std::vector<TensorView> res) {
    tensors.insert(tensors.end(), scalars.begin(), scalars.end());
    return runViews("graph.adamw_update", tensors, res, adamwAttrs());
  };
  ASSERT_TRUE(run(in, out));
  // A second parameter's state of another shape.
  std::vector<TensorView> badShape = in;
  badShape[6] = params.tensors[9].view();
  expectErrorNaming(run(badShape, out), "does not match the parameter");
  // A second parameter of another dtype.
  OwnedTensor d(DType::F64, {0});
  std::vector<TensorView> badType = in, badTypeOut = out;
  for (size_t i = 4; i < 8; ++i)
    badType[i] = d.view();
  for (size_t i = 3; i < 6; ++i)
    badTypeOut[i] = d.view();
  expectErrorNaming(run(badType, badTypeOut),
                    "does not share the first parameter's dtype");
  // Seven tensors are not whole parameters; nor are five results.
  std::vector<TensorView> seven(in.begin(), in.end() - 1);
  expectErrorNaming(run(seven, out), "4 tensors per parameter");
  std::vector<TensorView> five(out.begin(), out.end() - 1);
  expectErrorNaming(run(in, five), "3 results per parameter");
}

TEST(OptimizerKernels, MultiTensorSumSquares) {
  Params params(1, 11);
  std::vector<OwnedTensor> sums, each;
  std::vector<TensorView> in, out;
  for (OwnedTensor &t : params.tensors) {
    in.push_back(t.view());
    sums.emplace_back(DType::F32, std::vector<int64_t>{});
    each.emplace_back(DType::F32, std::vector<int64_t>{});
  }
  for (OwnedTensor &t : sums)
    out.push_back(t.view());
  ASSERT_TRUE(runViews("graph.sum_squares", in, out, KernelAttrs{}));
  for (size_t k = 0; k < in.size(); ++k) {
    ASSERT_TRUE(runViews("graph.sum_squares", {in[k]}, {each[k].view()},
                         KernelAttrs{}));
    EXPECT_EQ(sums[k].values<float>(), each[k].values<float>()) << k;
  }
  EXPECT_EQ(sums[1].values<float>(), std::vector<float>{0.0f}); // empty
  expectErrorNaming(runViews("graph.sum_squares", in,
                             std::vector<TensorView>(out.begin(), out.end() - 1),
                             KernelAttrs{}),
                    "one scalar result per operand");
  OwnedTensor d(DType::F64, {});
  std::vector<TensorView> mixed = out;
  mixed[2] = d.view();
  expectErrorNaming(runViews("graph.sum_squares", in, mixed, KernelAttrs{}),
                    "differs in dtype from operand 0");
}

} // namespace
