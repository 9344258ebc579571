//===- GraphOps.h - Graph dialect operations --------------------*- C++ -*-===//

#ifndef STRATA_DIALECT_GRAPH_IR_GRAPHOPS_H
#define STRATA_DIALECT_GRAPH_IR_GRAPHOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "strata/Dialect/Graph/IR/GraphDialect.h"
#include "strata/Dialect/Graph/IR/GraphInterfaces.h"

namespace strata::graph {

/// The result type of an elementwise op on `lhs` and `rhs` under numpy
/// broadcasting; i1 elements for a comparison. Emits at `location` and fails
/// when the shapes do not broadcast.
mlir::LogicalResult
inferBroadcastResultType(mlir::MLIRContext *context,
                         std::optional<mlir::Location> location,
                         mlir::Type lhs, mlir::Type rhs, bool isComparison,
                         llvm::SmallVectorImpl<mlir::Type> &inferred);

/// The numpy broadcast of two static shapes, or nullopt if incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// The instruction of the runtime's fused kernels
/// (runtime/include/strata/Runtime/FusedProgram.h: FusedOpcode, and the
/// UnaryGradKind of a gradient) an op computes inside a
/// graph.fused_elementwise body; none for an op the fused kernels cannot
/// run (any other op, a non-float cast, a unary_grad with parameters).
/// strata-fuse-elementwise, the op's verifier and codegen all ask here.
struct FusedCode {
  int opcode;
  int gradKind;
};
std::optional<FusedCode> fusedCodeOf(mlir::Operation *op);

/// Output length of one spatial dim of a convolution or pooling window.
int64_t slidingWindowOutputSize(int64_t input, int64_t kernel, int64_t stride,
                                int64_t padBegin, int64_t padEnd,
                                int64_t dilation, bool ceilMode);

} // namespace strata::graph

#define GET_OP_CLASSES
#include "strata/Dialect/Graph/IR/GraphOps.h.inc"

#endif // STRATA_DIALECT_GRAPH_IR_GRAPHOPS_H
