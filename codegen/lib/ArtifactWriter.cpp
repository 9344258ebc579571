//===- ArtifactWriter.cpp - Graph IR to a training artifact ---------------===//

#include "strata/Codegen/ArtifactWriter.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Graph/IR/StateUpdates.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"
#include "strata/Runtime/Artifact.h"
#include "strata/Transforms/Layers.h"
#include "strata/Transforms/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "plan.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <fstream>
#include <set>

using namespace mlir;
using llvm::Error;
using llvm::Expected;

namespace strata::codegen {
namespace {

/// The FNV-1a hash of what is printed into it, kept as it streams: the
/// fingerprint of a module without its text in memory (a large model's
/// printed step ran to gigabytes, per --auto candidate).
class FingerprintStream : public llvm::raw_ostream {
public:
  FingerprintStream() { SetBufferSize(1 << 16); }
  ~FingerprintStream() override { flush(); }
  uint64_t hash() const { return state; }

private:
  void write_impl(const char *data, size_t size) override {
    state = runtime::fnv1a64(data, size, state);
    written += size;
  }
  uint64_t current_pos() const override { return written; }

  uint64_t state = 0xcbf29ce484222325ull;
  uint64_t written = 0;
};

Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

std::optional<plan::DType> toPlanDType(Type type) {
  if (type.isF32()) return plan::F32;
  if (type.isF64()) return plan::F64;
  if (type.isF16()) return plan::F16;
  if (type.isBF16()) return plan::BF16;
  if (type.isInteger(64)) return plan::I64;
  if (type.isInteger(32)) return plan::I32;
  if (type.isInteger(16)) return plan::I16;
  if (type.isInteger(8)) return plan::I8;
  if (type.isInteger(1)) return plan::I1;
  return std::nullopt;
}

/// Row-major little-endian bytes of a constant, i1 as one byte each.
std::string constantBytes(DenseElementsAttr attr) {
  auto type = cast<RankedTensorType>(attr.getType());
  int64_t count = type.getNumElements();
  if (type.getElementType().isInteger(1)) {
    std::string out;
    out.reserve(count);
    for (bool b : attr.getValues<bool>())
      out.push_back(b ? 1 : 0);
    return out;
  }
  ArrayRef<char> raw = attr.getRawData();
  if (!attr.isSplat())
    return std::string(raw.begin(), raw.end());
  std::string out;
  out.reserve(raw.size() * count);
  for (int64_t i = 0; i < count; ++i)
    out.append(raw.begin(), raw.end());
  return out;
}

Error setAttribute(plan::Attribute &out, NamedAttribute attr, Operation *op) {
  out.set_name(attr.getName().str());
  Attribute value = attr.getValue();
  if (auto i = dyn_cast<IntegerAttr>(value)) {
    out.set_int_value(i.getType().isInteger(1) ? i.getValue().getZExtValue()
                                               : i.getValue().getSExtValue());
  } else if (auto f = dyn_cast<FloatAttr>(value)) {
    out.set_float_value(f.getValueAsDouble());
  } else if (auto s = dyn_cast<StringAttr>(value)) {
    out.set_string_value(s.str());
  } else if (auto a = dyn_cast<DenseI64ArrayAttr>(value)) {
    for (int64_t v : a.asArrayRef())
      out.mutable_ints_value()->add_values(v);
  } else if (std::optional<StringRef> choice = graph::enumName(value)) {
    // An enumerated choice: the kernel reads its name.
    out.set_string_value(choice->str());
  } else {
    return fail("codegen: attribute '" + attr.getName().str() + "' of " +
                op->getName().getStringRef() + " has no artifact encoding");
  }
  return Error::success();
}

class PlanBuilder {
public:
  PlanBuilder(plan::Plan &plan, const WeightSource &weights)
      : plan(plan), weights(weights) {}

  /// A new tensor of `type`.
  Expected<uint32_t> newTensor(Type type, plan::TensorKind kind,
                               StringRef name) {
    auto ranked = dyn_cast<RankedTensorType>(type);
    std::optional<plan::DType> dtype =
        ranked ? toPlanDType(ranked.getElementType()) : std::nullopt;
    if (!dtype || !ranked.hasStaticShape())
      return fail("codegen: value of type " + typeString(type) +
                  " has no artifact encoding");
    plan::Tensor *t = plan.add_tensors();
    uint32_t id = plan.tensors_size() - 1;
    t->set_id(id);
    t->set_name(name.str());
    t->set_dtype(*dtype);
    for (int64_t d : ranked.getShape())
      t->add_shape(d);
    t->set_kind(kind);
    types.push_back(type);
    return id;
  }

  /// The tensor of a named input or persistent state, shared by every
  /// program; created on first use (a parameter or buffer then takes its
  /// initial value from the weights).
  Expected<uint32_t> sharedTensor(Type type, plan::TensorKind kind,
                                  StringRef name, int64_t shards = 1,
                                  ArrayRef<int64_t> fullShape = {}) {
    auto it = shared.find(name);
    if (it != shared.end()) {
      if (types[it->second] != type ||
          plan.tensors(it->second).kind() != kind)
        return fail("codegen: '" + name + "' has different types or roles "
                    "in two programs");
      return it->second;
    }
    Expected<uint32_t> id = newTensor(type, kind, name);
    if (!id)
      return id.takeError();
    shared[name] = *id;
    if (kind == plan::PARAMETER || kind == plan::BUFFER)
      if (Error e = addInitialValue(
              *id, type, name, shards,
              fullShape.empty() ? cast<RankedTensorType>(type).getShape()
                                : fullShape))
        return std::move(e);
    return *id;
  }

