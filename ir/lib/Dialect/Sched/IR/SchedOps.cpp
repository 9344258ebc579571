//===- SchedOps.cpp - The sched dialect -----------------------------------===//

#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <queue>
#include <set>
#include <tuple>

using namespace mlir;
using namespace strata::sched;

#include "strata/Dialect/Sched/IR/SchedOpsDialect.cpp.inc"
#include "strata/Dialect/Sched/IR/SchedEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "strata/Dialect/Sched/IR/SchedAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "strata/Dialect/Sched/IR/SchedTypes.cpp.inc"

void SchedDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "strata/Dialect/Sched/IR/SchedOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "strata/Dialect/Sched/IR/SchedAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "strata/Dialect/Sched/IR/SchedTypes.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "strata/Dialect/Sched/IR/SchedOps.cpp.inc"

namespace strata::sched {

std::optional<Stream> getStream(Operation *op) {
  if (auto record = dyn_cast<RecordOp>(op))
    return record.getStream();
  if (auto wait = dyn_cast<WaitOp>(op))
    return wait.getStream();
  if (auto attr = op->getAttrOfType<StreamAttr>(SchedDialect::kStreamAttrName))
    return attr.getValue();
  return std::nullopt;
}

namespace {
constexpr llvm::StringLiteral kActionPrefix = "sched.action ";
} // namespace

Location withAction(Location loc, Action action) {
  MLIRContext *ctx = loc.getContext();
  auto mark = StringAttr::get(ctx, kActionPrefix + Twine(action.phase) +
                                       Twine(action.microBatch));
  // Keep the ONNX node's name one level down, where onnxNodeName looks.
  if (auto fused = dyn_cast<FusedLoc>(loc); fused && !fused.getMetadata())
    return FusedLoc::get(fused.getLocations(), mark, ctx);
  return FusedLoc::get({loc}, mark, ctx);
}

std::optional<Action> getAction(Location loc) {
  auto fused = dyn_cast<FusedLoc>(loc);
  if (!fused)
    return std::nullopt;
  if (auto mark = dyn_cast_or_null<StringAttr>(fused.getMetadata())) {
    StringRef text = mark.getValue();
    int64_t k;
    if (text.consume_front(kActionPrefix) && text.size() >= 2 &&
        !text.drop_front().getAsInteger(10, k))
      return Action{text.front(), k};
  }
  for (Location inner : fused.getLocations())
    if (std::optional<Action> action = getAction(inner))
      return action;
  return std::nullopt;
}

void setStream(Operation *op, Stream stream) {
  op->setAttr(SchedDialect::kStreamAttrName,
              StreamAttr::get(op->getContext(), stream));
}

Tier getArgumentTier(FunctionOpInterface func, unsigned index) {
  if (auto tier =
          func.getArgAttrOfType<TierAttr>(index, SchedDialect::kTierAttrName))
    return tier.getValue();
  return Tier::Device;
}

bool isHostActivation(Value value) {
  auto offload = value.getDefiningOp<OffloadOp>();
  return offload && offload.isActivation();
}

int64_t storageBytes(Type type) {
  auto t = cast<ShapedType>(type);
  Type element = t.getElementType();
  int64_t width =
      element.isInteger(1) ? 1 : (element.getIntOrFloatBitWidth() + 7) / 8;
  return t.getNumElements() * width;
}

} // namespace strata::sched

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult SlotAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t offset, int64_t size) {
  if (offset < 0 || size <= 0)
    return emitError() << "a slot needs an offset >= 0 and a size > 0, got <"
                       << offset << ", " << size << ">";
  return success();
}

LogicalResult ArenaAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t size, int64_t live, int64_t host) {
  if (size < 0 || live < 0 || live > size)
    return emitError() << "an arena's lower bound must lie in [0, size], got "
                          "size = "
                       << size << ", live = " << live;
  if (host < 0)
    return emitError() << "a host activation arena needs a size >= 0, got "
                       << host;
  return success();
}

