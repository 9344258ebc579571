//===- GraphSummary.cpp - A readable summary of an imported graph ---------===//

#include "strata/Tools/GraphSummary.h"

#include "strata/Dialect/Graph/IR/GraphDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;

static std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

static int64_t byteSize(RankedTensorType type) {
  unsigned bits = type.getElementType().getIntOrFloatBitWidth();
  return type.getNumElements() * std::max(bits, 8u) / 8;
}

static std::string humanCount(int64_t n) {
  if (n >= 1000000000)
    return llvm::formatv("{0:F2}B", n / 1e9).str();
  if (n >= 1000000)
    return llvm::formatv("{0:F2}M", n / 1e6).str();
  if (n >= 1000)
    return llvm::formatv("{0:F1}K", n / 1e3).str();
  return std::to_string(n);
}

void strata::printGraphSummary(ModuleOp module, llvm::raw_ostream &os) {
  for (auto func : module.getOps<func::FuncOp>()) {
    os << "function @" << func.getName() << "\n";
    struct Arg {
      std::string name;
      RankedTensorType type;
    };
    std::map<graph::Role, std::vector<Arg>> byRole;
    for (BlockArgument arg : func.getArguments()) {
      std::optional<graph::Role> role =
          graph::getArgumentRole(func, arg.getArgNumber());
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    graph::kNameAttrName);
      if (role)
        byRole[*role].push_back(
            {name ? name.str() : "?", cast<RankedTensorType>(arg.getType())});
    }
    for (const Arg &a : byRole[graph::Role::Input])
      os << "  input   " << a.name << " : " << typeString(a.type) << "\n";
    for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
      auto name = func.getResultAttrOfType<StringAttr>(i, graph::kNameAttrName);
      bool isState = graph::getResultRole(func, i) == graph::Role::Buffer;
      os << (isState ? "  state   " : "  output  ")
         << (name ? name.str() : "?") << " : " << typeString(type) << "\n";
    }
    for (graph::Role role : {graph::Role::Parameter, graph::Role::Buffer}) {
      const auto &args = byRole[role];
      int64_t elements = 0, bytes = 0;
      for (const Arg &a : args) {
        elements += a.type.getNumElements();
        bytes += byteSize(a.type);
      }
      os << llvm::formatv("  {0}s: {1} tensors, {2} elements ({3}), {4} bytes\n",
                          graph::stringifyRole(role), args.size(), elements,
                          humanCount(elements),
                          bytes);
      for (const Arg &a : args)
        os << llvm::formatv("    {0,-48} {1}\n", a.name, typeString(a.type));
    }
    std::map<std::string, int> counts;
    int total = 0;
    func.walk([&](Operation *op) {
      if (op == func.getOperation() || isa<func::ReturnOp>(op))
        return;
      ++counts[op->getName().getStringRef().str()];
      ++total;
    });
    os << "  ops: " << total << "\n";
    for (const auto &[name, count] : counts)
      os << llvm::formatv("    {0,-28} {1}\n", name, count);
  }
}
