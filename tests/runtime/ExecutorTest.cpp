//===- ExecutorTest.cpp - Artifact loading and the program executor -------===//
//
// Format-2 artifacts built by hand (TestArtifacts.h): every program runs over
// one set of tensors, persistent state keeps its value between programs and
// steps, instructions may write their own inputs, each instruction's random
// seed follows the rule in Executor.h, and malformed plans are one-line
// errors.
//
//===----------------------------------------------------------------------===//

#include "TestArtifacts.h"

#include "strata/Runtime/Executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

using namespace strata;
using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

std::unique_ptr<Executor> load(const std::string &dir,
                               const KernelRegistry &kernels = getCpuKernels()) {
  std::unique_ptr<Artifact> artifact;
  Status s = Artifact::load(dir, artifact);
  EXPECT_TRUE(s.isOk()) << s.message();
  if (!s)
    return nullptr;
  std::unique_ptr<Executor> executor;
  s = Executor::create(*artifact, kernels, executor);
  EXPECT_TRUE(s.isOk()) << s.message();
  return executor;
}

std::string loadError(const std::string &dir,
                      const KernelRegistry &kernels = getCpuKernels()) {
  std::unique_ptr<Artifact> artifact;
  if (Status s = Artifact::load(dir, artifact); !s)
    return s.message();
  std::unique_ptr<Executor> executor;
  if (Status s = Executor::create(*artifact, kernels, executor); !s)
    return s.message();
  return "";
}

std::map<std::string, Executor::StateTensor> statesByName(Executor &e) {
  std::map<std::string, Executor::StateTensor> states;
  for (const auto &s : e.getStates())
    states[s.name] = s;
  return states;
}

std::vector<float> values(const TensorView &t) {
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
}

void fillBatch(Executor &e) {
  TensorView *x = e.findInput("x");
  TensorView *labels = e.findInput("labels");
  ASSERT_TRUE(x && labels);
  for (int64_t i = 0; i < x->numel(); ++i)
    x->as<float>()[i] = std::sin(0.7f * float(i + 1));
  for (int64_t i = 0; i < labels->numel(); ++i)
    labels->as<int64_t>()[i] = (3 * i + 1) % 5;
}

void setOptimizerInputs(Executor &e, double lr, int64_t step) {
  e.findInput("strata.lr")->as<double>()[0] = lr;
  e.findInput("strata.step")->as<int64_t>()[0] = step;
}

} // namespace

TEST(ExecutorTest, ProgramsAndTheirNames) {
  TempDir dir;
  auto e = load(writeLinearClassifier(dir / "a.strata"));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->hasProgram("forward"));
  EXPECT_TRUE(e->hasProgram("micro_step"));
  EXPECT_TRUE(e->hasProgram("optimizer_step"));
  EXPECT_FALSE(e->hasProgram("backward"));
  EXPECT_EQ(e->getInputNames("forward"), std::vector<std::string>{"x"});
  EXPECT_EQ(e->getInputNames(), std::vector<std::string>{"x"});
  EXPECT_EQ(e->getInputNames("micro_step"),
            (std::vector<std::string>{"x", "labels"}));
  EXPECT_EQ(e->getInputNames("optimizer_step"),
            (std::vector<std::string>{"strata.lr", "strata.step"}));
  EXPECT_EQ(e->getOutputNames("micro_step"),
            std::vector<std::string>{"strata.loss"});
  EXPECT_EQ(e->getOutputNames("optimizer_step"),
            std::vector<std::string>{"strata.grad_norm"});
  EXPECT_TRUE(e->getInputNames("nope").empty());
  // One name, one tensor, whichever program binds it.
  EXPECT_EQ(e->findInput("x")->data, e->findInput("x")->data);
  EXPECT_NE(e->findInput("strata.lr"), nullptr);
  EXPECT_NE(e->findOutput("strata.grad_norm"), nullptr);
  EXPECT_EQ(e->findInput("logits"), nullptr);
  EXPECT_EQ(e->findOutput("nope"), nullptr);

  Status s = e->run("backward");
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "the artifact has no program 'backward'");
}