  /// With `shards` > 1 the tensor is one slice of the value: the value is
  /// zero-padded to `shards` slices and slice i goes to shard section i.
  /// Every shard section has the same layout, computed once: a value's
  /// offset is the same in each. A weightless artifact reads no value and
  /// lays out sizes only.
  Error addInitialValue(uint32_t id, Type type, StringRef name,
                        int64_t shards, ArrayRef<int64_t> fullShape) {
    auto ranked = cast<RankedTensorType>(type);
    unsigned width = ranked.getElementType().isInteger(1)
                         ? 1
                         : ranked.getElementType().getIntOrFloatBitWidth() / 8;
    size_t sliceBytes = static_cast<size_t>(ranked.getNumElements()) * width;
    size_t padded = sliceBytes * static_cast<size_t>(shards);
    std::string bytes;
    if (!weightless) {
      Expected<std::string> read = weights(name);
      if (!read)
        return read.takeError();
      bytes = std::move(*read);
      // A shard of s elements holds values of n elements,
      // (s - 1) P < n <= s P.
      bool fits = shards == 1 ? bytes.size() == padded
                              : bytes.size() <= padded &&
                                    bytes.size() > (sliceBytes - width) * shards;
      if (!fits)
        return fail(llvm::formatv("codegen: initializer '{0}' has {1} bytes, "
                                  "which does not fill {2} shards of {3}",
                                  name, bytes.size(), shards, sliceBytes));
      bytes.resize(padded, '\0');
    }
    plan::Parameter *p = plan.add_parameters();
    p->set_tensor(id);
    p->set_name(name.str());
    p->set_size_bytes(sliceBytes);
    for (int64_t d : fullShape)
      p->add_full_shape(d);
    // Each value starts 64-byte aligned in its section.
    auto align = [](uint64_t size) { return (size + 63) / 64 * 64; };
    if (shards == 1) {
      sharedSize = align(sharedSize);
      p->set_offset(sharedSize);
      sharedSize += sliceBytes;
      if (!weightless) {
        sharedSection.resize(p->offset(), '\0');
        sharedSection += bytes;
      }
      return Error::success();
    }
    if (shardCount && shardCount != shards)
      return fail("codegen: values sharded over different group sizes");
    shardCount = shards;
    p->set_shards(static_cast<uint32_t>(shards));
    shardSize = align(shardSize);
    p->set_offset(shardSize);
    shardSize += sliceBytes;
    if (!weightless) {
      shardSections.resize(shards);
      for (int64_t i = 0; i < shards; ++i) {
        std::string &section = shardSections[i];
        section.resize(p->offset(), '\0');
        section.append(bytes, i * sliceBytes, sliceBytes);
      }
    }
    return Error::success();
  }

  /// params.bin: the shared section, then one section per shard, each
  /// starting at a multiple of kParamsSectionAlign. A weightless artifact
  /// describes the sections (their checksums 0) and writes no bytes.
  std::string layOutParams() {
    std::string file;
    uint64_t size = 0;
    auto add = [&](uint64_t bytes, const std::string *data) {
      size = (size + runtime::kParamsSectionAlign - 1) /
             runtime::kParamsSectionAlign * runtime::kParamsSectionAlign;
      plan::ParamsSection *section = plan.add_params_sections();
      section->set_offset(size);
      section->set_size_bytes(bytes);
      if (data) {
        section->set_checksum(runtime::fnv1a64(data->data(), data->size()));
        file.resize(size, '\0');
        file += *data;
      }
      size += bytes;
    };
    add(sharedSize, weightless ? nullptr : &sharedSection);
    for (int64_t i = 0; i < shardCount; ++i)
      add(shardSize, weightless ? nullptr : &shardSections[i]);
    plan.set_params_size_bytes(size);
    return file;
  }

  static std::string typeString(Type type) {
    std::string s;
    llvm::raw_string_ostream os(s);
    type.print(os);
    return s;
  }

