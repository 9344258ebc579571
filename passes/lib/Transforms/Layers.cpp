//===- Layers.cpp - A model's layers and what each costs ------------------===//

#include "strata/Transforms/Layers.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <limits>

using namespace mlir;

namespace strata {

std::string layerOf(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  if (parts.size() == 1)
    return name.str();
  for (size_t i = 0; i < parts.size(); ++i)
    if (!parts[i].empty() && llvm::all_of(parts[i], llvm::isDigit))
      return llvm::join(ArrayRef(parts).take_front(i + 1), ".");
  return llvm::join(ArrayRef(parts).drop_back(), ".");
}

bool isNumberedLayer(StringRef layer) {
  SmallVector<StringRef> parts;
  layer.split(parts, '.');
  return parts.size() > 1 && !parts.back().empty() &&
         llvm::all_of(parts.back(), llvm::isDigit);
}

namespace {

int64_t elements(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : 0;
}

int64_t bytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  unsigned bits = tensor.getElementType().getIntOrFloatBitWidth();
  return tensor.getNumElements() * int64_t((bits + 7) / 8);
}

int64_t lastDim(Value v) {
  auto tensor = dyn_cast<RankedTensorType>(v.getType());
  return tensor && tensor.getRank() > 0 ? tensor.getShape().back() : 1;
}

} // namespace

double forwardFlops(Operation *op) {
  double out = 0;
  for (Value r : op->getResults())
    out += double(elements(r.getType()));
  if (auto linear = dyn_cast<graph::LinearOp>(op))
    return 2.0 * out * double(lastDim(linear->getOperand(0)));
  if (auto gradWeight = dyn_cast<graph::LinearGradWeightOp>(op)) {
    // dW = dy^T x: every row of dy and x adds one outer product.
    double rows = double(elements(gradWeight.getGrad().getType())) /
                  double(std::max<int64_t>(1, lastDim(gradWeight.getGrad())));
    return 2.0 * out * rows;
  }
  if (auto matmul = dyn_cast<graph::MatmulOp>(op))
    return 2.0 * out * double(lastDim(matmul->getOperand(0)));
  if (auto attention = dyn_cast<graph::AttentionOp>(op)) {
    // q k^T over T keys of D, then p v: 2 S T (D + Dv) per batch and head.
    auto key = cast<RankedTensorType>(attention.getKey().getType());
    int64_t axis = attention.getSequenceAxis();
    int64_t keys = axis >= 0 ? key.getShape()[axis] : 1;
    double queryElements = double(elements(attention.getQuery().getType()));
    return 2.0 * double(keys) * (queryElements + out);
  }
  if (auto conv = dyn_cast<graph::ConvOp>(op)) {
    auto weight = cast<RankedTensorType>(conv.getWeight().getType());
    int64_t outChannels = weight.getRank() ? weight.getShape()[0] : 1;
    double perOutput =
        double(elements(weight)) / double(std::max<int64_t>(1, outChannels));
    return 2.0 * out * perOutput;
  }
  return out;
}

FailureOr<LayerMap> mapLayers(func::FuncOp func) {
  LayerMap map;
  llvm::StringMap<int64_t> numbered;
  // The numbered layer of each parameter argument (-1: a module without a
  // number), and whether an argument is a parameter at all.
  DenseMap<Value, int64_t> parameterLayer;
  for (BlockArgument arg : func.getArguments()) {
    if (graph::getArgumentRole(func, arg.getArgNumber()) !=
        graph::Role::Parameter)
      continue;
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), graph::kNameAttrName);
    std::string layer = layerOf(name ? name.getValue() : StringRef());
    parameterLayer[arg] = -1;
    if (!isNumberedLayer(layer))
      continue;
    // Numbered in order of first use, below.
    (void)numbered.try_emplace(layer, -1);
  }

  // Numbering first, in op order: a layer's index is its first use.
  SmallVector<std::string> order;
  for (Operation &op : func.getBody().front().without_terminator())
    for (Value operand : op.getOperands()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      if (!arg || !parameterLayer.count(arg))
        continue;
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    graph::kNameAttrName);
      std::string layer = layerOf(name ? name.getValue() : StringRef());
      auto it = numbered.find(layer);
      if (it == numbered.end() || it->second >= 0)
        continue;
      it->second = int64_t(order.size());
      order.push_back(layer);
    }
  if (order.empty())
    return func.emitError("the model has no numbered layers (parameters "
                          "named like 'blocks.0.weight') to cut into stages");
  for (BlockArgument arg : func.getArguments()) {
    auto it = parameterLayer.find(arg);
    if (it == parameterLayer.end())
      continue;
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  graph::kNameAttrName);
    auto layer = numbered.find(layerOf(name ? name.getValue() : StringRef()));
    if (layer != numbered.end())
      it->second = layer->second;
  }
  for (const std::string &name : order)
    map.layers.push_back(LayerCost{name});

  // An op is at least as late as every parameter and every op it reads.
  llvm::DenseSet<Value> counted;
  for (Operation &op : func.getBody().front().without_terminator()) {
    bool placed = false;
    int64_t layer = 0;
    for (Value operand : op.getOperands()) {
      if (auto p = parameterLayer.find(operand); p != parameterLayer.end()) {
        placed = true;
        layer = std::max(layer, p->second);
        continue;
      }
      if (Operation *def = operand.getDefiningOp())
        if (auto l = map.layerOfOp.find(def); l != map.layerOfOp.end()) {
          placed = true;
          layer = std::max(layer, l->second);
        }
    }
    if (!placed)
      continue;
    map.layerOfOp[&op] = layer;
    LayerCost &cost = map.layers[layer];
    cost.flops += forwardFlops(&op);
    for (Value r : op.getResults())
      cost.activationBytes += bytes(r.getType());
    for (Value operand : op.getOperands())
      if (parameterLayer.count(operand) && counted.insert(operand).second)
        cost.parameterBytes += bytes(operand.getType());
  }
  return map;
}

SmallVector<int64_t> balanceStages(ArrayRef<double> costs, unsigned stages) {
  size_t n = costs.size();
  assert(stages >= 1 && stages <= n && "1 <= stages <= layers");
  SmallVector<double> prefix(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the smallest largest stage over layers [0, i) in k stages;
  // cut[k][i]: where the last of those stages starts.
  std::vector<std::vector<double>> best(stages + 1,
                                        std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> cut(stages + 1,
                                       std::vector<size_t>(n + 1, 0));
  best[0][0] = 0.0;
  for (unsigned k = 1; k <= stages; ++k)
    for (size_t i = k; i <= n; ++i)
      for (size_t j = k - 1; j < i; ++j) {
        double worst = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (worst < best[k][i]) {
          best[k][i] = worst;
          cut[k][i] = j;
        }
      }
  SmallVector<int64_t> boundaries(stages - 1);
  size_t end = n;
  for (unsigned k = stages; k > 1; --k) {
    end = cut[k][end];
    boundaries[k - 2] = int64_t(end);
  }
  return boundaries;
}

} // namespace strata