TEST(ExecutorTest, StatesStartFromParamsBinAndZero) {
  TempDir dir;
  auto e = load(writeLinearClassifier(dir / "a.strata"));
  ASSERT_TRUE(e);
  auto states = statesByName(*e);
  ASSERT_EQ(states.size(), 4u);
  EXPECT_EQ(states["w"].kind, plan::PARAMETER);
  EXPECT_EQ(states["steps"].kind, plan::BUFFER);
  EXPECT_EQ(states["grad:w"].kind, plan::GRADIENT);
  EXPECT_EQ(states["sgd.momentum_buffer:w"].kind, plan::OPTIMIZER_STATE);
  std::vector<float> w = values(*states["w"].view);
  ASSERT_EQ(w.size(), 15u);
  for (size_t i = 0; i < w.size(); ++i)
    EXPECT_EQ(w[i], 0.1f * float(i % 7) - 0.3f);
  EXPECT_EQ(values(*states["steps"].view), std::vector<float>{0.0f});
  for (float v : values(*states["grad:w"].view))
    EXPECT_EQ(v, 0.0f);
  for (float v : values(*states["sgd.momentum_buffer:w"].view))
    EXPECT_EQ(v, 0.0f);
}

TEST(ExecutorTest, TrainingStepUpdatesStateInPlace) {
  TempDir dir;
  LinearClassifierOptions o;
  o.dropout = 0; // the gradient below is that of the undropped batch
  auto e = load(writeLinearClassifier(dir / "a.strata", o));
  ASSERT_TRUE(e);
  auto states = statesByName(*e);
  fillBatch(*e);

  ASSERT_TRUE(e->run("micro_step", 1).isOk());
  float loss = e->findOutput("strata.loss")->as<float>()[0];
  EXPECT_GT(loss, 0.5f);
  EXPECT_LT(loss, 3.0f);
  std::vector<float> w0 = values(*states["w"].view);
  std::vector<float> g1 = values(*states["grad:w"].view);
  double norm = 0;
  for (float g : g1)
    norm += double(g) * g;
  ASSERT_GT(norm, 0);

  setOptimizerInputs(*e, 0.5, 1);
  ASSERT_TRUE(e->run("optimizer_step").isOk());
  EXPECT_FLOAT_EQ(e->findOutput("strata.grad_norm")->as<float>()[0],
                  float(std::sqrt(norm)));
  // SGD's first step: buf = g, w = w - lr * g, both written over their inputs.
  std::vector<float> w1 = values(*states["w"].view);
  std::vector<float> buf1 = values(*states["sgd.momentum_buffer:w"].view);
  for (size_t i = 0; i < w1.size(); ++i) {
    EXPECT_EQ(buf1[i], g1[i]);
    EXPECT_EQ(w1[i], w0[i] + -0.5f * g1[i]);
  }
  EXPECT_EQ(values(*states["steps"].view), std::vector<float>{1.0f});

  // The next step sees the updated weights and momentum.
  ASSERT_TRUE(e->run("micro_step", 2).isOk());
  EXPECT_LT(e->findOutput("strata.loss")->as<float>()[0], loss);
  std::vector<float> g2 = values(*states["grad:w"].view);
  setOptimizerInputs(*e, 0.5, 2);
  ASSERT_TRUE(e->run("optimizer_step").isOk());
  std::vector<float> w2 = values(*states["w"].view);
  std::vector<float> buf2 = values(*states["sgd.momentum_buffer:w"].view);
  for (size_t i = 0; i < w2.size(); ++i) {
    float b = buf1[i] * 0.9f + 1.0f * g2[i];
    EXPECT_EQ(buf2[i], b);
    EXPECT_EQ(w2[i], w1[i] + -0.5f * b);
  }
  EXPECT_EQ(values(*states["steps"].view), std::vector<float>{2.0f});

  // The forward program reads the same, trained, weights.
  ASSERT_TRUE(e->run().isOk());
  const TensorView *logits = e->findOutput("logits");
  const float *x = e->findInput("x")->as<float>();
  double expected = 0;
  for (int k = 0; k < 3; ++k)
    expected += double(x[k]) * w2[k * 5 + 0];
  EXPECT_NEAR(logits->as<float>()[0], expected, 1e-6);
}