  plan::Plan &plan;
  const WeightSource &weights;
  /// Plan-only: no value is read and params.bin is not written.
  bool weightless = false;
  llvm::StringMap<uint32_t> shared;
  SmallVector<Type> types;
  /// params.bin's sections while they are built: values that are not
  /// sharded, and slice i of every sharded value (`shardCount` sections of
  /// one layout); their sizes, and their bytes unless weightless.
  uint64_t sharedSize = 0, shardSize = 0;
  int64_t shardCount = 0;
  std::string sharedSection;
  std::vector<std::string> shardSections;
};

std::optional<plan::TensorKind> stateKind(std::optional<graph::Role> role) {
  if (!role)
    return std::nullopt;
  switch (*role) {
  case graph::Role::Parameter: return plan::PARAMETER;
  case graph::Role::Buffer: return plan::BUFFER;
  case graph::Role::Gradient: return plan::GRADIENT;
  case graph::Role::OptimizerState: return plan::OPTIMIZER_STATE;
  default: return std::nullopt;
  }
}

plan::CollectiveGroup toPlanGroup(sched::Group group) {
  switch (group) {
  case sched::Group::Partition: return plan::PARTITION;
  case sched::Group::Replication: return plan::REPLICATION;
  case sched::Group::World: return plan::WORLD;
  case sched::Group::Inter: return plan::INTER;
  case sched::Group::Intra: return plan::INTRA;
  }
  return plan::NO_GROUP;
}

std::optional<sched::Group> groupOf(Operation *op) {
  if (auto group = op->getAttrOfType<sched::GroupAttr>("group"))
    return group.getValue();
  return std::nullopt;
}

/// graph.fused_elementwise's body as the kernels' `program` (five integers
/// per op: opcode, gradient kind, operand value numbers) and
/// `result_values` attributes.
Error encodeFusedBody(graph::FusedElementwiseOp fused, plan::Instruction &inst) {
  Block &body = fused.getBody().front();
  llvm::DenseMap<Value, int64_t> number;
  for (BlockArgument arg : body.getArguments())
    number[arg] = int64_t(arg.getArgNumber());
  plan::Attribute *program = inst.add_attributes();
  program->set_name("program");
  plan::IntList &code = *program->mutable_ints_value();
  for (Operation &op : body.without_terminator()) {
    std::optional<graph::FusedCode> c = graph::fusedCodeOf(&op);
    if (!c || op.getNumOperands() > 3)
      return fail("codegen: '" + op.getName().getStringRef() +
                  "' cannot run in a fused kernel");
    code.add_values(c->opcode);
    code.add_values(c->gradKind);
    for (unsigned k = 0; k < 3; ++k)
      code.add_values(k < op.getNumOperands() ? number.lookup(op.getOperand(k))
                                              : -1);
    int64_t next = int64_t(number.size());
    number[op.getResult(0)] = next;
  }
  plan::Attribute *results = inst.add_attributes();
  results->set_name("result_values");
  for (Value v : body.getTerminator()->getOperands())
    results->mutable_ints_value()->add_values(number.lookup(v));
  return Error::success();
}

/// Appends an event instruction.
void addEvent(plan::Program &program, plan::InstructionKind kind,
              uint32_t stream, uint32_t event) {
  plan::Instruction *inst = program.add_instructions();
  inst->set_kind(kind);
  inst->set_stream(stream);
  inst->set_event(event);
}

/// Lowers one function into one program. A result that updates persistent
/// state is computed straight into the state's tensor when that is safe (its
/// producer runs after every other read of the old value, and reads the old
/// value only elementwise); otherwise it is copied there at the end.
class ProgramLowering {
public:
  ProgramLowering(func::FuncOp func, plan::Program &program, PlanBuilder &b)
      : func(func), program(program), b(b) {}

  /// Gives every argument its shared tensor and binds the inputs.
  Error bindArguments() {
    for (BlockArgument arg : func.getArguments())
      if (Error e = bindArgument(arg))
        return e;
    return Error::success();
  }

  /// Names the program's streams and, with more than one, makes every other
  /// stream wait for stream 0 at the start.
  void openStreams() {
    if (auto list = func->getAttrOfType<ArrayAttr>(
            sched::SchedDialect::kStreamsAttrName))
      for (Attribute stream : list)
        streams.push_back(cast<sched::StreamAttr>(stream).getValue());
    for (sched::Stream stream : streams)
      program.add_streams(sched::stringifyStream(stream).str());
    // Events: each sched.record one, in block order; the program's opening
    // and closing events after them.
    if (streams.size() > 1) {
      uint32_t startEvent = events++;
      addEvent(program, plan::RECORD, 0, startEvent);
      for (uint32_t st = 1; st < streams.size(); ++st)
        addEvent(program, plan::WAIT, st, startEvent);
    }
  }

  /// Where each state-updating result goes: straight into the state's
  /// tensor, or copied there at the end (graph::findInPlaceStateUpdates).
  Error placeStateUpdates() {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    llvm::DenseMap<Value, StringRef> inPlace =
        graph::findInPlaceStateUpdates(func);
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      auto name = func.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
      std::optional<plan::TensorKind> kind =
          stateKind(graph::getResultRole(func, i));
      if (!kind)
        continue;
      Expected<uint32_t> target =
          b.sharedTensor(value.getType(), *kind, name.getValue());
      if (!target)
        return target.takeError();
      if (value == stateArgs.lookup(name.getValue()))
        continue; // Unchanged.
      auto it = inPlace.find(value);
      if (it != inPlace.end() && it->second == name.getValue())
        aliased[value] = *target;
      else
        copies.push_back({value, *target});
    }
    return Error::success();
  }

