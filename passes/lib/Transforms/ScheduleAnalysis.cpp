//===- ScheduleAnalysis.cpp - Who touches which bytes on which stream -----===//

#include "ScheduleAnalysis.h"

#include "ArenaPlanner.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace strata::schedule {
namespace {

bool overlap(const Range &a, const Range &b) {
  return a.region == b.region && a.begin < b.end && b.begin < a.end;
}

bool anyOverlap(ArrayRef<Range> a, ArrayRef<Range> b) {
  for (const Range &x : a)
    for (const Range &y : b)
      if (overlap(x, y))
        return true;
  return false;
}

} // namespace

bool conflict(const OpAccess &a, const OpAccess &b) {
  return anyOverlap(a.writes, b.reads) || anyOverlap(a.reads, b.writes) ||
         anyOverlap(a.writes, b.writes);
}

bool isInstruction(Operation *op) {
  return !isa<graph::ConstantOp, sched::RecordOp, sched::WaitOp>(op) &&
         !op->hasTrait<OpTrait::IsTerminator>();
}

LogicalResult collectAccesses(func::FuncOp func, std::vector<OpAccess> &out,
                              std::vector<sched::Stream> &streams) {
  streams = {sched::Stream::Compute};
  llvm::StringMap<int64_t> regions;
  auto regionOf = [&](StringRef name) {
    auto [it, inserted] = regions.try_emplace(name, int64_t(regions.size()) + 1);
    return it->second;
  };
  llvm::DenseMap<Value, llvm::StringRef> inState =
      graph::findInPlaceStateUpdates(func);
  auto rangeOf = [&](Value v, std::optional<Range> &range) -> LogicalResult {
    range.reset();
    int64_t bytes = std::max<int64_t>(memory::storageBytes(v.getType()), 1);
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    graph::kNameAttrName);
      range = Range{name ? regionOf(name.getValue())
                         : regionOf("arg" + std::to_string(arg.getArgNumber())),
                    0, bytes};
      return success();
    }
    auto result = cast<OpResult>(v);
    Operation *def = result.getOwner();
    if (isa<graph::ConstantOp>(def))
      return success(); // read-only
    auto slots =
        def->getAttrOfType<ArrayAttr>(sched::SchedDialect::kSlotsAttrName);
    if (!slots || slots.size() != def->getNumResults())
      return def->emitOpError("has no memory plan: run strata-plan-memory "
                              "before scheduling checks");
    if (auto slot = dyn_cast<sched::SlotAttr>(slots[result.getResultNumber()])) {
      range = Range{sched::isHostActivation(v) ? kHostArenaRegion : 0,
                    slot.getOffset(), slot.getOffset() + bytes};
      return success();
    }
    auto it = inState.find(v);
    if (it == inState.end())
      return def->emitOpError("has a result the memory plan puts in state "
                              "storage, but it updates no state");
    range = Range{regionOf(it->second), 0, bytes};
    return success();
  };
  for (Operation &op : func.getBody().front()) {
    if (!isInstruction(&op))
      continue;
    std::optional<sched::Stream> stream = sched::getStream(&op);
    if (!stream)
      return op.emitOpError("has no stream: run strata-schedule first");
    auto at = std::find(streams.begin(), streams.end(), *stream);
    int index = int(at - streams.begin());
    if (at == streams.end())
      streams.push_back(*stream);
    OpAccess access{&op, index, {}, {}};
    std::optional<Range> range;
    for (Value operand : op.getOperands()) {
      if (failed(rangeOf(operand, range)))
        return failure();
      if (range)
        access.reads.push_back(*range);
    }
    for (Value result : op.getResults()) {
      if (failed(rangeOf(result, range)))
        return failure();
      if (range)
        access.writes.push_back(*range);
    }
    out.push_back(std::move(access));
  }
  return success();
}

std::string describe(const OpAccess &access, int64_t id,
                     const std::vector<sched::Stream> &streams) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << access.op->getName() << "' (instruction " << id
     << " on stream " << sched::stringifyStream(streams[access.stream]);
  std::string node = graph::onnxNodeName(access.op->getLoc());
  if (!node.empty())
    os << ", node " << node;
  os << ")";
  return s;
}

} // namespace strata::schedule