TEST(ExecutorTest, GradientsAccumulateUntilZeroed) {
  TempDir dir;
  LinearClassifierOptions o;
  o.accum = 2;
  o.dropout = 0;
  auto e = load(writeLinearClassifier(dir / "a.strata", o));
  ASSERT_TRUE(e);
  auto states = statesByName(*e);
  fillBatch(*e);
  ASSERT_TRUE(e->run("micro_step").isOk());
  std::vector<float> once = values(*states["grad:w"].view);
  ASSERT_TRUE(e->run("micro_step").isOk());
  std::vector<float> twice = values(*states["grad:w"].view);
  for (size_t i = 0; i < once.size(); ++i)
    EXPECT_EQ(twice[i], once[i] + once[i]);

  std::vector<float> w = values(*states["w"].view);
  e->zeroGradients();
  for (float v : values(*states["grad:w"].view))
    EXPECT_EQ(v, 0.0f);
  // Only gradients: parameters and buffers keep their values.
  EXPECT_EQ(values(*states["w"].view), w);
  ASSERT_TRUE(e->run("micro_step").isOk());
  EXPECT_EQ(values(*states["grad:w"].view), once);
}

TEST(ExecutorTest, DropoutIsAFunctionOfSeedAndStream) {
  TempDir dir;
  LinearClassifierOptions o;
  o.dropout = 0.5;
  auto e = load(writeLinearClassifier(dir / "a.strata", o));
  ASSERT_TRUE(e);
  auto states = statesByName(*e);
  fillBatch(*e);
  auto gradAfter = [&](uint64_t seed) {
    EXPECT_TRUE(e->run("micro_step", seed).isOk());
    return values(*states["grad:w"].view);
  };
  std::vector<float> a = gradAfter(11), b = gradAfter(11), c = gradAfter(12);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

namespace {

/// A registry whose "test.seed" kernel writes the seed it was given into its
/// i64 output, and whose "test.increment" adds 1 to its i64 input.
const KernelRegistry &probeKernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    r.add("test.seed", [](KernelContext &ctx) {
      ctx.outputs[0].as<int64_t>()[0] = static_cast<int64_t>(ctx.seed);
      return Status::ok();
    });
    r.add("test.increment", [](KernelContext &ctx) {
      ctx.outputs[0].as<int64_t>()[0] = ctx.inputs[0].as<int64_t>()[0] + 1;
      return Status::ok();
    });
    r.add("test.fail", [](KernelContext &ctx) {
      return Status::error("it failed");
    });
    return r;
  }();
  return registry;
}

} // namespace

// Pinned by an independent computation (docs/training.md's fnv1a64 in
// Python): the seed of instruction i is fnv1a64 of the little-endian u64 i,
// seeded with the run's seed, and of rng_stream | 2^63 when the instruction
// has one (so a stream never collides with an index).
TEST(ExecutorTest, InstructionSeeds) {
  TempDir dir;
  PlanBuilder b;
  uint32_t s0 = b.tensor("s0", plan::I64, {}, plan::BUFFER);
  uint32_t s1 = b.tensor("s1", plan::I64, {}, plan::BUFFER);
  uint32_t s2 = b.tensor("s2", plan::I64, {}, plan::BUFFER);
  uint32_t s3 = b.tensor("s3", plan::I64, {}, plan::BUFFER);
  // The streams strata-plan-execution gives: an instruction's number, or
  // the stream autodiff shared between a forward op and its gradient
  // (tagged by the top bit).
  auto random = [](plan::Instruction &inst, uint64_t stream, uint32_t slot) {
    inst.set_random(true);
    inst.set_rng_stream(stream);
    inst.set_seed_slot(slot);
  };
  const uint64_t shared = 5 | (uint64_t(1) << 63);
  random(b.instruction("micro_step", "test.seed", {}, {s0}), 0, 0);
  random(b.instruction("micro_step", "test.seed", {}, {s1}), 1, 1);
  random(b.instruction("micro_step", "test.seed", {}, {s2}), shared, 2);
  b.program("micro_step").set_seed_slots(3);
  // Another program, the same stream: the backward of a forward dropout.
  random(b.instruction("other", "test.seed", {}, {s3}), shared, 0);
  b.program("other").set_seed_slots(1);
  b.write(dir / "a.strata");
  auto e = load(dir / "a.strata", probeKernels());
  ASSERT_TRUE(e);
  auto states = statesByName(*e);
  auto seed = [&](const char *name) {
    return static_cast<uint64_t>(states[name].view->as<int64_t>()[0]);
  };
  ASSERT_TRUE(e->run("micro_step", 9).isOk());
  ASSERT_TRUE(e->run("other", 9).isOk());
  uint64_t index1 = 1;
  EXPECT_EQ(seed("s1"), fnv1a64(&index1, 8, 9));
  EXPECT_EQ(seed("s1"), 0xf7d63848577a5108ull);
  EXPECT_EQ(seed("s2"), 0x73c1d46c8338530cull);
  EXPECT_EQ(seed("s3"), seed("s2"));
  EXPECT_NE(seed("s0"), seed("s1"));
  ASSERT_TRUE(e->run("other", 10).isOk());
  EXPECT_EQ(seed("s3"), 0xd0b12987a4047e6full);
}

