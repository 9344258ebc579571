//===- InitStrata.h - Register every Strata dialect and pass ----*- C++ -*-===//

#ifndef STRATA_TOOLS_INITSTRATA_H
#define STRATA_TOOLS_INITSTRATA_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace strata {

/// Adds every dialect Strata's tools use to `registry` and registers every
/// Strata pass and pass pipeline with the global pass registry. Shared by
/// strata-opt and strata-compile so both know the same names.
void registerAllStrataDialectsAndPasses(mlir::DialectRegistry &registry);

} // namespace strata

#endif // STRATA_TOOLS_INITSTRATA_H
