//===- PipelineStages.cpp - Cut the forward graph into pipeline stages ----===//
//
// strata-pipeline: places every op of @main on a pipeline stage, cutting
// between layers (strata/Transforms/Layers.h) where the forward FLOPs are
// balanced or where --stage-boundaries says.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"
#include "strata/Transforms/Layers.h"

#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_PIPELINEPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct PipelinePass : public strata::impl::PipelinePassBase<PipelinePass> {
  using PipelinePassBase::PipelinePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stages <= 1 && boundaries.empty())
      return;
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("strata-pipeline: the module has no @main");
      return signalPassFailure();
    }
    if (module.lookupSymbol("micro_step")) {
      module.emitError("strata-pipeline: runs before strata-autodiff, but "
                       "@micro_step exists already");
      return signalPassFailure();
    }
    FailureOr<LayerMap> layers = mapLayers(main);
    if (failed(layers))
      return signalPassFailure();
    FailureOr<SmallVector<int64_t>> cuts = chooseBoundaries(main, *layers);
    if (failed(cuts))
      return signalPassFailure();

    Builder b(module.getContext());
    module->setAttr(sched::SchedDialect::kPipelineAttrName,
                    sched::PipelineAttr::get(module.getContext(), stages,
                                             *cuts));
    placeOps(main, *layers, *cuts);
  }

  /// --stage-boundaries checked against the model, or the balanced split.
  FailureOr<SmallVector<int64_t>> chooseBoundaries(func::FuncOp main,
                                                   const LayerMap &map) {
    int64_t count = int64_t(map.layers.size());
    unsigned stages = this->stages;
    std::string range = map.layers.front().name + " .. " +
                        map.layers.back().name;
    if (int64_t(stages) > count) {
      main.emitError("--pipeline-stages ")
          << stages << " needs at least " << stages
          << " layers to cut between; the model has " << count << " ("
          << range << ")";
      return failure();
    }
    if (boundaries.empty()) {
      SmallVector<double> costs;
      for (const LayerCost &layer : map.layers)
        costs.push_back(layer.flops);
      return balanceStages(costs, stages);
    }
    SmallVector<int64_t> cuts(boundaries.begin(), boundaries.end());
    if (int64_t(cuts.size()) != int64_t(stages) - 1) {
      main.emitError("--stage-boundaries gives ")
          << cuts.size() << " boundaries; " << stages << " stages need "
          << stages - 1;
      return failure();
    }
    for (size_t i = 0; i < cuts.size(); ++i)
      if (cuts[i] < 1 || cuts[i] >= count ||
          (i > 0 && cuts[i] <= cuts[i - 1])) {
        main.emitError("--stage-boundaries must be strictly increasing "
                       "layer indices in 1..")
            << count - 1 << " (the model's layers are " << range
            << "), got " << cuts[i];
        return failure();
      }
    return cuts;
  }

  /// sched.stage on every op of `main`: a placed op by its layer; an op that
  /// reads no parameter at the earliest stage among its users (the last
  /// stage when only the return reads it).
  void placeOps(func::FuncOp main, const LayerMap &map,
                ArrayRef<int64_t> cuts) {
    Builder b(main.getContext());
    auto stageOfLayer = [&](int64_t layer) {
      return int64_t(llvm::count_if(cuts, [&](int64_t c) { return c <= layer; }));
    };
    Block &body = main.getBody().front();
    DenseMap<Operation *, int64_t> stageOf;
    for (Operation &op : body.without_terminator())
      if (auto it = map.layerOfOp.find(&op); it != map.layerOfOp.end())
        stageOf[&op] = stageOfLayer(it->second);
    int64_t last = int64_t(stages) - 1;
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops)) {
      if (stageOf.count(op))
        continue;
      int64_t stage = last;
      for (Operation *user : op->getUsers())
        if (auto it = stageOf.find(user); it != stageOf.end())
          stage = std::min(stage, it->second);
      stageOf[op] = stage;
    }
    for (Operation *op : ops)
      op->setAttr(sched::SchedDialect::kStageAttrName,
                  b.getI64IntegerAttr(stageOf[op]));
  }
};

} // namespace