  /// Lowers one op of the body, in block order.
  Error lowerOp(Operation &op) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      bindOutputs(ret);
      return Error::success();
    }
    if (auto constant = dyn_cast<graph::ConstantOp>(op))
      return lowerConstant(constant);
    if (!isa<graph::GraphDialect, sched::SchedDialect>(op.getDialect()))
      return fail("codegen: cannot lower '" + op.getName().getStringRef() +
                  "'");
    Expected<uint32_t> stream = streamIndex(&op);
    if (!stream)
      return stream.takeError();
    if (auto record = dyn_cast<sched::RecordOp>(op)) {
      eventOf[record.getToken()] = events;
      addEvent(program, plan::RECORD, *stream, events++);
      return Error::success();
    }
    if (auto wait = dyn_cast<sched::WaitOp>(op)) {
      for (Value token : wait.getTokens())
        addEvent(program, plan::WAIT, *stream, eventOf.lookup(token));
      return Error::success();
    }
    if (isa<sched::SendOp, sched::RecvOp>(op))
      return lowerMessage(op, *stream);
    return lowerInstruction(op, *stream);
  }

  /// Joins every stream into stream 0, then copies the state updates that
  /// were not computed in place, in order.
  void close() {
    for (uint32_t st = 1; st < streams.size(); ++st) {
      addEvent(program, plan::RECORD, st, events);
      addEvent(program, plan::WAIT, 0, events++);
    }
    for (auto [value, target] : copies) {
      plan::Instruction *inst = program.add_instructions();
      inst->set_op("runtime.copy");
      inst->set_location("state update");
      inst->add_inputs(ids.lookup(value));
      inst->add_outputs(target);
    }
    program.set_events(events);
    program.set_seed_slots(seedSlots);
  }

