//===- TestArtifacts.h - Hand-built training artifacts for tests -*- C++ -*-===//
//
// Runtime tests cannot call the compiler, so they write plan.pb and
// params.bin themselves: PlanBuilder assembles a plan (tensors,
// programs, the Training message) and writes it with a correct checksum, and
// writeLinearClassifier() builds a small but complete training artifact from
// existing CPU kernels:
//
//   forward:        logits = linear(x, w)
//   micro_step:     xd, mask = dropout(x)       (RNG stream 7, seed slot 0)
//                   logits = linear(xd, w)
//                   strata.loss = cross_entropy(logits, labels)
//                   dlogits = cross_entropy_grad(one, logits, labels)
//                   grad:w = linear_grad_weight(dlogits, xd)   (accum 1), or
//                   g = linear_grad_weight(...); grad:w = add(grad:w, g)
//   optimizer_step: strata.grad_norm = sqrt(sum_squares(grad:w))
//                   w, momentum:w = sgd_update(w, grad:w, momentum:w,
//                                              strata.lr, strata.step, 1/A)
//                   steps = add(steps, one)        (a BUFFER, in place)
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_TESTS_TESTARTIFACTS_H
#define STRATA_RUNTIME_TESTS_TESTARTIFACTS_H

#include "TempDir.h"

#include "strata/Runtime/Artifact.h"

#include "plan.pb.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace strata::runtime::testing {

using strata::testing::TempDir;

inline plan::Attribute intAttr(const std::string &name, int64_t value) {
  plan::Attribute a;
  a.set_name(name);
  a.set_int_value(value);
  return a;
}
inline plan::Attribute floatAttr(const std::string &name, double value) {
  plan::Attribute a;
  a.set_name(name);
  a.set_float_value(value);
  return a;
}
inline plan::Attribute stringAttr(const std::string &name,
                                  const std::string &value) {
  plan::Attribute a;
  a.set_name(name);
  a.set_string_value(value);
  return a;
}

class PlanBuilder {
public:
  PlanBuilder() {
    plan_.set_magic(kPlanMagic);
    plan_.set_format_version(kFormatVersion);
    plan_.set_fingerprint("test-fingerprint");
    plan_.set_model_name("test");
  }

  uint32_t tensor(const std::string &name, plan::DType dtype,
                  std::vector<int64_t> shape,
                  plan::TensorKind kind = plan::ACTIVATION) {
    plan::Tensor *t = plan_.add_tensors();
    t->set_id(static_cast<uint32_t>(plan_.tensors_size() - 1));
    t->set_name(name);
    t->set_dtype(dtype);
    for (int64_t d : shape)
      t->add_shape(d);
    t->set_kind(kind);
    return t->id();
  }

  /// A PARAMETER or BUFFER whose initial value goes into params.bin.
  template <typename T>
  uint32_t persistent(const std::string &name, plan::DType dtype,
                      std::vector<int64_t> shape, const std::vector<T> &values,
                      plan::TensorKind kind = plan::PARAMETER) {
    uint32_t id = tensor(name, dtype, std::move(shape), kind);
    plan::Parameter *p = plan_.add_parameters();
    p->set_tensor(id);
    p->set_name(name);
    p->set_offset(params_.size());
    p->set_size_bytes(values.size() * sizeof(T));
    params_.append(reinterpret_cast<const char *>(values.data()),
                   values.size() * sizeof(T));
    return id;
  }

  template <typename T>
  uint32_t constant(const std::string &name, plan::DType dtype,
                    std::vector<int64_t> shape, const std::vector<T> &values) {
    uint32_t id = tensor(name, dtype, std::move(shape), plan::CONSTANT);
    plan_.mutable_tensors(id)->set_constant_data(
        std::string(reinterpret_cast<const char *>(values.data()),
                    values.size() * sizeof(T)));
    return id;
  }

  plan::Program &program(const std::string &name) {
    for (plan::Program &p : *plan_.mutable_programs())
      if (p.name() == name)
        return p;
    plan::Program *p = plan_.add_programs();
    p->set_name(name);
    return *p;
  }

