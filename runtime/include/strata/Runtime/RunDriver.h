//===- RunDriver.h - strata-run ---------------------------------*- C++ -*-===//

#ifndef STRATA_RUNTIME_RUNDRIVER_H
#define STRATA_RUNTIME_RUNDRIVER_H

namespace strata::runtime {

/// The whole of strata-run; returns the exit code. Every error is one line.
int runMain(int argc, char **argv);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_RUNDRIVER_H
