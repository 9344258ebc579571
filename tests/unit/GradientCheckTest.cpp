//===- GradientCheckTest.cpp - Every op's gradient vs finite differences --===//
//
// For each differentiable graph op: a small f64 function `loss = sum(op(p)^2)`
// of random parameters goes through strata-autodiff, codegen and the CPU
// runtime; the gradients the "micro_step" program computes must equal
// central finite differences of its own loss (random ops such as dropout
// draw the same numbers on every run). This checks the
// op's gradient rule (GraphGradients.cpp), the gradient ops' kernels and
// the codegen of the training programs together.
//
//===----------------------------------------------------------------------===//

#include "strata/Codegen/ArtifactWriter.h"
#include "strata/Runtime/Executor.h"
#include "strata/Tools/CompileDriver.h"
#include "strata/Tools/InitStrata.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

using namespace strata;
using namespace strata::runtime;

namespace {

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  double lo = -1.0, hi = 1.0;
};

struct GradCase {
  std::string name;
  std::vector<Param> params;
  /// MLIR ops (generic form) over %p0, %p1, ... defining the outputs.
  std::string body;
  /// Output values and their shapes; the loss is the sum of their squares.
  std::vector<std::pair<std::string, std::vector<int64_t>>> outputs;
};

void PrintTo(const GradCase &c, std::ostream *os) { *os << c.name; }

std::string tensorType(const std::vector<int64_t> &shape,
                       const std::string &element = "f64") {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + element + ">";
}

std::string buildModule(const GradCase &c) {
  std::ostringstream os;
  os << "module {\n  func.func @main(";
  for (size_t i = 0; i < c.params.size(); ++i)
    os << (i ? ", " : "") << "%" << c.params[i].name << ": "
       << tensorType(c.params[i].shape) << " {graph.name = \""
       << c.params[i].name << "\", graph.role = #graph<role parameter>}";
  os << ") -> (tensor<f64> {graph.name = \"loss\", graph.role = #graph<role output>}) {\n";
  os << c.body << "\n";
  std::string total;
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    const auto &[value, shape] = c.outputs[i];
    std::string t = tensorType(shape), n = std::to_string(i);
    os << "    %sq" << n << " = \"graph.mul\"(" << value << ", " << value
       << ") : (" << t << ", " << t << ") -> " << t << "\n";
    os << "    %s" << n << " = \"graph.reduce_sum\"(%sq" << n
       << ") <{axes = array<i64";
    for (size_t d = 0; d < shape.size(); ++d)
      os << (d ? ", " : ": ") << d;
    os << ">, keepdims = false}> : (" << t << ") -> tensor<f64>\n";
    if (i == 0) {
      total = "%s0";
    } else {
      os << "    %t" << n << " = \"graph.add\"(" << total << ", %s" << n
         << ") : (tensor<f64>, tensor<f64>) -> tensor<f64>\n";
      total = "%t" + n;
    }
  }
  os << "    return " << total << " : tensor<f64>\n  }\n}\n";
  return os.str();
}

class GradientCheckTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradientCheckTest, MatchesFiniteDifferences) {
  const GradCase &c = GetParam();
  std::string source = buildModule(c);
  mlir::DialectRegistry registry;
  registerAllStrataDialectsAndPasses(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  ASSERT_TRUE(module) << "cannot parse:\n" << source;
  codegen::TrainingOptions training;
  llvm::Error built = buildTrainingStep(context, *module, training);
  ASSERT_FALSE(static_cast<bool>(built)) << llvm::toString(std::move(built));

  // Random initial values, per parameter.
  std::mt19937_64 rng(std::hash<std::string>{}(c.name));
  std::map<std::string, std::string> initial;
  for (const Param &p : c.params) {
    int64_t n = 1;
    for (int64_t d : p.shape)
      n *= d;
    std::vector<double> values(n);
    std::uniform_real_distribution<double> dist(p.lo, p.hi);
    for (double &v : values)
      v = dist(rng);
    initial[p.name].assign(reinterpret_cast<const char *>(values.data()),
                           n * sizeof(double));
  }
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("gradcheck", dir));
  std::string artifactDir = (dir + "/case.strata").str();
  llvm::Error written = codegen::writeArtifact(
      *module, artifactDir,
      [&](llvm::StringRef name) -> llvm::Expected<std::string> {
        return initial.at(name.str());
      },
      codegen::ArtifactOptions{"gradcheck", training});
  ASSERT_FALSE(static_cast<bool>(written)) << llvm::toString(std::move(written));