LogicalResult
OffloadedAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      int64_t values, int64_t bytes, int64_t arenaBefore,
                      int64_t liveBefore, int64_t atPeak) {
  if (values < 0 || bytes < 0 || (values == 0) != (bytes == 0))
    return emitError() << "offloaded values and bytes must be >= 0 and both "
                          "0 or both positive, got values = "
                       << values << ", bytes = " << bytes;
  if (liveBefore < 0 || liveBefore > arenaBefore || atPeak < 0 ||
      atPeak > std::min(bytes, liveBefore))
    return emitError() << "an offload's arena before must hold its lower "
                          "bound, and the bytes at its peak be at most the "
                          "bytes moved and the lower bound, got "
                          "arena_before = "
                       << arenaBefore << ", live_before = " << liveBefore
                       << ", at_peak = " << atPeak;
  return success();
}

LogicalResult
PipelineAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     int64_t stages, ArrayRef<int64_t> boundaries) {
  if (stages < 1)
    return emitError() << "a pipeline needs at least one stage, got "
                       << stages;
  if (int64_t(boundaries.size()) != stages - 1)
    return emitError() << "a pipeline of " << stages << " stages needs "
                       << stages - 1 << " boundaries, got "
                       << boundaries.size();
  for (size_t i = 0; i < boundaries.size(); ++i)
    if (boundaries[i] < 1 || (i > 0 && boundaries[i] <= boundaries[i - 1]))
      return emitError() << "pipeline boundaries must be strictly increasing "
                            "layer indices above 0, got ["
                         << boundaries << "]";
  return success();
}

LogicalResult
MemoryPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       int64_t arena, int64_t live, int64_t pageSize,
                       int64_t alignment, int64_t device, int64_t host,
                       int64_t ssd, int64_t budget, int64_t hostArena) {
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    return emitError() << "the memory plan's alignment must be a power of "
                          "two, got "
                       << alignment;
  if (arena < 0 || live < 0 || live > arena || pageSize < 0 || device < 0 ||
      host < 0 || ssd < 0 || budget < 0 || hostArena < 0 || hostArena > host)
    return emitError() << "the memory plan's sizes must be >= 0, its lower "
                          "bound at most its arena and its host activation "
                          "arena at most its host bytes";
  return success();
}

//===----------------------------------------------------------------------===//
// The memory plan's checks
//===----------------------------------------------------------------------===//