TEST(ExecutorTest, AnInstructionMayWriteItsInput) {
  TempDir dir;
  PlanBuilder b;
  uint32_t counter = b.persistent<int64_t>("counter", plan::I64, {}, {40},
                                           plan::BUFFER);
  b.instruction("step", "test.increment", {counter}, {counter});
  b.instruction("step", "test.increment", {counter}, {counter});
  b.write(dir / "a.strata");
  auto e = load(dir / "a.strata", probeKernels());
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->run("step").isOk());
  ASSERT_TRUE(e->run("step").isOk());
  EXPECT_EQ(statesByName(*e)["counter"].view->as<int64_t>()[0], 44);
}

TEST(ExecutorTest, KernelErrorsNameProgramInstructionAndNode) {
  TempDir dir;
  PlanBuilder b;
  uint32_t t = b.tensor("t", plan::I64, {}, plan::BUFFER);
  b.instruction("micro_step", "test.seed", {}, {t});
  b.instruction("micro_step", "test.fail", {t}, {t}).set_location("/net/Relu");
  b.write(dir / "a.strata");
  auto e = load(dir / "a.strata", probeKernels());
  ASSERT_TRUE(e);
  Status s = e->run("micro_step");
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "micro_step instruction 1, test.fail (node "
                         "'/net/Relu'): it failed");
}

//===----------------------------------------------------------------------===//
// Malformed artifacts
//===----------------------------------------------------------------------===//

TEST(ExecutorTest, MissingKernelNamesOpAndNode) {
  TempDir dir;
  PlanBuilder b = linearClassifier();
  b.program("optimizer_step").mutable_instructions(0)->set_op("graph.frobnicate");
  b.program("optimizer_step").mutable_instructions(0)->set_location("/opt/Frob");
  b.write(dir / "a.strata");
  EXPECT_EQ(loadError(dir / "a.strata"),
            "no kernel for graph.frobnicate (node '/opt/Frob') in this backend");
}

TEST(ExecutorTest, RejectsOtherFormatVersions) {
  TempDir dir;
  PlanBuilder b = linearClassifier();
  b.plan().set_format_version(1);
  b.write(dir / "a.strata");
  EXPECT_EQ(loadError(dir / "a.strata"),
            "artifact format version 1 is not supported by this strata-run "
            "(version 8); recompile the model with this Strata");
}

TEST(ExecutorTest, RejectsOutOfRangeTensorsInAnyProgram) {
  {
    TempDir dir;
    PlanBuilder b = linearClassifier();
    b.program("optimizer_step").mutable_instructions(1)->set_inputs(0, 999);
    b.write(dir / "a.strata");
    EXPECT_EQ(loadError(dir / "a.strata"),
              "plan: program 'optimizer_step' instruction 1 (graph.sqrt) "
              "names tensor 999 of 18 (a damaged plan.pb? recompile the model)");
  }
  {
    TempDir dir;
    PlanBuilder b = linearClassifier();
    b.program("micro_step").mutable_instructions(2)->set_outputs(0, 999);
    b.write(dir / "a.strata");
    EXPECT_EQ(loadError(dir / "a.strata"),
              "plan: program 'micro_step' instruction 2 "
              "(graph.cross_entropy) names tensor 999 of 18 (a damaged plan.pb? recompile the model)");
  }
  {
    TempDir dir;
    PlanBuilder b = linearClassifier();
    b.program("micro_step").mutable_inputs(1)->set_tensor(999);
    b.write(dir / "a.strata");
    EXPECT_EQ(loadError(dir / "a.strata"),
              "plan: program 'micro_step' input 'labels' is out of range (a damaged plan.pb? recompile the model)");
  }
  {
    TempDir dir;
    PlanBuilder b = linearClassifier();
    b.program("optimizer_step").mutable_outputs(0)->set_tensor(999);
    b.write(dir / "a.strata");
    EXPECT_EQ(loadError(dir / "a.strata"),
              "plan: program 'optimizer_step' output 'strata.grad_norm' is "
              "out of range (a damaged plan.pb? recompile the model)");
  }
}

