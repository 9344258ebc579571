//===- Evaluate.cpp - strata-run --eval: loss and accuracy on a dataset ---===//
//
// Runs the forward program over every sample of a dataset folder in order
// (no update) and scores the logits the training loss reads against the
// labels: the mean cross-entropy and the fraction whose largest logit is the
// label, both over the labels that are not --ignore-index (docs/data.md).
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Training.h"

#include "strata/Runtime/DataLoader.h"

#include "JsonText.h"

#include "plan.pb.h"

#include <cmath>
#include <cstdio>

namespace strata::runtime {

Evaluation::Evaluation(Executor &executor, const plan::Training &training)
    : executor_(executor), ignoreIndex_(training.ignore_index()) {}

Evaluation::~Evaluation() = default;

Status Evaluation::open(Executor &executor, const plan::Training &training,
                        const std::string &dir,
                        std::unique_ptr<Evaluation> &out) {
  if (training.loss() != "cross_entropy")
    return Status::error("--eval scores a classifier's logits against its "
                         "labels; this artifact trains the model's own "
                         "loss output");
  if (!executor.hasProgram("forward"))
    return Status::error("--eval needs the artifact's forward program, which "
                         "this one (a pipeline stage?) does not hold");
  // The loss reads --logits NAME, or the model's first output.
  std::vector<std::string> outputs = executor.getOutputNames("forward");
  std::string logitsName = training.logits_output();
  if (logitsName.empty() && !outputs.empty())
    logitsName = outputs.front();
  const TensorView *logits = executor.findOutput("forward", logitsName);
  if (!logits)
    return Status::error("the forward program has no output '" + logitsName +
                         "' (the loss's logits)");
  if ((logits->dtype != DType::F32 && logits->dtype != DType::F64) ||
      logits->rank() < 2)
    return Status::error("--eval reads f32 or f64 logits [B, ..., C]; '" +
                         logitsName + "' is " + logits->describe());
  auto highOf = [&](const std::string &name) {
    auto it = training.int_input_high().find(name);
    return it == training.int_input_high().end() ? int64_t(2) : it->second;
  };
  std::unique_ptr<Evaluation> e(new Evaluation(executor, training));
  e->dir_ = dir;
  e->logits_ = logits;
  std::vector<LoaderInput> inputs;
  for (const std::string &name : executor.getInputNames("forward"))
    inputs.push_back({name, executor.findInput(name), highOf(name)});
  // The labels, which the forward program does not read: logits' shape
  // without its last dimension.
  e->labels_.dtype = DType::I64;
  e->labels_.shape.assign(logits->shape.begin(), logits->shape.end() - 1);
  e->labelValues_.resize(size_t(e->labels_.numel()));
  e->labels_.data = e->labelValues_.data();
  inputs.push_back({"labels", &e->labels_, highOf("labels")});
  if (Status s = ArrayDataset::open(dir, inputs, training.ignore_index(),
                                    /*partial=*/false, e->dataset_);
      !s)
    return s;
  out = std::move(e);
  return Status::ok();
}

Status Evaluation::run(EvalResult &out) {
  const TensorView &logits = *logits_;
  uint64_t batch = uint64_t(logits.shape[0]);
  uint64_t perSample = uint64_t(labels_.numel()) / batch;
  int64_t classes = logits.shape.back();
  const ArrayDataset &dataset = *dataset_;
  out = EvalResult();
  out.samples = dataset.samples();
  double lossSum = 0;
  for (uint64_t start = 0; start < dataset.samples(); start += batch) {
    // The last batch repeats its last sample; those rows are not scored.
    uint64_t count = std::min(batch, dataset.samples() - start);
    for (uint64_t b = 0; b < batch; ++b)
      for (size_t i = 0; i < dataset.inputs(); ++i)
        dataset.copySample(i, start + std::min(b, count - 1), int64_t(b));
    if (Status s = executor_.run("forward"); !s)
      return Status::error("--eval, samples " + std::to_string(start) + "+: " +
                           s.message());
    for (uint64_t j = 0; j < count * perSample; ++j) {
      int64_t label = labelValues_[j];
      if (label == ignoreIndex_)
        continue;
      auto at = [&](int64_t c) {
        uint64_t i = j * uint64_t(classes) + uint64_t(c);
        return logits.dtype == DType::F32 ? double(logits.as<float>()[i])
                                          : logits.as<double>()[i];
      };
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c)
        if (at(c) > at(best))
          best = c;
      double most = at(best), sum = 0;
      for (int64_t c = 0; c < classes; ++c)
        sum += std::exp(at(c) - most);
      lossSum += most + std::log(sum) - at(label);
      out.correct += best == label;
      ++out.scored;
    }
  }
  if (out.scored == 0)
    return Status::error("dataset '" + dir_ + "' has no label to score (all "
                         "equal --ignore-index " +
                         std::to_string(ignoreIndex_) + ")");
  out.loss = lossSum / double(out.scored);
  out.accuracy = double(out.correct) / double(out.scored);
  return Status::ok();
}

std::string describeEval(const EvalResult &r, const std::string &dir) {
  char line[512];
  std::snprintf(line, sizeof(line),
                "eval %s: loss %.6f | accuracy %.4f (%llu of %llu labels) | "
                "%llu samples",
                dir.c_str(), r.loss, r.accuracy,
                static_cast<unsigned long long>(r.correct),
                static_cast<unsigned long long>(r.scored),
                static_cast<unsigned long long>(r.samples));
  return line;
}

std::string evalRecord(const EvalResult &r, const std::string &dir,
                       uint64_t step) {
  char line[256];
  std::snprintf(line, sizeof(line),
                ", \"after_step\": %llu, \"loss\": %.9g, \"accuracy\": "
                "%.9g, \"correct\": %llu, \"labels\": %llu, \"samples\": "
                "%llu}",
                static_cast<unsigned long long>(step), r.loss, r.accuracy,
                static_cast<unsigned long long>(r.correct),
                static_cast<unsigned long long>(r.scored),
                static_cast<unsigned long long>(r.samples));
  return "{\"eval\": " + jsonString(dir) + line;
}

} // namespace strata::runtime
