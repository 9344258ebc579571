//===- GraphInterfaces.td - Graph dialect interfaces -------*- tablegen -*-===//
//
// The gradient of an op is defined next to the op, through this interface,
// never in a central switch.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECT_GRAPH_IR_GRAPHINTERFACES_TD
#define STRATA_DIALECT_GRAPH_IR_GRAPHINTERFACES_TD

include "mlir/IR/OpBase.td"

def Graph_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::strata::graph";
  let description = [{
    An op that can be differentiated. Given the gradients flowing into its
    results (a null Value where a result receives no gradient), it builds the
    ops computing the gradient of every operand (a null Value for an operand
    that is not differentiable, such as integer indices or a boolean mask).
    The autodiff pass calls this on each op in reverse order and sums
    gradients where a value fans out.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{
        Builds the gradients of the operands. `resultGrads` has one entry per
        result; `operandGrads` receives one entry per operand.
      }],
      /*retTy=*/"::mlir::LogicalResult",
      /*methodName=*/"buildGradient",
      /*args=*/(ins "::mlir::OpBuilder &":$builder,
                    "::mlir::ValueRange":$resultGrads,
                    "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)
    >,
    InterfaceMethod<
      /*desc=*/[{
        Returns true if operand `index` can receive a gradient.
      }],
      /*retTy=*/"bool",
      /*methodName=*/"isDifferentiableOperand",
      /*args=*/(ins "unsigned":$index),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::llvm::isa<::mlir::FloatType>(
            ::mlir::getElementTypeOrSelf($_op->getOperand(index).getType()));
      }]
    >,
  ];
}

#endif // STRATA_DIALECT_GRAPH_IR_GRAPHINTERFACES_TD
