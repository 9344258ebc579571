//===- PipelineReport.cpp - strata-compile --emit=pipeline ----------------===//

#include "strata/Tools/PipelineReport.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"
#include "strata/Transforms/Layers.h"
#include "strata/Transforms/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"

using namespace mlir;

namespace strata {

namespace {

int64_t bytesOf(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  return tensor.getNumElements() *
         int64_t((tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

int64_t stageOf(Operation *op) {
  auto stage = op->getAttrOfType<IntegerAttr>(sched::SchedDialect::kStageAttrName);
  return stage ? stage.getInt() : -1;
}

std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

} // namespace

LogicalResult printPipelineReport(ModuleOp module, int64_t microBatches,
                                  llvm::raw_ostream &os) {
  auto pipeline = module->getAttrOfType<sched::PipelineAttr>(
      sched::SchedDialect::kPipelineAttrName);
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!pipeline || !main)
    return module.emitError("no pipeline stages: give --pipeline-stages 2 or "
                            "more");
  FailureOr<LayerMap> map = mapLayers(main);
  if (failed(map))
    return failure();
  int64_t stages = pipeline.getStages();
  ArrayRef<int64_t> cuts = pipeline.getBoundaries();
  int64_t layers = int64_t(map->layers.size());
  auto firstLayer = [&](int64_t s) { return s == 0 ? 0 : cuts[s - 1]; };
  auto endLayer = [&](int64_t s) { return s + 1 == stages ? layers : cuts[s]; };

  // Per stage: the parameters its ops read (a shared one on each stage that
  // reads it) and the cost of its ops.
  struct StageTotals {
    llvm::SetVector<Value> parameters;
    double flops = 0;
    int64_t activationBytes = 0;
  };
  std::vector<StageTotals> totals(stages);
  llvm::DenseMap<Value, llvm::SmallVector<int64_t>> parameterStages;
  Block &body = main.getBody().front();
  for (Operation &op : body.without_terminator()) {
    int64_t s = stageOf(&op);
    if (s < 0 || s >= stages || !map->layerOfOp.count(&op))
      continue;
    totals[s].flops += forwardFlops(&op);
    for (Value r : op.getResults())
      totals[s].activationBytes += bytesOf(r.getType());
    for (Value operand : op.getOperands()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      if (!arg || graph::getArgumentRole(main, arg.getArgNumber()) !=
                      graph::Role::Parameter)
        continue;
      if (totals[s].parameters.insert(arg))
        parameterStages[arg].push_back(s);
    }
  }

  os << "pipeline: " << stages << " stages over " << layers << " layers ("
     << map->layers.front().name << " .. " << map->layers.back().name
     << "), cut before layer";
  for (int64_t c : cuts)
    os << (c == cuts.front() ? " " : ", ") << c;
  os << "\n";
  os << "stage  layers                                   parameters"
        "   param bytes  forward MFLOP  activation bytes\n";
  for (int64_t s = 0; s < stages; ++s) {
    int64_t elements = 0, bytes = 0;
    for (Value p : totals[s].parameters) {
      auto type = cast<RankedTensorType>(p.getType());
      elements += type.getNumElements();
      bytes += bytesOf(type);
    }
    std::string names = map->layers[firstLayer(s)].name;
    if (endLayer(s) - firstLayer(s) > 1)
      names += " .. " + map->layers[endLayer(s) - 1].name;
    os << llvm::format("%5lld  %-40s %10lld  %12lld  %13.3f  %16lld\n",
                       (long long)s, names.c_str(), (long long)elements,
                       (long long)bytes, totals[s].flops / 1e6,
                       (long long)totals[s].activationBytes);
  }

  // A value computed on one stage and read on a later one is sent forward
  // over every cut in between (its gradient comes back the same way);
  // values that depend on no parameter are computed again where needed.
  os << "sent forward per micro-batch (their gradients return the same "
        "bytes):\n";
  for (int64_t cut = 0; cut + 1 < stages; ++cut) {
    int64_t count = 0, bytes = 0;
    std::string shapes;
    for (Operation &op : body.without_terminator()) {
      int64_t s = stageOf(&op);
      if (s > cut || !map->layerOfOp.count(&op))
        continue;
      for (Value r : op.getResults()) {
        bool crosses = llvm::any_of(r.getUsers(), [&](Operation *user) {
          return !isa<func::ReturnOp>(user) && stageOf(user) > cut;
        });
        if (!crosses)
          continue;
        ++count;
        bytes += bytesOf(r.getType());
        if (count <= 4)
          shapes += (count > 1 ? ", " : "") + typeString(r.getType());
      }
    }
    os << "  stage " << cut << " -> " << cut + 1 << ": " << count
       << (count == 1 ? " tensor, " : " tensors, ") << bytes << " bytes";
    if (count)
      os << " (" << shapes << (count > 4 ? ", ..." : "") << ")";
    os << "\n";
  }
  bool anyShared = false;
  for (BlockArgument arg : main.getArguments()) {
    auto it = parameterStages.find(arg);
    if (it == parameterStages.end() || it->second.size() < 2)
      continue;
    if (!anyShared)
      os << "parameters on several stages (their gradients are summed "
            "between them once per step):\n";
    anyShared = true;
    auto name =
        main.getArgAttrOfType<StringAttr>(arg.getArgNumber(), graph::kNameAttrName);
    os << "  " << (name ? name.getValue() : StringRef("?")) << ": stages";
    for (int64_t s : it->second)
      os << " " << s;
    os << "\n";
  }

  // The schedules on the forward FLOPs: a backward costs two forwards, its
  // input gradient and its weight gradient one each (matmul-bound layers).
  std::vector<pipeline::StageCost> costs;
  for (int64_t s = 0; s < stages; ++s)
    costs.push_back({totals[s].flops, totals[s].flops, totals[s].flops});
  os << "predicted bubble (idle time over the step, by stage) with "
     << microBatches << " micro-batches a step:\n";
  for (auto [kind, label] :
       {std::pair(pipeline::ScheduleKind::OneFOneB, "1f1b"),
        std::pair(pipeline::ScheduleKind::ZeroBubble, "zb  ")}) {
    pipeline::StageOrders orders =
        pipeline::buildSchedule(kind, microBatches, costs);
    std::string problem = pipeline::verifySchedule(kind, orders, microBatches);
    if (!problem.empty())
      return module.emitError("internal error: the ")
             << label << " schedule fails its check: " << problem;
    pipeline::Timeline timeline = pipeline::simulate(kind, orders, costs);
    os << "  " << label << " mean " << llvm::format("%.3f", timeline.meanBubble())
       << " (";
    for (int64_t s = 0; s < stages; ++s)
      os << (s ? " " : "") << llvm::format("%.3f", timeline.bubble(s));
    os << "), micro-batches in flight by stage:";
    for (int64_t s = 0; s < stages; ++s)
      os << " " << pipeline::peakInFlight(kind, orders[s]);
    os << "\n";
  }
  os << "  (1F1B on equal stages: (p-1)/(m+p-1) = "
     << llvm::format("%.3f", double(stages - 1) /
                                 double(microBatches + stages - 1))
     << ")\n";
  return success();
}

} // namespace strata
