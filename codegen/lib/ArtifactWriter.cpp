//===- ArtifactWriter.cpp - Graph IR to a training artifact ---------------===//

#include "strata/Codegen/ArtifactWriter.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Runtime/Artifact.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "plan.pb.h"

#include <fstream>

using namespace mlir;
using llvm::Error;
using llvm::Expected;

namespace strata::codegen {
namespace {

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

std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(inner))
        return name.getName().str();
  return "";
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

  Expected<uint32_t> addTensor(Value value, plan::TensorKind kind,
                               StringRef name) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    std::optional<plan::DType> dtype =
        type ? toPlanDType(type.getElementType()) : std::nullopt;
    if (!dtype || !type.hasStaticShape())
      return fail("codegen: value of type " + typeString(value.getType()) +
                  " has no artifact encoding");
    plan::Tensor *t = plan.add_tensors();
    uint32_t id = plan.tensors_size() - 1;
    t->set_id(id);
    t->set_name(name.str());
    t->set_dtype(*dtype);
    for (int64_t d : type.getShape())
      t->add_shape(d);
    t->set_kind(kind);
    ids[value] = id;
    return id;
  }

  Error addParameter(BlockArgument arg, plan::TensorKind kind, StringRef name) {
    Expected<uint32_t> id = addTensor(arg, kind, name);
    if (!id)
      return id.takeError();
    Expected<std::string> bytes = weights(name);
    if (!bytes)
      return bytes.takeError();
    auto type = cast<RankedTensorType>(arg.getType());
    unsigned width = type.getElementType().isInteger(1)
                         ? 1
                         : type.getElementType().getIntOrFloatBitWidth() / 8;
    size_t expected = static_cast<size_t>(type.getNumElements()) * width;
    if (bytes->size() != expected)
      return fail(llvm::formatv("codegen: initializer '{0}' has {1} bytes, "
                                "expected {2}",
                                name, bytes->size(), expected));
    // Each parameter starts 64-byte aligned in params.bin.
    params.resize((params.size() + 63) / 64 * 64, '\0');
    plan::Parameter *p = plan.add_parameters();
    p->set_tensor(*id);
    p->set_name(name.str());
    p->set_offset(params.size());
    p->set_size_bytes(bytes->size());
    params += *bytes;
    return Error::success();
  }

  static std::string typeString(Type type) {
    std::string s;
    llvm::raw_string_ostream os(s);
    type.print(os);
    return s;
  }

  plan::Plan &plan;
  const WeightSource &weights;
  llvm::DenseMap<Value, uint32_t> ids;
  std::string params;
};

Error buildPlan(func::FuncOp func, PlanBuilder &b) {
  for (BlockArgument arg : func.getArguments()) {
    auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  graph::kRoleAttrName);
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  graph::kNameAttrName);
    if (!role || !name)
      return fail("codegen: argument " + std::to_string(arg.getArgNumber()) +
                  " of @main has no graph.role / graph.name");
    if (role.getValue() == "input") {
      Expected<uint32_t> id = b.addTensor(arg, plan::INPUT, name.getValue());
      if (!id)
        return id.takeError();
      plan::Binding *binding = b.plan.add_inputs();
      binding->set_name(name.str());
      binding->set_tensor(*id);
    } else if (role.getValue() == "parameter" || role.getValue() == "buffer") {
      if (Error e = b.addParameter(arg,
                                   role.getValue() == "parameter"
                                       ? plan::PARAMETER
                                       : plan::BUFFER,
                                   name.getValue()))
        return e;
    } else {
      return fail("codegen: unknown argument role '" + role.str() + "'");
    }
  }

  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
        auto name = func.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
        plan::Binding *binding = b.plan.add_outputs();
        binding->set_name(name ? name.str() : "output" + std::to_string(i));
        binding->set_tensor(b.ids.lookup(value));
      }
      continue;
    }
    if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!dense)
        return fail("codegen: a constant is not dense");
      Expected<uint32_t> id = b.addTensor(constant, plan::CONSTANT, "");
      if (!id)
        return id.takeError();
      b.plan.mutable_tensors(*id)->set_constant_data(constantBytes(dense));
      continue;
    }
    if (!isa<graph::GraphDialect>(op.getDialect()))
      return fail("codegen: cannot lower '" + op.getName().getStringRef() +
                  "'");
    plan::Instruction *inst = b.plan.add_instructions();
    inst->set_op(op.getName().getStringRef().str());
    inst->set_location(locationName(op.getLoc()));
    for (Value operand : op.getOperands()) {
      auto it = b.ids.find(operand);
      if (it == b.ids.end())
        return fail("codegen: an operand of " + op.getName().getStringRef() +
                    " is not defined before it");
      inst->add_inputs(it->second);
    }
    for (Value result : op.getResults()) {
      Expected<uint32_t> id = b.addTensor(result, plan::ACTIVATION, "");
      if (!id)
        return id.takeError();
      inst->add_outputs(*id);
    }
    for (NamedAttribute attr : op.getAttrs())
      if (Error e = setAttribute(*inst->add_attributes(), attr, &op))
        return e;
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
  if (Error e = buildPlan(func, builder))
    return e;

  std::string ir;
  llvm::raw_string_ostream os(ir);
  module.print(os);
  os << options.optionsSummary << runtime::kFormatVersion;
  plan.set_fingerprint(llvm::formatv(
      "{0:x16}", runtime::fnv1a64(ir.data(), ir.size())).str());
  plan.set_params_size_bytes(builder.params.size());
  plan.set_params_checksum(
      runtime::fnv1a64(builder.params.data(), builder.params.size()));

  // Write beside the target, then swap it into place.
  std::string target = dir.str();
  std::string staging = target + ".tmp";
  llvm::sys::fs::remove_directories(staging);
  if (std::error_code ec = llvm::sys::fs::create_directories(staging))
    return fail("cannot create '" + staging + "': " + ec.message());
  std::string serialized;
  if (!plan.SerializeToString(&serialized))
    return fail("codegen: cannot serialize the plan");
  if (Error e = writeFile(staging + "/plan.pb", serialized))
    return e;
  if (Error e = writeFile(staging + "/params.bin", builder.params))
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