  std::unique_ptr<Artifact> artifact;
  Status loaded = Artifact::load(artifactDir, artifact);
  ASSERT_TRUE(loaded.isOk()) << loaded.message();
  std::unique_ptr<Executor> executor;
  Status created = Executor::create(*artifact, getCpuKernels(), executor);
  ASSERT_TRUE(created.isOk()) << created.message();

  Status ran = executor->run("micro_step");
  ASSERT_TRUE(ran.isOk()) << ran.message();
  std::map<std::string, TensorView *> states;
  for (const auto &state : executor->getStates())
    states[state.name] = state.view;

  // The loss of the micro_step program itself: its random ops draw the
  // same numbers on every run (same seed, same streams), so dropout's
  // gradient is checked too. Gradients are copied first: each run rewrites
  // them.
  std::map<std::string, std::vector<double>> grads;
  for (const Param &p : c.params) {
    ASSERT_TRUE(states.count(p.name)) << p.name;
    ASSERT_TRUE(states.count("grad:" + p.name)) << "no gradient for " << p.name;
    const TensorView *g = states["grad:" + p.name];
    grads[p.name].assign(g->as<double>(), g->as<double>() + g->numel());
  }
  auto loss = [&]() {
    Status s = executor->run("micro_step");
    EXPECT_TRUE(s.isOk()) << s.message();
    return executor->findOutput("strata.loss")->as<double>()[0];
  };
  const double h = 1e-6;
  for (const Param &p : c.params) {
    double *value = states[p.name]->as<double>();
    const double *grad = grads[p.name].data();
    int64_t n = states[p.name]->numel();
    int64_t stride = std::max<int64_t>(1, n / 48);
    for (int64_t i = 0; i < n; i += stride) {
      double saved = value[i];
      value[i] = saved + h;
      double plus = loss();
      value[i] = saved - h;
      double minus = loss();
      value[i] = saved;
      double numeric = (plus - minus) / (2 * h);
      EXPECT_NEAR(grad[i], numeric, 1e-6 + 1e-5 * std::fabs(numeric))
          << c.name << ": d loss / d " << p.name << "[" << i << "]";
    }
  }
}

std::string unary(const std::string &op, const std::string &attrs,
                  const std::vector<int64_t> &shape) {
  std::string t = tensorType(shape);
  return "    %y = \"graph." + op + "\"(%p0)" +
         (attrs.empty() ? "" : " <{" + attrs + "}>") + " : (" + t + ") -> " + t;
}

GradCase unaryCase(const std::string &name, const std::string &op,
                   const std::string &attrs = "", double lo = -1.0,
                   double hi = 1.0) {
  std::vector<int64_t> shape{3, 4};
  return {name, {{"p0", shape, lo, hi}}, unary(op, attrs, shape), {{"%y", shape}}};
}

std::string binary(const std::string &op, const std::vector<int64_t> &l,
                   const std::vector<int64_t> &r,
                   const std::vector<int64_t> &out) {
  return "    %y = \"graph." + op + "\"(%p0, %p1) : (" + tensorType(l) + ", " +
         tensorType(r) + ") -> " + tensorType(out);
}

GradCase binaryCase(const std::string &op, std::vector<int64_t> l,
                    std::vector<int64_t> r, std::vector<int64_t> out,
                    double lo = -1.0, double hi = 1.0) {
  return {op, {{"p0", l, lo, hi}, {"p1", r, lo, hi}}, binary(op, l, r, out),
          {{"%y", out}}};
}

std::string i64Constant(const std::string &name, const std::vector<int64_t> &shape,
                        const std::string &values) {
  return "    " + name + " = \"graph.constant\"() <{value = dense<" + values +
         "> : " + tensorType(shape, "i64") + "}> : () -> " +
         tensorType(shape, "i64") + "\n";
}

