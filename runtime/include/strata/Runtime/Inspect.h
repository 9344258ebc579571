//===- Inspect.h - strata-inspect -------------------------------*- C++ -*-===//

#ifndef STRATA_RUNTIME_INSPECT_H
#define STRATA_RUNTIME_INSPECT_H

#include <string>
#include <vector>

namespace strata::runtime {

/// The whole of strata-inspect; returns the exit code. Every error is one
/// line.
int inspectMain(int argc, char **argv);

/// strata-inspect --log A.jsonl [--log B.jsonl ...] --plot OUT.svg: loss,
/// learning rate, gradient norm and throughput over the steps of each
/// strata-run log, overlaid, as SVG. Returns the exit code; `error` is the
/// one-line reason when it is not 0.
int plotLogs(const std::vector<std::string> &logs, const std::string &out,
             std::string &error);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_INSPECT_H