namespace {

/// "result 1 of 'graph.add' (node /h.0/add)"
std::string describeResult(OpResult result) {
  std::string s = "result " + std::to_string(result.getResultNumber()) +
                  " of '" + result.getOwner()->getName().getStringRef().str() +
                  "'";
  std::string node = strata::graph::onnxNodeName(result.getOwner()->getLoc());
  if (!node.empty())
    s += " (node " + node + ")";
  return s;
}

LogicalResult verifySlots(Operation *op, Attribute attr) {
  auto slots = dyn_cast<ArrayAttr>(attr);
  if (!slots)
    return op->emitOpError("'") << SchedDialect::kSlotsAttrName
                                << "' must be an array of #sched.slot or unit";
  if (slots.size() != op->getNumResults())
    return op->emitOpError("has ")
           << slots.size() << " memory slots for " << op->getNumResults()
           << " results";
  for (auto [i, slot] : llvm::enumerate(slots)) {
    if (isa<UnitAttr>(slot))
      continue;
    auto s = dyn_cast<SlotAttr>(slot);
    if (!s)
      return op->emitOpError("memory slot ")
             << i << " is neither a #sched.slot nor unit";
    auto type = dyn_cast<ShapedType>(op->getResult(i).getType());
    if (!type || !type.hasStaticShape())
      return op->emitOpError("result ") << i << " has a slot but no static "
                                               "shape";
    int64_t bytes = storageBytes(type);
    if (s.getSize() < bytes)
      return op->emitOpError("result ")
             << i << " needs " << bytes << " bytes but its slot has "
             << s.getSize();
  }
  return success();
}

/// A value in the arena: where, and from its op to its last reader (block
/// positions, inclusive).
struct Placed {
  OpResult value;
  int64_t first, last, begin, end;
  bool host; // in the host activation arena, not the device one
};

/// Every arena value of `func` lies inside the arena, and no two that are
/// live at once share a byte, except where an in-place op writes its result
/// over an operand that dies there (graph::inPlaceOperand).
LogicalResult verifyArena(Operation *func, ArenaAttr arena) {
  if (func->getNumRegions() != 1 || func->getRegion(0).empty())
    return success();
  Block &body = func->getRegion(0).front();
  DenseMap<Operation *, int64_t> position;
  int64_t n = 0;
  for (Operation &op : body)
    position[&op] = n++;
  std::vector<Placed> placed;
  for (Operation &op : body) {
    if (op.getNumResults() == 0 || isa<strata::graph::ConstantOp>(op) ||
        op.hasTrait<OpTrait::IsTerminator>() ||
        llvm::all_of(op.getResultTypes(),
                     [](Type t) { return !isa<ShapedType>(t); }))
      continue;
    auto slots = op.getAttrOfType<ArrayAttr>(SchedDialect::kSlotsAttrName);
    if (!slots)
      return op.emitOpError("has no '")
             << SchedDialect::kSlotsAttrName
             << "' in a function with a memory plan";
    if (slots.size() != op.getNumResults())
      continue; // verifySlots reports it
    for (OpResult result : op.getResults()) {
      auto slot = dyn_cast<SlotAttr>(slots[result.getResultNumber()]);
      if (!slot)
        continue;
      int64_t end = slot.getOffset() + slot.getSize();
      bool host = isHostActivation(result);
      int64_t size = host ? arena.getHost() : arena.getSize();
      if (end > size)
        return op.emitOpError()
               << describeResult(result) << " lies at [" << slot.getOffset()
               << ", " << end << "), outside its function's "
               << (host ? "host activation arena of " : "arena of ") << size
               << " bytes";
      int64_t last = position[&op];
      for (Operation *user : result.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (top)
          last = std::max(last, position[top]);
      }
      placed.push_back(
          {result, position[&op], last, slot.getOffset(), end, host});
    }
  }
  // Sweep in order of birth; `live` holds the values not yet dead, by
  // (arena, first byte), so a new value is compared with those that could
  // share a byte (a first byte at most the largest value's size before its
  // own) rather than with every live value (quadratic in a deep model).
  std::stable_sort(placed.begin(), placed.end(),
                   [](const Placed &a, const Placed &b) {
                     return a.first < b.first;
                   });
  int64_t largest = 0;
  for (const Placed &p : placed)
    largest = std::max(largest, p.end - p.begin);
  using Key = std::tuple<bool, int64_t, size_t>; // host, begin, birth
  std::set<Key> live;
  using Death = std::pair<int64_t, size_t>; // last, birth
  std::priority_queue<Death, std::vector<Death>, std::greater<Death>> deaths;
  for (size_t k = 0; k < placed.size(); ++k) {
    const Placed &p = placed[k];
    while (!deaths.empty() && deaths.top().first < p.first) {
      const Placed &dead = placed[deaths.top().second];
      live.erase({dead.host, dead.begin, deaths.top().second});
      deaths.pop();
    }
    // The first live value (in order of birth) that overlaps p unsanctioned.
    size_t culprit = SIZE_MAX;
    for (auto it = live.lower_bound({p.host, p.begin - largest, 0});
         it != live.end() && std::get<0>(*it) == p.host &&
         std::get<1>(*it) < p.end;
         ++it) {
      const Placed &q = placed[std::get<2>(*it)];
      if (q.end <= p.begin || std::get<2>(*it) >= culprit)
        continue;
      // The one sanctioned overlap: p's op writes over q, which dies there.
      Operation *writer = p.value.getOwner();
      std::optional<unsigned> donor =
          strata::graph::inPlaceOperand(writer, p.value.getResultNumber());
      if (q.last == p.first && donor && *donor < writer->getNumOperands() &&
          writer->getOperand(*donor) == q.value)
        continue;
      culprit = std::get<2>(*it);
    }
    if (culprit != SIZE_MAX) {
      const Placed &q = placed[culprit];
      return p.value.getOwner()->emitOpError()
             << describeResult(p.value) << " at [" << p.begin << ", " << p.end
             << ") overlaps " << describeResult(q.value) << " at ["
             << q.begin << ", " << q.end
             << ") while both are live: the memory plan gives two live values "
                "the same bytes";
    }
    live.insert({p.host, p.begin, k});
    deaths.push({p.last, k});
  }
  return success();
}

} // namespace

