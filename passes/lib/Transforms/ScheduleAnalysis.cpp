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

LogicalResult collectAccesses(func::FuncOp func, std::vector<OpAccess> &out,
                              std::vector<std::string> &streams) {
  streams = {"compute"};
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
    auto offsets = def->getAttrOfType<DenseI64ArrayAttr>("memory.offsets");
    if (!offsets)
      return def->emitOpError("has no memory plan: run strata-plan-memory "
                              "before scheduling checks");
    int64_t offset = offsets[result.getResultNumber()];
    if (offset >= 0) {
      range = Range{0, offset, offset + bytes};
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
    if (isa<graph::ConstantOp>(op) || op.hasTrait<OpTrait::IsTerminator>())
      continue;
    auto stream = op.getAttrOfType<StringAttr>("sched.stream");
    if (!stream)
      return op.emitOpError("has no stream: run strata-schedule first");
    auto at = std::find(streams.begin(), streams.end(), stream.getValue());
    int index = int(at - streams.begin());
    if (at == streams.end())
      streams.push_back(stream.getValue().str());
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
                     const std::vector<std::string> &streams) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << access.op->getName() << "' (instruction " << id
     << " on stream " << streams[access.stream];
  std::string node = graph::onnxNodeName(access.op->getLoc());
  if (!node.empty())
    os << ", node " << node;
  os << ")";
  return s;
}

} // namespace strata::schedule
