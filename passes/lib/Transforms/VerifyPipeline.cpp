//===- VerifyPipeline.cpp - The stage programs' messages, proven ----------===//
//
// strata-verify-pipeline: the sends and receives of every @pipeline_step_<s>
// (then its @optimizer_step_<s>) replayed under the runtime's model (PipelineSchedule.h): each receive
// gets the message it expects, every message is received, no stage waits
// forever.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Sched/IR/SchedOps.h"

namespace strata {
#define GEN_PASS_DEF_VERIFYPIPELINEPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct VerifyPipelinePass
    : public strata::impl::VerifyPipelinePassBase<VerifyPipelinePass> {
  using VerifyPipelinePassBase::VerifyPipelinePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto pipelineAttr = module->getAttrOfType<sched::PipelineAttr>(
        sched::SchedDialect::kPipelineAttrName);
    if (!pipelineAttr)
      return;
    int64_t stages = pipelineAttr.getStages();
    std::vector<std::vector<pipeline::Message>> programs(stages);
    // A stage runs its step program, then its optimizer program (when
    // there is one).
    for (int64_t s = 0; s < stages; ++s) {
      std::string name = "pipeline_step_" + std::to_string(s);
      auto func = module.lookupSymbol<func::FuncOp>(name);
      if (!func) {
        module.emitError("strata-verify-pipeline: stage ")
            << s << " has no @" << name;
        return signalPassFailure();
      }
      SmallVector<func::FuncOp, 2> functions{func};
      if (auto update = module.lookupSymbol<func::FuncOp>(
              "optimizer_step_" + std::to_string(s)))
        functions.push_back(update);
      for (func::FuncOp function : functions)
        function.walk([&](Operation *op) {
          if (auto send = dyn_cast<sched::SendOp>(op))
            programs[s].push_back({true, send.getPeer(),
                                   send.getMicroBatch(), send.getTag()});
          else if (auto recv = dyn_cast<sched::RecvOp>(op))
            programs[s].push_back({false, recv.getPeer(),
                                   recv.getMicroBatch(), recv.getTag()});
        });
    }
    std::string problem = pipeline::verifyMessages(
        programs, [](int64_t tag) { return "value " + std::to_string(tag); });
    if (!problem.empty()) {
      module.emitError("strata-verify-pipeline: ") << problem;
      signalPassFailure();
    }
  }
};

} // namespace