TEST(ExecutorTest, RejectsParametersOutsideParamsBin) {
  TempDir dir;
  PlanBuilder b = linearClassifier();
  b.plan().mutable_parameters(1)->set_offset(1000);
  b.write(dir / "a.strata");
  EXPECT_EQ(loadError(dir / "a.strata"),
            "plan: parameter 'steps' lies outside its params.bin section");
}

// An offloaded activation's host copy (an ACTIVATION on the HOST tier)
// lies in the host activation arena, checked against its size, not the
// device arena's; and only a move may touch it (the placement itself is
// checked end to end by tests/memory/check_offload_activations.py).
TEST(ExecutorTest, ChecksHostActivationsAgainstTheHostArena) {
  TempDir dir;
  PlanBuilder b = linearClassifier();
  plan::MemoryPlan &memory = *b.plan().mutable_memory();
  memory.set_activation_bytes(1 << 20);
  memory.set_alignment(64);
  uint32_t host = 0;
  for (plan::Tensor &t : *b.plan().mutable_tensors())
    if (t.kind() == plan::ACTIVATION) {
      host = t.id();
      break;
    }
  b.plan().mutable_tensors(int(host))->set_tier(plan::HOST);
  b.plan().mutable_tensors(int(host))->set_offset(64);
  b.write(dir / "a.strata");
  EXPECT_EQ(loadError(dir / "a.strata"),
            "plan: activation tensor " + std::to_string(host) +
                " lies outside the planned host arena of 0 bytes (a "
                "damaged plan.pb? recompile the model)");
  memory.set_host_activation_bytes(1 << 20);
  b.write(dir / "b.strata");
  EXPECT_EQ(loadError(dir / "b.strata"),
            "plan: program 'forward' instruction 0 (graph.linear) reads or "
            "writes 'logits', which lives on the HOST tier; only moves may "
            "(a damaged plan.pb? recompile the model)");
}