LogicalResult SchedDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitOpError("'") << name << "' must be " << what;
  };
  if (name == kStreamAttrName)
    return expect(isa<StreamAttr>(value), "a #sched<stream ...>");
  if (name == kStreamsAttrName) {
    auto streams = dyn_cast<ArrayAttr>(value);
    if (!streams || !llvm::all_of(streams, llvm::IsaPred<StreamAttr>))
      return expect(false, "an array of #sched<stream ...>");
    for (size_t i = 0; i < streams.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (streams[i] == streams[j])
          return op->emitOpError("lists stream ")
                 << stringifyStream(cast<StreamAttr>(streams[i]).getValue())
                 << " twice in '"
                 << name << "'";
    return success();
  }
  if (name == kSlotsAttrName)
    return verifySlots(op, value);
  if (name == kArenaAttrName) {
    auto arena = dyn_cast<ArenaAttr>(value);
    if (!arena)
      return expect(false, "a #sched.arena");
    return verifyArena(op, arena);
  }
  if (name == kMemoryPlanAttrName)
    return expect(isa<MemoryPlanAttr>(value) && isa<ModuleOp>(op),
                  "a #sched.memory_plan on a module");
  if (name == kOffloadedAttrName)
    return expect(isa<OffloadedAttr>(value) && isa<FunctionOpInterface>(op),
                  "a #sched.offloaded on a function");
  if (name == kCheckpointedAttrName) {
    auto layers = dyn_cast<ArrayAttr>(value);
    return expect(layers && isa<FunctionOpInterface>(op) &&
                      llvm::all_of(layers, llvm::IsaPred<StringAttr>),
                  "an array of layer names on a function");
  }
  if (name == kRecomputedAttrName || name == kDelayableAttrName ||
      name == kBackwardAttrName)
    return expect(isa<UnitAttr>(value), "a unit attribute");
  if (name == kRngStreamAttrName) {
    auto integer = dyn_cast<IntegerAttr>(value);
    return expect(integer && integer.getType().isInteger(64),
                  "an i64 (the stream's 64 bits)");
  }
  if (name == kSeedSlotAttrName) {
    auto integer = dyn_cast<IntegerAttr>(value);
    return expect(integer && integer.getType().isInteger(64) &&
                      integer.getInt() >= 0,
                  "a non-negative i64");
  }
  if (name == kExactTf32AttrName) {
    auto type = dyn_cast<TypeAttr>(value);
    return expect(type && (type.getValue().isBF16() || type.getValue().isF16()),
                  "bf16 or f16: the narrow type both factors hold");
  }
  if (name == kPipelineAttrName)
    return expect(isa<PipelineAttr>(value) && isa<ModuleOp>(op),
                  "a #sched.pipeline on a module");
  if (name == kScheduleAttrName) {
    auto text = dyn_cast<StringAttr>(value);
    return expect(text && isa<FunctionOpInterface>(op) &&
                      (text.getValue() == "1f1b" || text.getValue() == "zb"),
                  "\"1f1b\" or \"zb\" on a function");
  }
  if (name == kStageCostAttrName) {
    auto costs = dyn_cast<DenseF64ArrayAttr>(value);
    return expect(costs && costs.size() == 3 && isa<FunctionOpInterface>(op) &&
                      llvm::all_of(costs.asArrayRef(),
                                   [](double c) { return c >= 0; }),
                  "array<f64: F, B, W> of non-negative costs on a function");
  }
  if (name == kStageAttrName) {
    auto integer = dyn_cast<IntegerAttr>(value);
    if (!integer || !integer.getType().isInteger(64) || integer.getInt() < 0)
      return expect(false, "a non-negative i64");
    auto module = op->getParentOfType<ModuleOp>();
    auto pipeline =
        module ? module->getAttrOfType<PipelineAttr>(kPipelineAttrName)
               : PipelineAttr();
    if (!pipeline)
      return op->emitOpError("has '")
             << name << "' but its module has no '" << kPipelineAttrName
             << "'";
    if (integer.getInt() >= pipeline.getStages())
      return op->emitOpError("runs on stage ")
             << integer.getInt() << " of a pipeline of "
             << pipeline.getStages() << " stages";
    return success();
  }
  return op->emitOpError("has unknown sched dialect attribute '")
         << name << "'";
}