private:
  Error bindArgument(BlockArgument arg) {
    std::optional<graph::Role> role =
        graph::getArgumentRole(func, arg.getArgNumber());
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  graph::kNameAttrName);
    if (!role || !name)
      return fail("codegen: argument " + std::to_string(arg.getArgNumber()) +
                  " of @" + func.getSymName() + " has no graph.role / graph.name");
    std::optional<plan::TensorKind> kind =
        role == graph::Role::Input ? plan::INPUT : stateKind(role);
    if (!kind)
      return fail("codegen: argument " + std::to_string(arg.getArgNumber()) +
                  " of @" + func.getSymName() + " has role " +
                  graph::stringifyRole(*role) + ", which no argument has");
    auto shards = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                     "graph.shards");
    auto fullShape = func.getArgAttrOfType<DenseI64ArrayAttr>(
        arg.getArgNumber(), "graph.full_shape");
    // A pipeline stage's program takes each micro-batch's inputs:
    // "input_ids#3".
    std::string bound = name.str();
    if (auto microBatch = func.getArgAttrOfType<IntegerAttr>(
            arg.getArgNumber(), sched::SchedDialect::kMicroBatchAttrName))
      bound += "#" + std::to_string(microBatch.getInt());
    Expected<uint32_t> id = b.sharedTensor(
        arg.getType(), *kind, bound, shards ? shards.getInt() : 1,
        fullShape ? fullShape.asArrayRef() : ArrayRef<int64_t>());
    if (!id)
      return id.takeError();
    switch (sched::getArgumentTier(func, arg.getArgNumber())) {
    case sched::Tier::Device:
      break;
    case sched::Tier::Host:
      b.plan.mutable_tensors(*id)->set_tier(plan::HOST);
      break;
    case sched::Tier::Ssd:
      b.plan.mutable_tensors(*id)->set_tier(plan::SSD);
      break;
    }
    ids[arg] = *id;
    if (*kind == plan::INPUT) {
      plan::Binding *binding = program.add_inputs();
      binding->set_name(bound);
      binding->set_tensor(*id);
    } else {
      stateArgs[name.getValue()] = arg;
    }
    return Error::success();
  }

  /// Binds the returned values that are not state updates as outputs.
  void bindOutputs(func::ReturnOp ret) {
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      auto name = func.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
      if (stateKind(graph::getResultRole(func, i)))
        continue;
      plan::Binding *binding = program.add_outputs();
      binding->set_name(name ? name.str() : "output" + std::to_string(i));
      binding->set_tensor(ids.lookup(value));
    }
  }

  Error lowerConstant(graph::ConstantOp constant) {
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense)
      return fail("codegen: a constant is not dense");
    Expected<uint32_t> id = b.newTensor(constant.getType(), plan::CONSTANT, "");
    if (!id)
      return id.takeError();
    ids[constant] = *id;
    b.plan.mutable_tensors(*id)->set_constant_data(constantBytes(dense));
    return Error::success();
  }

  Expected<uint32_t> streamIndex(Operation *op) {
    std::optional<sched::Stream> stream = sched::getStream(op);
    if (!stream)
      return 0u; // unscheduled: one stream
    auto at = llvm::find(streams, *stream);
    if (at == streams.end())
      return fail("codegen: stream " + sched::stringifyStream(*stream) +
                  " is not in @" + func.getSymName() + "'s sched.streams");
    return uint32_t(at - streams.begin());
  }

  /// A send to or receive from another pipeline stage.
  Error lowerMessage(Operation &op, uint32_t stream) {
    plan::Instruction *inst = program.add_instructions();
    auto send = dyn_cast<sched::SendOp>(op);
    auto recv = dyn_cast<sched::RecvOp>(op);
    inst->set_kind(send ? plan::SEND : plan::RECV);
    inst->set_op(op.getName().getStringRef().str());
    inst->set_location(graph::onnxNodeName(op.getLoc()));
    inst->set_stream(stream);
    inst->set_peer_stage(uint32_t(send ? send.getPeer() : recv.getPeer()));
    inst->set_tag(uint32_t(send ? send.getTag() : recv.getTag()));
    setAction(op, *inst);
    inst->set_micro_batch(
        uint32_t(send ? send.getMicroBatch() : recv.getMicroBatch()));
    if (Error e = addOperands(op, *inst))
      return e;
    return addResults(op, *inst);
  }

  /// One instruction for a graph or sched op that runs a kernel.
  Error lowerInstruction(Operation &op, uint32_t stream) {
    plan::Instruction *inst = program.add_instructions();
    inst->set_op(op.getName().getStringRef().str());
    inst->set_location(graph::onnxNodeName(op.getLoc()));
    inst->set_stream(stream);
    if (std::optional<sched::Group> group = groupOf(&op))
      inst->set_group(toPlanGroup(*group));
    if (isa<sched::AllGatherOp>(op))
      inst->set_collective(plan::ALL_GATHER);
    else if (isa<sched::ReduceScatterOp>(op))
      inst->set_collective(plan::REDUCE_SCATTER);
    else if (isa<sched::AllReduceOp>(op))
      inst->set_collective(plan::ALL_REDUCE);
    inst->set_delayable(op.hasAttr(sched::SchedDialect::kDelayableAttrName));
    setAction(op, *inst);
    if (Error e = setRandom(op, *inst))
      return e;
    if (Error e = addOperands(op, *inst))
      return e;
    if (Error e = addResults(op, *inst))
      return e;
    return addKernelAttributes(op, *inst);
  }

  /// A stage program's instruction: its action (strata-stage-programs
  /// marks it on the op's location); an op a later pass built without the
  /// mark takes the action of the instruction before it.
  void setAction(Operation &op, plan::Instruction &inst) {
    if (!func->hasAttr(sched::SchedDialect::kScheduleAttrName))
      return;
    if (std::optional<sched::Action> mark = sched::getAction(op.getLoc()))
      action = mark;
    if (!action)
      return;
    inst.set_phase(action->phase == 'F'   ? plan::FORWARD
                   : action->phase == 'B' ? plan::BACKWARD
                                          : plan::WEIGHT);
    inst.set_micro_batch(uint32_t(action->microBatch));
  }

  /// A random op's RNG stream and seed slot.
  Error setRandom(Operation &op, plan::Instruction &inst) {
    auto slot =
        op.getAttrOfType<IntegerAttr>(sched::SchedDialect::kSeedSlotAttrName);
    if (!slot)
      return Error::success();
    auto rng =
        op.getAttrOfType<IntegerAttr>(sched::SchedDialect::kRngStreamAttrName);
    if (!rng)
      return fail("codegen: " + op.getName().getStringRef() +
                  " has a seed slot but no RNG stream");
    inst.set_random(true);
    inst.set_rng_stream(uint64_t(rng.getInt()));
    inst.set_seed_slot(uint32_t(slot.getInt()));
    seedSlots = std::max<uint32_t>(seedSlots, uint32_t(slot.getInt()) + 1);
    return Error::success();
  }

  Error addOperands(Operation &op, plan::Instruction &inst) {
    for (Value operand : op.getOperands()) {
      auto it = ids.find(operand);
      if (it == ids.end())
        return fail("codegen: an operand of " + op.getName().getStringRef() +
                    " is not defined before it");
      inst.add_inputs(it->second);
    }
    return Error::success();
  }

  /// Each result's tensor: the state it updates in place, or a new
  /// activation at strata-plan-memory's offset when that pass ran.
  Error addResults(Operation &op, plan::Instruction &inst) {
    auto slots =
        op.getAttrOfType<ArrayAttr>(sched::SchedDialect::kSlotsAttrName);
    for (OpResult result : op.getResults()) {
      uint32_t id;
      if (auto it = aliased.find(result); it != aliased.end()) {
        id = it->second;
      } else {
        Expected<uint32_t> fresh =
            b.newTensor(result.getType(), plan::ACTIVATION, "");
        if (!fresh)
          return fresh.takeError();
        id = *fresh;
        if (slots) {
          auto slot =
              dyn_cast<sched::SlotAttr>(slots[result.getResultNumber()]);
          if (!slot)
            return fail("codegen: the memory plan puts a result of " +
                        op.getName().getStringRef() +
                        " in state storage, codegen does not");
          b.plan.mutable_tensors(id)->set_offset(uint64_t(slot.getOffset()));
          // A saved activation's host copy: in the host activation arena.
          if (sched::isHostActivation(result))
            b.plan.mutable_tensors(id)->set_tier(plan::HOST);
        }
      }
      ids[result] = id;
      inst.add_outputs(id);
    }
    return Error::success();
  }

  /// The attributes the kernel reads: the op's own, a fused body's program,
  /// and the exact-TF32 marker.
  Error addKernelAttributes(Operation &op, plan::Instruction &inst) {
    for (NamedAttribute attr : op.getAttrs()) {
      StringRef attrName = attr.getName().getValue();
      if (attrName.starts_with("sched.") ||
          isa<sched::GroupAttr, sched::TierAttr>(attr.getValue()) ||
          isa<sched::ReloadOp, sched::OffloadOp>(op))
        continue; // the plan's, not the kernel's (a move's tensors say it)
      // Which optional operands are there: the instruction's inputs list
      // them, and the op's own attributes say which (keep_probabilities).
      if (attrName == "operandSegmentSizes")
        continue;
      if (Error e = setAttribute(*inst.add_attributes(), attr, &op))
        return e;
    }
    // A fused body: its program, one instruction per op (FusedProgram.h).
    if (auto fused = dyn_cast<graph::FusedElementwiseOp>(op))
      if (Error e = encodeFusedBody(fused, inst))
        return e;
    // A product whose factors hold bf16 / fp16 values: TF32 is exact.
    if (auto narrow = op.getAttrOfType<TypeAttr>(
            sched::SchedDialect::kExactTf32AttrName)) {
      plan::Attribute *a = inst.add_attributes();
      a->set_name("operands_rounded_to");
      a->set_string_value(narrow.getValue().isBF16() ? "bf16" : "fp16");
    }
    return Error::success();
  }

  func::FuncOp func;
  plan::Program &program;
  PlanBuilder &b;
  llvm::DenseMap<Value, uint32_t> ids;
  /// The state arguments by name, to tell an unchanged state result.
  llvm::StringMap<BlockArgument> stateArgs;
  SmallVector<sched::Stream> streams;
  uint32_t events = 0, seedSlots = 0;
  /// The action of the last instruction that had one.
  std::optional<sched::Action> action;
  llvm::DenseMap<Value, uint32_t> eventOf;
  /// State-updating results computed straight into the state's tensor.
  llvm::DenseMap<Value, uint32_t> aliased;
  /// State-updating results copied into the state's tensor at the end.
  SmallVector<std::pair<Value, uint32_t>> copies;
};