  plan::Instruction &instruction(const std::string &programName,
                                 const std::string &op,
                                 std::vector<uint32_t> inputs,
                                 std::vector<uint32_t> outputs,
                                 std::vector<plan::Attribute> attrs = {}) {
    plan::Instruction *inst = program(programName).add_instructions();
    inst->set_op(op);
    for (uint32_t id : inputs)
      inst->add_inputs(id);
    for (uint32_t id : outputs)
      inst->add_outputs(id);
    for (plan::Attribute &a : attrs)
      *inst->add_attributes() = std::move(a);
    inst->set_location(op + "#" +
                       std::to_string(program(programName).instructions_size() - 1));
    return *inst;
  }

  void input(const std::string &programName, const std::string &name,
             uint32_t id) {
    plan::Binding *b = program(programName).add_inputs();
    b->set_name(name);
    b->set_tensor(id);
  }
  void output(const std::string &programName, const std::string &name,
              uint32_t id) {
    plan::Binding *b = program(programName).add_outputs();
    b->set_name(name);
    b->set_tensor(id);
  }

  plan::Plan &plan() { return plan_; }
  std::string &params() { return params_; }

  /// Writes `dir`/plan.pb (its checksum appended) and `dir`/params.bin
  /// (size and checksum filled in).
  void write(const std::string &dir) {
    std::filesystem::create_directories(dir);
    // One section: every value unsharded, offsets are file offsets.
    plan_.set_params_size_bytes(params_.size());
    plan_.clear_params_sections();
    plan::ParamsSection *section = plan_.add_params_sections();
    section->set_offset(0);
    section->set_size_bytes(params_.size());
    section->set_checksum(fnv1a64(params_.data(), params_.size()));
    // As codegen writes it: the checksum of the rest appended last.
    plan_.clear_plan_checksum();
    std::string serialized = plan_.SerializeAsString();
    serialized += planChecksumField(fnv1a64(serialized.data(), serialized.size()));
    std::ofstream planFile(dir + "/plan.pb", std::ios::binary);
    planFile.write(serialized.data(), std::streamsize(serialized.size()));
    std::ofstream paramsFile(dir + "/params.bin", std::ios::binary);
    paramsFile.write(params_.data(), static_cast<std::streamsize>(params_.size()));
  }

private:
  plan::Plan plan_;
  std::string params_;
};

/// The linear classifier of the file comment: x f32[B, 3], labels i64[B]
/// (5 classes), w f32[3, 5], SGD with momentum 0.9.
struct LinearClassifierOptions {
  int64_t batch = 4;
  uint32_t accum = 1;
  double dropout = 0.25;
  uint64_t totalSteps = 6;
  double lr = 0.1;
  std::string lrSchedule = "constant";
  uint64_t warmupSteps = 0;
  std::string fingerprint = "linear-classifier";
};

