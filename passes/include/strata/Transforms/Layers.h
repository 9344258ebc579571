//===- Layers.h - A model's layers and what each costs ----------*- C++ -*-===//
//
// A *layer* is a module path up to its first numeric component
// ("transformer.h.3.attn.c_attn.weight" -> "transformer.h.3"); parameters
// of a module without one ("transformer.wte.weight") belong to that
// module. The partition pass buckets parameters by layer; the pipeline pass
// cuts the forward graph between layers, balancing a cost model of each
// layer's forward FLOPs and bytes.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TRANSFORMS_LAYERS_H
#define STRATA_TRANSFORMS_LAYERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace strata {

/// The layer a parameter of this name belongs to (see the file comment); a
/// name without dots is its own layer.
std::string layerOf(llvm::StringRef parameterName);

/// Whether `layer` has a numeric component (a block of a stack).
bool isNumberedLayer(llvm::StringRef layer);

/// What one numbered layer of the forward graph costs.
struct LayerCost {
  std::string name;
  /// Forward FLOPs of the ops placed in the layer (multiply-add = 2).
  double flops = 0;
  /// Bytes of the parameters the layer's ops read first.
  int64_t parameterBytes = 0;
  /// Bytes of the values its ops produce (what a backward pass keeps).
  int64_t activationBytes = 0;
};

/// The forward graph of `@main` cut into numbered layers.
struct LayerMap {
  /// The numbered layers in order of first use. Ops before the first
  /// (embeddings) count towards layer 0, ops after the last (final norm,
  /// heads, the loss) towards the last.
  llvm::SmallVector<LayerCost> layers;
  /// Each op's layer; ops that depend on no parameter (constants, masks
  /// computed from inputs) are absent: any stage can compute them.
  llvm::DenseMap<mlir::Operation *, int64_t> layerOfOp;
};

/// Places every op of `func` in a layer: an op that reads a parameter of a
/// numbered layer is in that layer or later; an op is never placed before
/// an op whose result it reads. Fails when the function reads no parameter
/// of a numbered layer.
mlir::FailureOr<LayerMap> mapLayers(mlir::func::FuncOp func);

/// Forward FLOPs of one op (2 per multiply-add for the matmul class,
/// attention and convolution; one per result element otherwise).
double forwardFlops(mlir::Operation *op);

/// The first layer of each stage after the first: the contiguous split of
/// `costs` into `stages` parts whose largest sum is smallest (ties broken
/// towards earlier cuts). Needs 1 <= stages <= costs.size().
llvm::SmallVector<int64_t> balanceStages(llvm::ArrayRef<double> costs,
                                         unsigned stages);

} // namespace strata

#endif // STRATA_TRANSFORMS_LAYERS_H