TEST(ExecutorTest, RejectsDamagedParamsBin) {
  TempDir dir;
  std::string path = writeLinearClassifier(dir / "a.strata");
  {
    std::fstream f(path + "/params.bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put('\x7f');
  }
  EXPECT_EQ(loadError(path), "'" + path +
                                 "/params.bin' section 0 does not match its "
                                 "checksum in plan.pb");
}

TEST(ExecutorTest, RejectsATensorIdUsedTwice) {
  TempDir dir;
  PlanBuilder b = linearClassifier();
  b.plan().mutable_tensors(3)->set_id(2);
  b.write(dir / "a.strata");
  EXPECT_EQ(loadError(dir / "a.strata"),
            "plan: tensor 2 is defined twice (a damaged plan.pb? recompile the model)");
}

TEST(ExecutorTest, RejectsADamagedPlan) {
  // Any byte of plan.pb changed: refused by its checksum before anything
  // in it is used (one bit flip once trained different numbers, silently).
  TempDir dir;
  std::string path = writeLinearClassifier(dir / "a.strata");
  std::string bytes;
  {
    std::ifstream in(path + "/plan.pb", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t at : {size_t(0) + 20, bytes.size() / 2, bytes.size() - 11}) {
    std::string flipped = bytes;
    flipped[at] = char(flipped[at] ^ 0x10);
    {
      std::ofstream out(path + "/plan.pb", std::ios::binary | std::ios::trunc);
      out.write(flipped.data(), std::streamsize(flipped.size()));
    }
    std::string error = loadError(path);
    EXPECT_TRUE(error == "'" + path + "/plan.pb' does not match its checksum "
                                      "(damaged; recompile the model)" ||
                error == "'" + path + "/plan.pb' is not a valid plan "
                                      "(truncated or not written by "
                                      "strata-compile)")
        << "byte " << at << ": " << error;
  }
}

TEST(ExecutorTest, RejectsWrappingOffsetsAndUnboundedCounts) {
  {
    // An offset of 2^64 - 1 wrapped past the bounds check and crashed in
    // the first copy.
    TempDir dir;
    PlanBuilder b = linearClassifier();
    b.plan().mutable_parameters(0)->set_offset(UINT64_MAX);
    b.write(dir / "a.strata");
    EXPECT_EQ(loadError(dir / "a.strata"),
              "plan: parameter 'w' lies outside its params.bin section");
  }
  {
    // Accumulation 2^32 - 1 ran for hours.
    TempDir dir;
    PlanBuilder b = linearClassifier();
    b.plan().mutable_training()->set_accum(UINT32_MAX);
    b.write(dir / "a.strata");
    EXPECT_EQ(loadError(dir / "a.strata"),
              "plan: accumulation 4294967295 is over 1048576 (a damaged plan.pb? recompile the model)");
  }
  {
    // A kernel reading an SSD-tier tensor (no memory behind it) crashed
    // in the optimizer's kernel.
    TempDir dir;
    PlanBuilder b = linearClassifier();
    b.plan().mutable_tensors(2)->set_tier(plan::SSD);
    b.write(dir / "a.strata");
    std::string error = loadError(dir / "a.strata");
    EXPECT_NE(error.find("which lives on the SSD tier; only moves may"),
              std::string::npos)
        << error;
  }
  {
    // An input bound to an activation: the program would overwrite what
    // the runtime fed (an embedding then gathered garbage indices).
    TempDir dir;
    PlanBuilder b = linearClassifier();
    uint32_t labels = b.program("micro_step").inputs(1).tensor();
    b.plan().mutable_tensors(int(labels))->set_kind(plan::ACTIVATION);
    b.write(dir / "a.strata");
    EXPECT_EQ(loadError(dir / "a.strata"),
              "plan: program 'micro_step' input 'labels' is bound to an "
              "activation (a damaged plan.pb? recompile the model)");
  }
}

namespace {

/// The linear classifier with its micro_step spread over two streams: each
/// kernel at an odd position on stream 1, waiting for the one before it (a
/// chain, as strata-insert-events would make it for this dataflow), and
/// stream 1 joined into stream 0 at the end, as codegen ends a program.
/// `kernelIndex` gets each kernel's instruction number.
PlanBuilder twoStreamClassifier(const LinearClassifierOptions &o = {},
                                std::vector<int> *kernelIndex = nullptr) {
  PlanBuilder b = linearClassifier(o);
  for (auto &program : *b.plan().mutable_programs()) {
    if (program.name() != "micro_step")
      continue;
    program.add_streams("compute");
    program.add_streams("other");
    std::vector<plan::Instruction> kernels(program.instructions().begin(),
                                           program.instructions().end());
    program.clear_instructions();
    uint32_t events = 0;
    auto event = [&](plan::InstructionKind kind, uint32_t stream,
                     uint32_t id) {
      plan::Instruction *inst = program.add_instructions();
      inst->set_kind(kind);
      inst->set_stream(stream);
      inst->set_event(id);
    };
    for (size_t i = 0; i < kernels.size(); ++i) {
      uint32_t stream = uint32_t(i % 2);
      if (i > 0) {
        event(plan::RECORD, 1 - stream, events);
        event(plan::WAIT, stream, events++);
      }
      if (kernelIndex)
        kernelIndex->push_back(program.instructions_size());
      *program.add_instructions() = kernels[i];
      program.mutable_instructions(program.instructions_size() - 1)
          ->set_stream(stream);
    }
    event(plan::RECORD, 1, events);
    event(plan::WAIT, 0, events++);
    program.set_events(events);
  }
  return b;
}

std::vector<float> trainSteps(Executor &e, int steps) {
  std::vector<float> losses;
  for (int s = 1; s <= steps; ++s) {
    fillBatch(e);
    e.zeroGradients();
    EXPECT_TRUE(e.run("micro_step", uint64_t(s)).isOk());
    losses.push_back(e.findOutput("strata.loss")->as<float>()[0]);
    setOptimizerInputs(e, 0.1, s);
    EXPECT_TRUE(e.run("optimizer_step").isOk());
  }
  return losses;
}

} // namespace

TEST(ExecutorTest, StreamsRunConcurrentlyAndAgreeWithOneStream) {
  TempDir dir;
  auto one = load(writeLinearClassifier(dir / "one.strata"));
  PlanBuilder b = twoStreamClassifier();
  b.write(dir / "two.strata");
  auto two = load(dir / "two.strata");
  ASSERT_TRUE(one && two);
  EXPECT_EQ(trainSteps(*one, 4), trainSteps(*two, 4));
  EXPECT_EQ(two->getStreamNames("micro_step"),
            (std::vector<std::string>{"compute", "other"}));
  // After the first step, neither the streams nor their threads allocate.
  EXPECT_EQ(two->getLastRunAllocations(), 0u);
}

TEST(ExecutorTest, AFailureOnAnotherStreamEndsTheRunWithItsMessage) {
  TempDir dir;
  std::vector<int> kernels;
  PlanBuilder b = twoStreamClassifier({}, &kernels);
  // The second kernel (on stream 1) names a kernel attribute it lacks.
  plan::Program *step = nullptr;
  for (auto &program : *b.plan().mutable_programs())
    if (program.name() == "micro_step")
      step = &program;
  ASSERT_TRUE(step);
  ASSERT_GE(kernels.size(), 2u);
  int second = kernels[1];
  step->mutable_instructions(second)->set_op("graph.cross_entropy");
  step->mutable_instructions(second)->clear_attributes();
  b.write(dir / "bad.strata");
  auto e = load(dir / "bad.strata");
  ASSERT_TRUE(e);
  fillBatch(*e);
  Status s = e->run("micro_step");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("micro_step instruction " +
                             std::to_string(second) + ", graph.cross_entropy"),
            std::string::npos)
      << s.message();
  // The executor is usable again: the threads did not hang.
  s = e->run("micro_step");
  EXPECT_FALSE(s.isOk());
}

TEST(ExecutorTest, RejectsAWaitWithNoEarlierRecord) {
  TempDir dir;
  PlanBuilder b = twoStreamClassifier();
  // The first wait (instruction 2, of event 0) moved before its record.
  for (auto &program : *b.plan().mutable_programs())
    if (program.name() == "micro_step") {
      ASSERT_EQ(program.instructions(2).kind(), plan::WAIT);
      program.mutable_instructions()->SwapElements(1, 2);
    }
  b.write(dir / "a.strata");
  EXPECT_EQ(loadError(dir / "a.strata"),
            "plan: micro_step instruction 1 waits for event 0, which no "
            "earlier instruction of another stream records");
}

TEST(ExecutorTest, RejectsAnEventOutOfRange) {
  TempDir dir;
  PlanBuilder b = twoStreamClassifier();
  for (auto &program : *b.plan().mutable_programs())
    if (program.name() == "micro_step")
      program.mutable_instructions(1)->set_event(program.events());
  b.write(dir / "a.strata");
  std::string error = loadError(dir / "a.strata");
  EXPECT_NE(error.find("plan: micro_step instruction 1 names event"),
            std::string::npos)
      << error;
}

namespace {

std::unique_ptr<Executor> loadQueued(const std::string &dir) {
  std::unique_ptr<Artifact> artifact;
  Status s = Artifact::load(dir, artifact);
  EXPECT_TRUE(s.isOk()) << s.message();
  if (!s)
    return nullptr;
  std::unique_ptr<Executor> executor;
  s = Executor::create(*artifact, createQueueModelDevice(getCpuKernels()),
                       executor, ExecutorOptions());
  EXPECT_TRUE(s.isOk()) << s.message();
  return executor;
}

} // namespace

TEST(ExecutorTest, QueuedRunsStageInputsAndAgreeWithTheCpu) {
  TempDir dir;
  PlanBuilder b = twoStreamClassifier();
  b.write(dir / "two.strata");
  auto cpu = load(dir / "two.strata");
  auto queued = loadQueued(dir / "two.strata");
  ASSERT_TRUE(cpu && queued);
  // Inputs and outputs are host buffers of their own, not device memory.
  EXPECT_TRUE(queued->findInput("strata.lr")->onHost);
  EXPECT_EQ(trainSteps(*cpu, 4), trainSteps(*queued, 4));
  // State comes out through copies, equal to the threads' run.
  auto cpuStates = statesByName(*cpu), queuedStates = statesByName(*queued);
  ASSERT_EQ(cpuStates.size(), queuedStates.size());
  for (auto &[name, state] : cpuStates) {
    std::vector<unsigned char> a(state.view->bytes()), q(a.size());
    ASSERT_TRUE(cpu->readState(state, a.data()));
    ASSERT_TRUE(queued->readState(queuedStates.at(name), q.data()));
    EXPECT_EQ(a, q) << name;
  }
}

TEST(ExecutorTest, TheQueueModelRunsAStreamOnlyWhenAWaitNeedsIt) {
  // Stream 0 writes 1 into x; stream 1 copies x into y. Without an event
  // stream 1 reads x before stream 0 has run: the model runs work as late
  // as its waits allow, so a missing event is a wrong answer.
  KernelRegistry kernels;
  kernels.add("test.one", [](KernelContext &ctx) {
    ctx.outputs[0].as<float>()[0] = 1.0f;
    return Status::ok();
  });
  kernels.add("test.copy", [](KernelContext &ctx) {
    ctx.outputs[0].as<float>()[0] = ctx.inputs[0].as<float>()[0];
    return Status::ok();
  });
  for (bool withEvent : {false, true}) {
    std::unique_ptr<Device> d = createQueueModelDevice(kernels);
    void *block = nullptr;
    ASSERT_TRUE(d->allocate(MemoryKind::Device, 8, &block));
    TensorView x, y;
    x.data = block;
    y.data = static_cast<float *>(block) + 1;
    x.shape = y.shape = {1};
    ASSERT_TRUE(d->createQueues(2, 1));
    KernelAttrs attrs;
    std::vector<TensorView> none, xs{x}, ys{y};
    KernelContext write{none, xs, attrs}, copy{xs, ys, attrs};
    ASSERT_TRUE(d->launch(0, *kernels.lookup("test.one"), write));
    if (withEvent) {
      ASSERT_TRUE(d->record(0, 0));
      ASSERT_TRUE(d->wait(1, 0));
    }
    ASSERT_TRUE(d->launch(1, *kernels.lookup("test.copy"), copy));
    ASSERT_TRUE(d->synchronize(1));
    float out = -1;
    ASSERT_TRUE(d->copyToHost(&out, y.data, sizeof(out)));
    EXPECT_EQ(out, withEvent ? 1.0f : 0.0f) << "event " << withEvent;
    d->release(MemoryKind::Device, block);
  }
}

TEST(ExecutorTest, AQueuedKernelFailureIsReportedAtTheSynchronize) {
  KernelRegistry kernels;
  kernels.add("test.fail", [](KernelContext &) {
    return Status::error("test.fail: no");
  });
  std::unique_ptr<Device> d = createQueueModelDevice(kernels);
  ASSERT_TRUE(d->createQueues(1, 0));
  KernelAttrs attrs;
  std::vector<TensorView> none;
  KernelContext ctx{none, none, attrs};
  ASSERT_TRUE(d->launch(0, *kernels.lookup("test.fail"), ctx));
  Status s = d->synchronize(0);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "test.fail: no");
  // Reported once.
  EXPECT_TRUE(d->synchronize(0).isOk());
}