inline PlanBuilder linearClassifier(const LinearClassifierOptions &o = {}) {
  PlanBuilder b;
  b.plan().set_fingerprint(o.fingerprint);
  const int64_t batch = o.batch, features = 3, classes = 5;
  std::vector<float> w0;
  for (int64_t i = 0; i < features * classes; ++i)
    w0.push_back(0.1f * float(i % 7) - 0.3f);
  uint32_t x = b.tensor("x", plan::F32, {batch, features}, plan::INPUT);
  uint32_t labels = b.tensor("labels", plan::I64, {batch}, plan::INPUT);
  uint32_t w = b.persistent<float>("w", plan::F32, {features, classes}, w0);
  uint32_t steps = b.persistent<float>("steps", plan::F32, {1}, {0.0f},
                                       plan::BUFFER);
  uint32_t grad = b.tensor("grad:w", plan::F32, {features, classes},
                           plan::GRADIENT);
  uint32_t momentum = b.tensor("sgd.momentum_buffer:w", plan::F32,
                               {features, classes}, plan::OPTIMIZER_STATE);
  uint32_t one = b.constant<float>("one", plan::F32, {}, {1.0f});
  uint32_t oneVector = b.constant<float>("one_vector", plan::F32, {1}, {1.0f});
  uint32_t gradScale = b.constant<float>("grad_scale", plan::F32, {},
                                         {1.0f / float(o.accum)});

  // forward
  uint32_t logits = b.tensor("logits", plan::F32, {batch, classes});
  b.instruction("forward", "graph.linear", {x, w}, {logits});
  b.input("forward", "x", x);
  b.output("forward", "logits", logits);

  // micro_step
  uint32_t xd = b.tensor("x.dropped", plan::F32, {batch, features});
  uint32_t mask = b.tensor("x.mask", plan::I1, {batch, features});
  uint32_t loss = b.tensor("strata.loss", plan::F32, {});
  uint32_t dlogits = b.tensor("dlogits", plan::F32, {batch, classes});
  plan::Instruction &dropout =
      b.instruction("micro_step", "graph.dropout", {x}, {xd, mask},
                    {floatAttr("ratio", o.dropout)});
  if (o.dropout > 0) {
    // As strata-plan-execution decides for a random op.
    dropout.set_random(true);
    dropout.set_rng_stream(7);
    dropout.set_seed_slot(0);
    b.program("micro_step").set_seed_slots(1);
  }
  b.instruction("micro_step", "graph.linear", {xd, w}, {logits});
  b.instruction("micro_step", "graph.cross_entropy", {logits, labels}, {loss},
                {stringAttr("reduction", "mean")});
  b.instruction("micro_step", "graph.cross_entropy_grad",
                {one, logits, labels}, {dlogits},
                {stringAttr("reduction", "mean")});
  if (o.accum == 1) {
    b.instruction("micro_step", "graph.linear_grad_weight", {dlogits, xd},
                  {grad});
  } else {
    uint32_t partial = b.tensor("grad.partial", plan::F32, {features, classes});
    b.instruction("micro_step", "graph.linear_grad_weight", {dlogits, xd},
                  {partial});
    b.instruction("micro_step", "graph.add", {grad, partial}, {grad});
  }
  b.input("micro_step", "x", x);
  b.input("micro_step", "labels", labels);
  b.output("micro_step", "strata.loss", loss);

  // optimizer_step
  uint32_t lr = b.tensor("strata.lr", plan::F64, {}, plan::INPUT);
  uint32_t step = b.tensor("strata.step", plan::I64, {}, plan::INPUT);
  uint32_t squares = b.tensor("grad.squares", plan::F32, {});
  uint32_t norm = b.tensor("strata.grad_norm", plan::F32, {});
  b.instruction("optimizer_step", "graph.sum_squares", {grad}, {squares});
  b.instruction("optimizer_step", "graph.sqrt", {squares}, {norm});
  b.instruction("optimizer_step", "graph.sgd_update",
                {w, grad, momentum, lr, step, gradScale}, {w, momentum},
                {floatAttr("momentum", 0.9), floatAttr("dampening", 0.0),
                 floatAttr("weight_decay", 0.0), intAttr("nesterov", 0)});
  b.instruction("optimizer_step", "graph.add", {steps, oneVector}, {steps});
  b.input("optimizer_step", "strata.lr", lr);
  b.input("optimizer_step", "strata.step", step);
  b.output("optimizer_step", "strata.grad_norm", norm);

  plan::Training *t = b.plan().mutable_training();
  t->set_optimizer("sgd");
  t->set_lr(o.lr);
  t->set_momentum(0.9);
  t->set_accum(o.accum);
  t->set_lr_schedule(o.lrSchedule);
  t->set_warmup_steps(o.warmupSteps);
  t->set_total_steps(o.totalSteps);
  t->set_min_lr_ratio(0.1);
  t->set_dtype("fp32");
  t->set_loss("cross_entropy");
  t->set_labels_input("labels");
  t->set_ignore_index(-100);
  t->set_logits_output("logits");
  t->set_batch(static_cast<uint64_t>(batch));
  (*t->mutable_int_input_high())["labels"] = classes;
  return b;
}

/// Writes the linear classifier to `dir` and returns `dir`.
inline std::string writeLinearClassifier(const std::string &dir,
                                         const LinearClassifierOptions &o = {}) {
  linearClassifier(o).write(dir);
  return dir;
}

/// The whole of a file (empty when it cannot be read).
inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

/// The "loss" values of a JSONL step log, as printed.
inline std::vector<std::string> loggedLosses(const std::string &path) {
  std::vector<std::string> losses;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t at = line.find("\"loss\": ");
    if (at == std::string::npos)
      continue;
    at += 8;
    losses.push_back(line.substr(at, line.find(',', at) - at));
  }
  return losses;
}

} // namespace strata::runtime::testing

#endif // STRATA_RUNTIME_TESTS_TESTARTIFACTS_H
