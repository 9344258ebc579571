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

/// graph.fused_elementwise's attributes: `program` (five integers an
/// instruction, FusedProgram.h), returning value `result`.
inline runtime::KernelAttrs fusedAttrs(std::vector<int64_t> program,
                                       int64_t result) {
  runtime::KernelAttrs a;
  a.set("program", std::move(program));
  a.set("result_values", std::vector<int64_t>{result});
  return a;
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
  return fusedAttrs(std::move(program), last);
}

/// An attention kernel's seconds per score at two head widths (`seconds`
/// at `widths`; a second of 0: not measured) as the cluster file's
/// "NAME_score" (per score) and "NAME_mac" (per score and head element)
/// rows at sequence length `t`, both positive (a floor of 1e-15). Nothing
/// where the first width failed; with one width, its whole cost per score.
inline void attentionCosts(Figures &f, const std::string &name, double t,
                           const int64_t widths[2], const double seconds[2]) {
  if (!(seconds[0] > 0))
    return;
  double mac = seconds[1] > 0
                   ? std::max(0.0, (seconds[1] - seconds[0]) /
                                       double(widths[1] - widths[0]))
                   : 0.0;
  double score = std::max(1e-15, seconds[0] - mac * double(widths[0]));
  f.row(name + "_score", t, score);
  f.row(name + "_mac", t, std::max(1e-15, mac));
}

/// A fused program of `length` instructions over one input, alternating
/// add and mul of the last value with the input: what a fused kernel pays
/// per instruction, against addChain's operands.
inline runtime::KernelAttrs longChain(int length) {
  std::vector<int64_t> program;
  int64_t last = 0;
  for (int i = 0; i < length; ++i) {
    auto op = i % 2 ? runtime::FusedOpcode::Mul : runtime::FusedOpcode::Add;
    program.insert(program.end(), {int64_t(op), 0, last, 0, -1});
    last = 1 + i;
  }
  return fusedAttrs(std::move(program), last);
}

/// A fused program of `length` instructions over one input alternating a
/// GELU of the last value and an add of the input (which keeps the values
/// spread as activations are: GELUs alone shrink them toward 0, where erf
/// takes its cheapest branch): what a fused kernel pays for a
/// transcendental instruction (exp, erf, tanh and the like).
inline runtime::KernelAttrs geluChain(int length) {
  std::vector<int64_t> program;
  for (int i = 0; i < length; ++i) {
    if (i % 2 == 0)
      program.insert(program.end(),
                     {int64_t(runtime::FusedOpcode::Gelu), 0, i, -1, -1});
    else
      program.insert(program.end(),
                     {int64_t(runtime::FusedOpcode::Add), 0, i, 0, -1});
  }
  return fusedAttrs(std::move(program), length);
}

/// The two fused programs a calibration times, of `n` result elements of
/// `width` bytes each: addChain(2) (three inputs, two instructions) in
/// `chain` seconds and longChain(kLongChain) (one input) in `longer`
/// seconds; into `f` as a fused kernel's seconds per byte of its operands
/// and results ("OP.byte") and per result element and instruction
/// ("OP.instruction"), by n: t = bytes x byte + n x instructions x
/// instruction solved for the two. With geluChain(kLongChain)'s `gelus`
/// seconds, also the seconds per result element of a transcendental
/// instruction ("OP.transcendental").
inline constexpr int kLongChain = 10;
inline void fusedCosts(Figures &f, const std::string &prefix, double n,
                       double width, double chain, double longer,
                       double gelus) {
  if (!(chain > 0) || !(longer > 0))
    return;
  // chain:  4 n w byte +  2 n instruction
  // longer: 2 n w byte + 10 n instruction
  const double a = 4 * n * width, b = 2 * n, c = 2 * n * width,
               d = kLongChain * n;
  const double det = a * d - b * c;
  double byte = (chain * d - b * longer) / det;
  double instruction = (a * longer - c * chain) / det;
  // A negative share (noise, or a kernel whose instructions cost nothing
  // beside its bytes): the other figure alone explains the longer chain.
  if (byte <= 0) {
    byte = 1e-15;
    instruction = longer / d;
  } else if (instruction <= 0) {
    instruction = 1e-15;
    byte = chain / a;
  }
  f.row(prefix + "op.graph.fused_elementwise.byte", n, byte);
  f.row(prefix + "op.graph.fused_elementwise.instruction", n, instruction);
  // Half its instructions are GELUs, half adds.
  if (gelus > 0)
    f.row(prefix + "op.graph.fused_elementwise.transcendental", n,
          std::max(1e-15, (gelus - c * byte - d / 2 * instruction) / (d / 2)));
}

} // namespace strata::sim::calibration

#endif // STRATA_SIM_LIB_CALIBRATIONFIGURES_H