/// Lowers one function into a program named `programName`.
Error buildProgram(func::FuncOp func, StringRef programName, PlanBuilder &b) {
  plan::Program &program = *b.plan.add_programs();
  program.set_name(programName.str());
  if (auto arena = func->getAttrOfType<sched::ArenaAttr>(
          sched::SchedDialect::kArenaAttrName)) {
    program.set_activation_bytes(uint64_t(arena.getSize()));
    program.set_activation_lower_bound(uint64_t(arena.getLive()));
    program.set_host_activation_bytes(uint64_t(arena.getHost()));
  }
  ProgramLowering lowering(func, program, b);
  if (Error e = lowering.bindArguments())
    return e;
  lowering.openStreams();
  if (Error e = lowering.placeStateUpdates())
    return e;
  for (Operation &op : func.getBody().front())
    if (Error e = lowering.lowerOp(op))
      return e;
  lowering.close();
  return Error::success();
}

/// For synthetic data: the exclusive upper bound of an integer input's
/// values, from the op that reads it.
int64_t integerInputHigh(func::FuncOp func, BlockArgument arg) {
  if (auto high = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                     "graph.int_high"))
    return high.getInt();
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    if (auto embedding = dyn_cast<graph::EmbeddingOp>(user))
      if (use.getOperandNumber() == 1)
        return embedding.getTable().getType().getDimSize(0);
    if (auto gather = dyn_cast<graph::GatherOp>(user))
      if (use.getOperandNumber() == 1)
        return gather.getInput().getType().getDimSize(gather.getAxis());
  }
  return 2;
}

void setTraining(const TrainingOptions &t, func::FuncOp step,
                 plan::Training &out) {
  out.set_optimizer(stringify(t.optimizer).str());
  out.set_lr(t.lr);
  out.set_weight_decay(t.resolvedWeightDecay());
  out.set_beta1(t.beta1);
  out.set_beta2(t.beta2);
  out.set_eps(t.eps);
  out.set_momentum(t.momentum);
  out.set_dampening(t.dampening);
  out.set_nesterov(t.nesterov);
  out.set_clip_norm(t.clipNorm);
  out.set_accum(t.accum);
  out.set_lr_schedule(stringify(t.lrSchedule).str());
  out.set_warmup_steps(t.warmupSteps);
  out.set_total_steps(t.totalSteps);
  out.set_min_lr_ratio(t.minLrRatio);
  out.set_dtype(stringify(t.dtype).str());
  out.set_ignore_index(t.ignoreIndex);
  out.set_logits_output(t.logits);
  out.set_loss_scale(t.dtype == Precision::FP16 ? t.lossScale : 1.0);
  out.set_loss("model");
  for (BlockArgument arg : step.getArguments()) {
    auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  graph::kNameAttrName);
    if (graph::getArgumentRole(step, arg.getArgNumber()) != graph::Role::Input)
      continue;
    auto type = cast<RankedTensorType>(arg.getType());
    if (out.batch() == 0 && type.getRank() > 0)
      out.set_batch(type.getDimSize(0));
    if (name.getValue() == "labels") {
      out.set_loss("cross_entropy");
      out.set_labels_input("labels");
    }
    if (type.getElementType().isSignlessInteger())
      (*out.mutable_int_input_high())[name.str()] = integerInputHigh(step, arg);
  }
}

