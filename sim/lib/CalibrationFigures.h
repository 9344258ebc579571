//===- CalibrationFigures.h - What the calibrations share ------*- C++ -*-===//
//
// The pieces strata-sim --calibrate (Calibrate.cpp, the CPU) and its
// --backend cuda (CalibrateDevice.cpp) share: a round's figures and their
// median over the rounds, the numbers as the cluster file writes them, and
// the fused chain both time. Internal to StrataSim.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_SIM_LIB_CALIBRATIONFIGURES_H
#define STRATA_SIM_LIB_CALIBRATIONFIGURES_H

#include "strata/Runtime/FusedProgram.h"
#include "strata/Runtime/Kernel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace strata::sim::calibration {

/// Seconds on a steady clock.
inline double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A figure as the cluster file writes it (six significant digits).
inline std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// What one round of benchmarks measured: single figures by key, and
/// tables of [size, value] rows by key.
struct Figures {
  std::map<std::string, double> values;
  std::map<std::string, std::map<double, double>> tables;

  void row(const std::string &table, double size, double value) {
    if (value > 0 && std::isfinite(value))
      tables[table][size] = value;
  }

  /// The table `key` as the cluster file's [size, value, ...] array.
  std::string array(const std::string &key) const {
    std::string row;
    if (auto it = tables.find(key); it != tables.end())
      for (const auto &[size, v] : it->second)
        row += (row.empty() ? "" : ", ") + number(size) + ", " + number(v);
    return "[" + row + "]";
  }
};

/// The median over the rounds of each figure (a row some round lacks, from
/// a kernel that failed, takes the median of the rounds that have it).
inline Figures medianOf(const std::vector<Figures> &rounds) {
  std::map<std::string, std::vector<double>> values;
  std::map<std::string, std::map<double, std::vector<double>>> tables;
  for (const Figures &f : rounds) {
    for (const auto &[key, v] : f.values)
      values[key].push_back(v);
    for (const auto &[key, rows] : f.tables)
      for (const auto &[size, v] : rows)
        tables[key][size].push_back(v);
  }
  Figures out;
  for (const auto &[key, v] : values)
    out.values[key] = median(v);
  for (const auto &[key, rows] : tables)
    for (const auto &[size, v] : rows)
      out.tables[key][size] = median(v);
  return out;
}

/// A fused program of `adds` adds over `adds + 1` inputs (a chain, as
/// strata-fuse-elementwise writes a residual sum or a bias and scale).
inline runtime::KernelAttrs addChain(int adds) {
  std::vector<int64_t> program;
  int64_t last = 0; // the inputs are values 0 .. adds, the sums follow
  for (int i = 0; i < adds; ++i) {
    program.insert(program.end(), {int64_t(runtime::FusedOpcode::Add), 0, last,
                                   int64_t(i + 1), -1});
    last = adds + 1 + i;
  }
  runtime::KernelAttrs a;
  a.set("program", program);
  a.set("result_values", std::vector<int64_t>{last});
  return a;
}

} // namespace strata::sim::calibration

#endif // STRATA_SIM_LIB_CALIBRATIONFIGURES_H