LogicalResult SchedDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned region,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  if (attr.getName() == kTierAttrName) {
    if (!isa<TierAttr>(attr.getValue()))
      return op->emitOpError("argument ")
             << argIndex << ": '" << kTierAttrName
             << "' must be a #sched<tier ...>";
    return success();
  }
  if (attr.getName() == kMicroBatchAttrName) {
    auto integer = dyn_cast<IntegerAttr>(attr.getValue());
    if (!integer || !integer.getType().isInteger(64) || integer.getInt() < 0)
      return op->emitOpError("argument ")
             << argIndex << ": '" << kMicroBatchAttrName
             << "' must be a non-negative i64";
    return success();
  }
  return op->emitOpError("argument ")
         << argIndex << " has unknown sched dialect attribute '"
         << attr.getName().getValue() << "'";
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

namespace {

/// Communication reads its operands and has effects beyond its results (it
/// waits for the group), so it is neither CSE'd nor hoisted.
void collectiveEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  effects.emplace_back(MemoryEffects::Read::get());
  effects.emplace_back(MemoryEffects::Write::get());
}

enum class Sizes { Same, Gathered, Scattered };

/// Operand i and result i pair up; `sizes` says how their sizes relate, by
/// one group size G shared by every pair.
LogicalResult verifyCollective(Operation *op, Sizes sizes) {
  if (op->getNumOperands() == 0 ||
      op->getNumOperands() != op->getNumResults())
    return op->emitOpError("needs one result per operand and at least one");
  int64_t factor = 0;
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    auto in = cast<RankedTensorType>(op->getOperand(i).getType());
    auto out = cast<RankedTensorType>(op->getResult(i).getType());
    if (in.getElementType() != out.getElementType())
      return op->emitOpError("operand ")
             << i << " and its result have different element types";
    if (sizes == Sizes::Same) {
      if (in != out)
        return op->emitOpError("operand ")
               << i << " and its result have different types";
      continue;
    }
    if (in.getRank() != 1 || out.getRank() != 1)
      return op->emitOpError("operand ") << i << " and its result must be 1-D";
    int64_t big = sizes == Sizes::Gathered ? out.getDimSize(0)
                                           : in.getDimSize(0);
    int64_t small = sizes == Sizes::Gathered ? in.getDimSize(0)
                                             : out.getDimSize(0);
    if (small == 0 || big % small != 0)
      return op->emitOpError("operand ")
             << i << ": " << big << " elements are not a whole number of "
             << small << "-element shards";
    if (factor && big / small != factor)
      return op->emitOpError("operand ")
             << i << " implies a group of " << big / small << ", operand 0 of "
             << factor;
    factor = big / small;
  }
  return success();
}

} // namespace

void AllGatherOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}
void ReduceScatterOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}
void AllReduceOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}

LogicalResult AllGatherOp::verify() {
  if (Attribute attr = (*this)->getAttr("blocks")) {
    auto blocks = dyn_cast<IntegerAttr>(attr);
    if (!blocks || blocks.getInt() < 1)
      return emitOpError("'blocks' must be a positive integer");
    for (Value in : getInputs())
      if (cast<RankedTensorType>(in.getType()).getNumElements() %
              blocks.getInt() !=
          0)
        return emitOpError("an operand of ")
               << cast<RankedTensorType>(in.getType()).getNumElements()
               << " elements is not " << blocks.getInt() << " equal blocks";
  }
  return verifyCollective(*this, Sizes::Gathered);
}
LogicalResult ReduceScatterOp::verify() {
  return verifyCollective(*this, Sizes::Scattered);
}
LogicalResult AllReduceOp::verify() {
  return verifyCollective(*this, Sizes::Same);
}

LogicalResult LocalShardOp::verify() {
  auto in = getInput().getType(), out = getOutput().getType();
  if (in.getElementType() != out.getElementType() || in.getRank() != 1 ||
      out.getRank() != 1 || out.getDimSize(0) == 0 ||
      in.getDimSize(0) % out.getDimSize(0) != 0)
    return emitOpError("result must be a 1-D slice of the 1-D operand, a "
                       "whole number of times smaller, of its element type");
  return success();
}

void SendOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}
void RecvOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}

/// A send or receive names another stage of its pipeline.
static LogicalResult verifyPeer(Operation *op, int64_t peer,
                                int64_t microBatch, int64_t tag) {
  if (microBatch < 0 || tag < 0)
    return op->emitOpError("needs a non-negative micro_batch and tag, got ")
           << microBatch << " and " << tag;
  auto module = op->getParentOfType<ModuleOp>();
  auto pipeline =
      module ? module->getAttrOfType<PipelineAttr>(
                   SchedDialect::kPipelineAttrName)
             : PipelineAttr();
  if (!pipeline)
    return op->emitOpError("needs a module with '")
           << SchedDialect::kPipelineAttrName << "'";
  if (peer < 0 || peer >= pipeline.getStages())
    return op->emitOpError("names stage ")
           << peer << " of a pipeline of " << pipeline.getStages()
           << " stages";
  auto stage =
      op->getAttrOfType<IntegerAttr>(SchedDialect::kStageAttrName);
  if (!stage)
    return op->emitOpError("needs a '")
           << SchedDialect::kStageAttrName << "': the stage it runs on";
  if (peer == stage.getInt())
    return op->emitOpError("on stage ")
           << stage.getInt() << " names its own stage";
  return success();
}

LogicalResult SendOp::verify() {
  return verifyPeer(*this, getPeer(), getMicroBatch(), getTag());
}
LogicalResult RecvOp::verify() {
  return verifyPeer(*this, getPeer(), getMicroBatch(), getTag());
}

void ReloadOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}
void OffloadOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  collectiveEffects(e);
}

static LogicalResult verifyTier(Operation *op, Tier tier) {
  if (tier == Tier::Device)
    return op->emitOpError("moves between the device and host or ssd, not "
                           "device");
  return success();
}
LogicalResult ReloadOp::verify() {
  if (failed(verifyTier(*this, getTier())))
    return failure();
  if (!isActivation()) {
    if (!isa<BlockArgument>(getInput()))
      return emitOpError("reloads persistent state, a function argument; a "
                         "value an op computed is reloaded with "
                         "'activation' from its 'sched.offload activation'");
    return success();
  }
  auto offload = getInput().getDefiningOp<OffloadOp>();
  if (!offload || !offload.isActivation())
    return emitOpError("with 'activation' must read the result of a "
                       "'sched.offload activation'");
  if (offload.getTier() != getTier())
    return emitOpError("reloads from the ")
           << stringifyTier(getTier()) << " tier what was offloaded to the "
           << stringifyTier(offload.getTier()) << " tier";
  return success();
}

LogicalResult OffloadOp::verify() {
  if (failed(verifyTier(*this, getTier())))
    return failure();
  if (!isActivation())
    return success();
  if (getTier() != Tier::Host)
    return emitOpError("offloads activations to the host tier only, not ")
           << stringifyTier(getTier());
  if (isa<BlockArgument>(getInput()))
    return emitOpError("with 'activation' must copy a value an op computed, "
                       "not a function argument");
  for (Operation *user : getOutput().getUsers()) {
    auto reload = dyn_cast<ReloadOp>(user);
    if (!reload || !reload.isActivation())
      return emitOpError("with 'activation' has a result only "
                         "'sched.reload activation' may read, but '")
             << user->getName() << "' reads it";
  }
  return success();
}

LogicalResult WaitOp::verify() {
  if (getTokens().empty())
    return emitOpError("waits for no token");
  for (auto [i, token] : llvm::enumerate(getTokens())) {
    auto record = token.getDefiningOp<RecordOp>();
    if (!record)
      return emitOpError("token ")
             << i << " is not produced by a sched.record: the wait could "
                     "never complete";
    if (record.getStream() == getStream())
      return emitOpError("token ")
             << i << " was recorded on its own stream ("
             << stringifyStream(getStream())
             << "): a stream is ordered already, the wait does nothing";
  }
  return success();
}