/// The schedule the stage programs were built for, each stage's costs
/// and the bubble both schedules predict on them.
Error setPipeline(ModuleOp module, int64_t stages, int64_t microBatches,
                  plan::Pipeline &out) {
  std::vector<pipeline::StageCost> costs;
  for (int64_t s = 0; s < stages; ++s) {
    auto step =
        module.lookupSymbol<func::FuncOp>("pipeline_step_" + std::to_string(s));
    auto schedule = step ? step->getAttrOfType<StringAttr>(
                               sched::SchedDialect::kScheduleAttrName)
                         : StringAttr();
    auto cost = step ? step->getAttrOfType<DenseF64ArrayAttr>(
                           sched::SchedDialect::kStageCostAttrName)
                     : DenseF64ArrayAttr();
    if (!schedule || !cost)
      return fail("codegen: @pipeline_step_" + std::to_string(s) +
                  " has no sched.schedule / sched.stage_cost (run "
                  "strata-stage-programs)");
    out.set_schedule(schedule.str());
    costs.push_back({cost[0], cost[1], cost[2]});
  }
  out.set_micro_batches(uint32_t(microBatches));
  std::vector<pipeline::Timeline> timelines;
  for (pipeline::ScheduleKind kind :
       {pipeline::ScheduleKind::OneFOneB, pipeline::ScheduleKind::ZeroBubble})
    timelines.push_back(pipeline::simulate(
        kind, pipeline::buildSchedule(kind, microBatches, costs), costs));
  for (int64_t s = 0; s < stages; ++s) {
    plan::PipelineStage &stage = *out.add_stages();
    stage.set_forward_flops(costs[s].forward);
    stage.set_backward_flops(costs[s].backward);
    stage.set_weight_flops(costs[s].weight);
    stage.set_bubble_1f1b(timelines[0].bubble(size_t(s)));
    stage.set_bubble_zb(timelines[1].bubble(size_t(s)));
  }
  return Error::success();
}

Error writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
  out.close();
  if (!out)
    return fail("cannot write '" + path + "'");
  return Error::success();
}

} // namespace