TEST(ExecutorTest, CapturedGraphsReplayTheSameSteps) {
  // The second run of each program is captured and every later run
  // replays it: the same losses as the threads, over two streams, with the
  // lr and step inputs changing under the graph, and dropout drawing each
  // run's mask (its seed is refreshed in device memory, not frozen).
  for (double dropout : {0.0, 0.25}) {
    TempDir dir;
    LinearClassifierOptions o;
    o.dropout = dropout;
    PlanBuilder b = twoStreamClassifier(o);
    b.write(dir / "two.strata");
    auto cpu = load(dir / "two.strata");
    std::unique_ptr<Artifact> artifact;
    ASSERT_TRUE(Artifact::load(dir / "two.strata", artifact));
    ExecutorOptions options;
    options.captureGraphs = true;
    std::unique_ptr<Executor> graphs;
    ASSERT_TRUE(Executor::create(*artifact,
                                 createQueueModelDevice(getCpuKernels()),
                                 graphs, options));
    ASSERT_TRUE(cpu && graphs);
    EXPECT_EQ(trainSteps(*cpu, 5), trainSteps(*graphs, 5));
    // Both programs captured at run 2 and replayed in runs 2-5.
    EXPECT_EQ(graphs->getGraphReplays(), 8u) << dropout;
  }
}

TEST(ExecutorTest, AQueuedFailureNamesTheProgramAndInstruction) {
  // A queued kernel fails when the queue runs, at the synchronize; the
  // message still names the program, the instruction, the op and its node.
  TempDir dir;
  std::vector<int> kernels;
  PlanBuilder b = twoStreamClassifier({}, &kernels);
  for (auto &program : *b.plan().mutable_programs())
    if (program.name() == "micro_step") {
      program.mutable_instructions(kernels[1])->set_op("graph.cross_entropy");
      program.mutable_instructions(kernels[1])->clear_attributes();
    }
  b.write(dir / "bad.strata");
  auto e = loadQueued(dir / "bad.strata");
  ASSERT_TRUE(e);
  fillBatch(*e);
  Status s = e->run("micro_step");
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind("micro_step instruction " +
                                  std::to_string(kernels[1]) +
                                  ", graph.cross_entropy (node '",
                              0),
            0u)
      << s.message();
}
