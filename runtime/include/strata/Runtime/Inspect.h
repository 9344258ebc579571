//===- Inspect.h - strata-inspect -------------------------------*- C++ -*-===//

#ifndef STRATA_RUNTIME_INSPECT_H
#define STRATA_RUNTIME_INSPECT_H

namespace strata::runtime {

/// The whole of strata-inspect; returns the exit code. Every error is one
/// line.
int inspectMain(int argc, char **argv);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_INSPECT_H