Error writeArtifact(ModuleOp module, llvm::StringRef dir,
                    const WeightSource &weights,
                    const ArtifactOptions &options) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func)
    return fail("codegen: the module has no @main");

  plan::Plan plan;
  plan.set_magic(runtime::kPlanMagic);
  plan.set_format_version(runtime::kFormatVersion);
  if (auto name = module->getAttrOfType<StringAttr>("graph.model"))
    plan.set_model_name(name.str());
  PlanBuilder builder(plan, weights);
  builder.weightless = options.weightless;
  plan.set_weightless(options.weightless);
  if (Error e = buildProgram(func, "forward", builder))
    return e;
  auto step = module.lookupSymbol<func::FuncOp>("micro_step");
  auto update = module.lookupSymbol<func::FuncOp>("optimizer_step");
  auto pipeline = module->getAttrOfType<sched::PipelineAttr>(
      sched::SchedDialect::kPipelineAttrName);
  if (options.training && pipeline) {
    // One step and one optimizer program per stage; each rank runs its
    // stage's.
    for (int64_t s = 0; s < pipeline.getStages(); ++s) {
      std::string stepName = "pipeline_step_" + std::to_string(s);
      std::string updateName = "optimizer_step_" + std::to_string(s);
      auto stageStep = module.lookupSymbol<func::FuncOp>(stepName);
      auto stageUpdate = module.lookupSymbol<func::FuncOp>(updateName);
      if (!stageStep || !stageUpdate)
        return fail("codegen: a pipelined training artifact needs @" +
                    stepName + " and @" + updateName +
                    " (run strata-stage-programs)");
      if (Error e = buildProgram(stageStep, stepName, builder))
        return e;
      if (Error e = buildProgram(stageUpdate, updateName, builder))
        return e;
      setTraining(*options.training, stageStep, *plan.mutable_training());
    }
    if (Error e = setPipeline(module, pipeline.getStages(),
                              std::max<int64_t>(1, int64_t(options.training->accum)),
                              *plan.mutable_pipeline()))
      return e;
  } else if (options.training) {
    if (!step || !update)
      return fail("codegen: a training artifact needs @micro_step and "
                  "@optimizer_step (run strata-autodiff and strata-optimizer)");
    if (Error e = buildProgram(step, "micro_step", builder))
      return e;
    if (Error e = buildProgram(update, "optimizer_step", builder))
      return e;
    setTraining(*options.training, step, *plan.mutable_training());
  }
  if (options.topology && options.topology->world > 1) {
    plan::Topology &t = *plan.mutable_topology();
    t.set_world(options.topology->world);
    t.set_ranks_per_node(options.topology->ranksPerNode);
    t.set_partition(options.topology->partition);
    t.set_grad_sync(stringify(options.topology->gradSync).str());
    t.set_hierarchical(options.topology->hierarchical);
    t.set_bucket_bytes(options.topology->bucketBytes);
    t.set_pipeline_stages(pipeline ? uint32_t(pipeline.getStages()) : 1);
  }

  FingerprintStream os;
  module.print(os);
  os << options.optionsSummary << runtime::kFormatVersion;
  os.flush();
  plan.set_fingerprint(llvm::formatv("{0:x16}", os.hash()).str());
  if (options.training && !options.modelIdentity.empty())
    plan.set_model_fingerprint(
        llvm::formatv("{0:x16}",
                      runtime::fnv1a64(options.modelIdentity.data(),
                                       options.modelIdentity.size()))
            .str());
  std::string params = builder.layOutParams();
  if (auto planned = module->getAttrOfType<sched::MemoryPlanAttr>(
          sched::SchedDialect::kMemoryPlanAttrName)) {
    plan::MemoryPlan &memory = *plan.mutable_memory();
    memory.set_activation_bytes(planned.getArena());
    memory.set_host_activation_bytes(planned.getHostArena());
    memory.set_activation_lower_bound(planned.getLive());
    memory.set_page_size(planned.getPageSize());
    memory.set_alignment(64);
    // The runtime lays the persistent tensors and the constants end to end,
    // each 64-byte aligned (runtime/lib/Executor.cpp).
    uint64_t state = 0, constants = 0, host = 0, ssd = 0;
    for (const plan::Tensor &t : plan.tensors()) {
      if (t.kind() == plan::ACTIVATION)
        continue;
      uint64_t bytes = std::max<uint64_t>(runtime::tensorBytes(t), 1);
      uint64_t aligned = (bytes + 63) / 64 * 64;
      if (t.kind() == plan::CONSTANT)
        constants += aligned;
      else if (t.tier() == plan::HOST)
        host += aligned;
      else if (t.tier() == plan::SSD)
        ssd += (bytes + 4095) / 4096 * 4096;
      else
        state += aligned;
    }
    memory.set_state_bytes(state);
    memory.set_constant_bytes(constants);
    memory.set_host_bytes(host);
    memory.set_ssd_bytes(ssd);
    memory.set_gpu_budget(planned.getBudget());
    // What was made again in backward: @micro_step's clones; with pipeline
    // stages, the stage programs' (each op named once, not once a
    // micro-batch as the programs unroll it), and the checkpointed layers.
    SmallVector<func::FuncOp> programs;
    if (step)
      programs.push_back(step);
    else
      for (auto func : module.getOps<func::FuncOp>())
        if (func.getSymName().starts_with("pipeline_step_"))
          programs.push_back(func);
    double flops = 0;
    std::set<std::string> seen, layerNames;
    for (func::FuncOp program : programs) {
      program.walk([&](Operation *op) {
        if (!op->hasAttr(sched::SchedDialect::kRecomputedAttrName))
          return;
        std::string name = op->getName().getStringRef().str() + " (" +
                           graph::onnxNodeName(op->getLoc()) + ")";
        flops += forwardFlops(op);
        if (step || seen.insert(name).second)
          memory.add_recomputed(name);
      });
      if (auto layers = program->getAttrOfType<ArrayAttr>(
              sched::SchedDialect::kCheckpointedAttrName))
        for (auto name : layers.getAsValueRange<StringAttr>())
          if (layerNames.insert(name.str()).second)
            memory.add_checkpointed_layers(name.str());
    }
    // A stage program makes each clone again once a micro-batch; the
    // figure is a micro-step's (strata-inspect multiplies by the
    // accumulation).
    if (!step && options.training)
      flops /= double(std::max<int64_t>(1, int64_t(options.training->accum)));
    if (!programs.empty())
      memory.set_recomputed_flops(flops);
  }

  // Write beside the target, then swap it into place.
  std::string target = dir.str();
  std::string staging = target + ".tmp";
  llvm::sys::fs::remove_directories(staging);
  if (std::error_code ec = llvm::sys::fs::create_directories(staging))
    return fail("cannot create '" + staging + "': " + ec.message());
  std::string serialized;
  {
    // Deterministic: a map field (Training.int_input_high) is otherwise
    // written in hash order, so two compiles of one model differed.
    google::protobuf::io::StringOutputStream stream(&serialized);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!plan.SerializeToCodedStream(&coded))
      return fail("codegen: cannot serialize the plan");
  }
  // The checksum of everything before it, appended as the last field.
  serialized += runtime::planChecksumField(
      runtime::fnv1a64(serialized.data(), serialized.size()));
  if (Error e = writeFile(staging + "/plan.pb", serialized))
    return e;
  if (!options.weightless)
    if (Error e = writeFile(staging + "/params.bin", params))
      return e;
  if (options.extraFiles)
    if (Error e = options.extraFiles(staging))
      return e;
  std::string old = target + ".old";
  llvm::sys::fs::remove_directories(old);
  bool hadTarget = llvm::sys::fs::exists(target);
  if (hadTarget)
    if (std::error_code ec = llvm::sys::fs::rename(target, old))
      return fail("cannot replace '" + target + "': " + ec.message());
  if (std::error_code ec = llvm::sys::fs::rename(staging, target))
    return fail("cannot write '" + target + "': " + ec.message());
  if (hadTarget)
    llvm::sys::fs::remove_directories(old);
  return Error::success();
}

} // namespace strata::codegen