/// One table of every case, by op family: kept whole, to read as a table.
std::vector<GradCase> cases() {
  std::vector<GradCase> all;
  // Elementwise unary ops.
  for (const char *op : {"abs", "exp", "tanh", "erf", "sin", "cos", "relu",
                         "sigmoid", "softplus", "neg", "softsign"})
    all.push_back(unaryCase(op, op));
  all.push_back(unaryCase("log", "log", "", 0.5, 2.0));
  all.push_back(unaryCase("sqrt", "sqrt", "", 0.5, 2.0));
  all.push_back(unaryCase("reciprocal", "reciprocal", "", 0.5, 2.0));
  all.push_back(unaryCase("gelu", "gelu", "approximate = #graph<approximation none>", -3, 3));
  all.push_back(unaryCase("gelu_tanh", "gelu", "approximate = #graph<approximation tanh>", -3, 3));
  all.push_back(unaryCase("leaky_relu", "leaky_relu", "alpha = 0.1 : f64"));
  all.push_back(unaryCase("elu", "elu", "alpha = 1.5 : f64", -2, 2));
  all.push_back(unaryCase("hard_sigmoid", "hard_sigmoid",
                          "alpha = 0.2 : f64, beta = 0.5 : f64", -4, 4));
  all.push_back(unaryCase("hard_swish", "hard_swish", "", -4, 4));
  all.push_back(unaryCase("clip", "clip", "max = 0.5 : f64, min = -0.5 : f64"));

  // Broadcasting binary ops.
  all.push_back(binaryCase("add", {3, 4}, {4}, {3, 4}));
  all.push_back(binaryCase("sub", {3, 1}, {1, 4}, {3, 4}));
  all.push_back(binaryCase("mul", {2, 3, 4}, {3, 1}, {2, 3, 4}));
  all.push_back(binaryCase("div", {3, 4}, {4}, {3, 4}, 0.5, 2.0));
  all.push_back(binaryCase("pow", {3, 4}, {4}, {3, 4}, 0.5, 2.0));
  all.push_back(binaryCase("max", {3, 4}, {3, 4}, {3, 4}));
  all.push_back(binaryCase("min", {3, 4}, {4}, {3, 4}));
  all.push_back({"where",
                 {{"p0", {3, 4}}, {"p1", {4}}},
                 "    %c = \"graph.constant\"() <{value = dense<[[true, false, "
                 "true, true], [false, false, true, false], [true, true, false, "
                 "false]]> : tensor<3x4xi1>}> : () -> tensor<3x4xi1>\n"
                 "    %y = \"graph.where\"(%c, %p0, %p1) : (tensor<3x4xi1>, "
                 "tensor<3x4xf64>, tensor<4xf64>) -> tensor<3x4xf64>",
                 {{"%y", {3, 4}}}});

  // Linear algebra.
  all.push_back(binaryCase("matmul", {2, 3, 4}, {4, 5}, {2, 3, 5}));
  GradCase bmm = binaryCase("matmul", {2, 1, 3, 4}, {3, 4, 2}, {2, 3, 3, 2});
  bmm.name = "matmul_broadcast";
  all.push_back(bmm);
  all.push_back({"linear",
                 {{"p0", {2, 3, 4}}, {"p1", {5, 4}}, {"p2", {5}}},
                 "    %y = \"graph.linear\"(%p0, %p1, %p2) <{transpose_weight = "
                 "true}> : (tensor<2x3x4xf64>, tensor<5x4xf64>, tensor<5xf64>) "
                 "-> tensor<2x3x5xf64>",
                 {{"%y", {2, 3, 5}}}});
  all.push_back({"linear_no_bias",
                 {{"p0", {3, 4}}, {"p1", {4, 5}}},
                 "    %y = \"graph.linear\"(%p0, %p1) : (tensor<3x4xf64>, "
                 "tensor<4x5xf64>) -> tensor<3x5xf64>",
                 {{"%y", {3, 5}}}});

  // Normalization and softmax.
  all.push_back({"layer_norm",
                 {{"p0", {2, 3, 4}}, {"p1", {4}}, {"p2", {4}}},
                 "    %y = \"graph.layer_norm\"(%p0, %p1, %p2) <{axis = 2 : i64, "
                 "epsilon = 1.0e-05 : f64}> : (tensor<2x3x4xf64>, tensor<4xf64>, "
                 "tensor<4xf64>) -> tensor<2x3x4xf64>",
                 {{"%y", {2, 3, 4}}}});
  all.push_back({"layer_norm_two_axes",
                 {{"p0", {2, 3, 4}}, {"p1", {3, 4}}},
                 "    %y = \"graph.layer_norm\"(%p0, %p1) <{axis = 1 : i64, "
                 "epsilon = 1.0e-05 : f64}> : (tensor<2x3x4xf64>, "
                 "tensor<3x4xf64>) -> tensor<2x3x4xf64>",
                 {{"%y", {2, 3, 4}}}});
  all.push_back(
      {"batch_norm",
       {{"p0", {3, 2, 4}}, {"p1", {2}}, {"p2", {2}}},
       "    %m = \"graph.constant\"() <{value = dense<[0.1, -0.2]> : "
       "tensor<2xf64>}> : () -> tensor<2xf64>\n"
       "    %v = \"graph.constant\"() <{value = dense<[1.5, 0.5]> : "
       "tensor<2xf64>}> : () -> tensor<2xf64>\n"
       "    %y, %nm, %nv = \"graph.batch_norm\"(%p0, %p1, %p2, %m, %v) "
       "<{epsilon = 1.0e-05 : f64, momentum = 0.1 : f64, training = true}> : "
       "(tensor<3x2x4xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, "
       "tensor<2xf64>) -> (tensor<3x2x4xf64>, tensor<2xf64>, tensor<2xf64>)",
       {{"%y", {3, 2, 4}}}});
  all.push_back(unaryCase("softmax", "softmax", "axis = 1 : i64"));
  all.push_back(unaryCase("log_softmax", "log_softmax", "axis = 0 : i64"));

  // Dropout: the mask is a pure function of the run's seed and the op's
  // random stream, the same in every run of the program.
  all.push_back({"dropout",
                 {{"p0", {4, 6}}},
                 "    %y, %m = \"graph.dropout\"(%p0) <{ratio = 0.3 : f64}> : "
                 "(tensor<4x6xf64>) -> (tensor<4x6xf64>, tensor<4x6xi1>)",
                 {{"%y", {4, 6}}}});
  all.push_back({"attention_dropout",
                 {{"p0", {2, 3, 4}}, {"p1", {2, 5, 4}}, {"p2", {2, 5, 3}}},
                 "    %y = \"graph.attention\"(%p0, %p1, %p2) <{dropout_ratio = "
                 "0.25 : f64, scale = 0.5 : f64}> : (tensor<2x3x4xf64>, "
                 "tensor<2x5x4xf64>, tensor<2x5x3xf64>) -> tensor<2x3x3xf64>",
                 {{"%y", {2, 3, 3}}}});

  // Attention.
  all.push_back({"attention",
                 {{"p0", {2, 3, 4}}, {"p1", {2, 5, 4}}, {"p2", {2, 5, 3}}},
                 "    %y = \"graph.attention\"(%p0, %p1, %p2) <{scale = 0.5 : "
                 "f64}> : (tensor<2x3x4xf64>, tensor<2x5x4xf64>, "
                 "tensor<2x5x3xf64>) -> tensor<2x3x3xf64>",
                 {{"%y", {2, 3, 3}}}});
  all.push_back({"attention_causal",
                 {{"p0", {2, 4, 4}}, {"p1", {2, 4, 4}}, {"p2", {2, 4, 4}}},
                 "    %y = \"graph.attention\"(%p0, %p1, %p2) <{causal = true, "
                 "scale = 0.5 : f64}> : (tensor<2x4x4xf64>, tensor<2x4x4xf64>, "
                 "tensor<2x4x4xf64>) -> tensor<2x4x4xf64>",
                 {{"%y", {2, 4, 4}}}});
  // Five blocks of query rows and of keys (attentionRows: 32 when causal),
  // the last short: the causal gradient's dK and dV take each key block's
  // rows from its first key on.
  all.push_back({"attention_causal_blocks",
                 {{"p0", {1, 150, 2}}, {"p1", {1, 150, 2}}, {"p2", {1, 150, 2}}},
                 "    %y = \"graph.attention\"(%p0, %p1, %p2) <{causal = true, "
                 "scale = 0.5 : f64}> : (tensor<1x150x2xf64>, "
                 "tensor<1x150x2xf64>, tensor<1x150x2xf64>) -> "
                 "tensor<1x150x2xf64>",
                 {{"%y", {1, 150, 2}}}});
  all.push_back(
      {"attention_mask",
       {{"p0", {2, 3, 4}}, {"p1", {2, 5, 4}}, {"p2", {2, 5, 3}}},
       "    %k = \"graph.constant\"() <{value = dense<[[0.0, -2.0, 0.0, 0.0, "
       "-1.0e9], [0.0, 0.0, 0.5, 0.0, 0.0], [-1.0e9, 0.0, 0.0, 1.0, 0.0]]> : "
       "tensor<3x5xf64>}> : () -> tensor<3x5xf64>\n"
       "    %y = \"graph.attention\"(%p0, %p1, %p2, %k) <{scale = 0.5 : f64}> : "
       "(tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x3xf64>, "
       "tensor<3x5xf64>) -> tensor<2x3x3xf64>",
       {{"%y", {2, 3, 3}}}});

  // Lookups and losses.
  all.push_back({"embedding",
                 {{"p0", {6, 3}}},
                 i64Constant("%i", {2, 3}, "[[1, 3, 1], [0, -1, 3]]") +
                     "    %y = \"graph.embedding\"(%p0, %i) : (tensor<6x3xf64>, "
                     "tensor<2x3xi64>) -> tensor<2x3x3xf64>",
                 {{"%y", {2, 3, 3}}}});
  all.push_back({"gather",
                 {{"p0", {4, 3}}},
                 i64Constant("%i", {3}, "[2, 0, 2]") +
                     "    %y = \"graph.gather\"(%p0, %i) <{axis = 1 : i64}> : "
                     "(tensor<4x3xf64>, tensor<3xi64>) -> tensor<4x3xf64>",
                 {{"%y", {4, 3}}}});
  all.push_back(
      {"cross_entropy",
       {{"p0", {4, 5}}},
       i64Constant("%l", {4}, "[1, -100, 4, 0]") +
           "    %y = \"graph.cross_entropy\"(%p0, %l) <{ignore_index = -100 : "
           "i64, reduction = #graph<reduction mean>}> : (tensor<4x5xf64>, tensor<4xi64>) -> "
           "tensor<f64>",
       {{"%y", {}}}});
  all.push_back(
      {"cross_entropy_weighted_sum",
       {{"p0", {2, 5, 3}}},
       i64Constant("%l", {2, 3}, "[[1, 2, 4], [0, 0, 3]]") +
           "    %w = \"graph.constant\"() <{value = dense<[1.0, 2.0, 0.5, 1.0, "
           "3.0]> : tensor<5xf64>}> : () -> tensor<5xf64>\n"
           "    %y = \"graph.cross_entropy\"(%p0, %l, %w) <{reduction = "
           "#graph<reduction sum>}> : (tensor<2x5x3xf64>, tensor<2x3xi64>, tensor<5xf64>) "
           "-> tensor<f64>",
       {{"%y", {}}}});

  // Shapes.
  all.push_back({"reshape",
                 {{"p0", {3, 4}}},
                 "    %y = \"graph.reshape\"(%p0) : (tensor<3x4xf64>) -> "
                 "tensor<2x6xf64>",
                 {{"%y", {2, 6}}}});
  all.push_back({"broadcast_to",
                 {{"p0", {3, 1}}},
                 "    %y = \"graph.broadcast_to\"(%p0) : (tensor<3x1xf64>) -> "
                 "tensor<2x3x4xf64>",
                 {{"%y", {2, 3, 4}}}});
  all.push_back({"transpose",
                 {{"p0", {2, 3, 4}}},
                 "    %y = \"graph.transpose\"(%p0) <{perm = array<i64: 2, 0, "
                 "1>}> : (tensor<2x3x4xf64>) -> tensor<4x2x3xf64>",
                 {{"%y", {4, 2, 3}}}});
  all.push_back({"slice",
                 {{"p0", {5, 6}}},
                 "    %y = \"graph.slice\"(%p0) <{offsets = array<i64: 1, 5>, "
                 "sizes = array<i64: 2, 3>, strides = array<i64: 2, -2>}> : "
                 "(tensor<5x6xf64>) -> tensor<2x3xf64>",
                 {{"%y", {2, 3}}}});
  all.push_back({"concat",
                 {{"p0", {2, 3}}, {"p1", {2, 2}}},
                 "    %y = \"graph.concat\"(%p0, %p1) <{axis = 1 : i64}> : "
                 "(tensor<2x3xf64>, tensor<2x2xf64>) -> tensor<2x5xf64>",
                 {{"%y", {2, 5}}}});
  all.push_back({"split",
                 {{"p0", {2, 5}}},
                 "    %a, %b = \"graph.split\"(%p0) <{axis = 1 : i64}> : "
                 "(tensor<2x5xf64>) -> (tensor<2x2xf64>, tensor<2x3xf64>)\n"
                 "    %y = \"graph.mul\"(%b, %b) : (tensor<2x3xf64>, "
                 "tensor<2x3xf64>) -> tensor<2x3xf64>",
                 {{"%y", {2, 3}}}});
  for (const char *mode : {"constant", "reflect", "edge"})
    all.push_back({std::string("pad_") + mode,
                   {{"p0", {3, 4}}},
                   std::string("    %y = \"graph.pad\"(%p0) <{mode = #graph<pad_mode ") +
                       mode +
                       ">, pads = array<i64: 1, 2, 2, 1>, value = 0.0 : "
                       "f64}> : (tensor<3x4xf64>) -> tensor<6x7xf64>",
                   {{"%y", {6, 7}}}});
  all.push_back({"trilu",
                 {{"p0", {4, 4}}},
                 "    %y = \"graph.trilu\"(%p0) <{k = 0 : i64, upper = false}> "
                 ": (tensor<4x4xf64>) -> tensor<4x4xf64>",
                 {{"%y", {4, 4}}}});

  // Reductions.
  all.push_back({"reduce_sum",
                 {{"p0", {3, 4}}},
                 "    %y = \"graph.reduce_sum\"(%p0) <{axes = array<i64: 1>, "
                 "keepdims = false}> : (tensor<3x4xf64>) -> tensor<3xf64>",
                 {{"%y", {3}}}});
  all.push_back({"reduce_mean",
                 {{"p0", {2, 3, 4}}},
                 "    %y = \"graph.reduce_mean\"(%p0) <{axes = array<i64: 0, 2>, "
                 "keepdims = true}> : (tensor<2x3x4xf64>) -> tensor<1x3x1xf64>",
                 {{"%y", {1, 3, 1}}}});
  all.push_back({"reduce_max",
                 {{"p0", {3, 4}}},
                 "    %y = \"graph.reduce_max\"(%p0) <{axes = array<i64: 1>, "
                 "keepdims = false}> : (tensor<3x4xf64>) -> tensor<3xf64>",
                 {{"%y", {3}}}});

  // Convolution and pooling.
  all.push_back(
      {"conv",
       {{"p0", {2, 4, 5, 5}}, {"p1", {6, 2, 3, 3}}, {"p2", {6}}},
       "    %y = \"graph.conv\"(%p0, %p1, %p2) <{dilations = array<i64: 1, 2>, "
       "groups = 2 : i64, pads = array<i64: 1, 0, 1, 1>, strides = array<i64: "
       "2, 1>}> : (tensor<2x4x5x5xf64>, tensor<6x2x3x3xf64>, tensor<6xf64>) -> "
       "tensor<2x6x3x2xf64>",
       {{"%y", {2, 6, 3, 2}}}});
  all.push_back(
      {"max_pool",
       {{"p0", {1, 2, 5, 5}}},
       "    %y = \"graph.max_pool\"(%p0) <{ceil_mode = false, dilations = "
       "array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, "
       "0, 1, 1>, strides = array<i64: 2, 2>}> : (tensor<1x2x5x5xf64>) -> "
       "tensor<1x2x3x3xf64>",
       {{"%y", {1, 2, 3, 3}}}});
  for (const char *include : {"false", "true"})
    all.push_back(
        {std::string("avg_pool_count_include_pad_") + include,
         {{"p0", {1, 2, 5, 5}}},
         std::string("    %y = \"graph.avg_pool\"(%p0) <{ceil_mode = true, "
                     "count_include_pad = ") +
             include +
             ", kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, "
             "1>, strides = array<i64: 2, 2>}> : (tensor<1x2x5x5xf64>) -> "
             "tensor<1x2x3x3xf64>",
         {{"%y", {1, 2, 3, 3}}}});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradientCheckTest, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

} // namespace
