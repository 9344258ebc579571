//===- TrainingOptions.cpp - The training options' names and sizes --------===//

#include "strata/Transforms/TrainingOptions.h"

#include "llvm/ADT/StringExtras.h"

namespace strata {

llvm::StringRef stringify(Precision p) {
  switch (p) {
  case Precision::FP32: return "fp32";
  case Precision::BF16: return "bf16";
  case Precision::FP16: return "fp16";
  }
  return "?";
}

llvm::StringRef stringify(PrecisionStorage s) {
  return s == PrecisionStorage::Narrow ? "narrow" : "f32";
}

llvm::StringRef stringify(Optimizer o) {
  return o == Optimizer::AdamW ? "adamw" : "sgd";
}

llvm::StringRef stringify(Hierarchical h) {
  switch (h) {
  case Hierarchical::Auto: return "auto";
  case Hierarchical::On: return "on";
  case Hierarchical::Off: return "off";
  }
  return "?";
}

llvm::StringRef stringify(ReduceDtype r) {
  return r == ReduceDtype::FP32 ? "fp32" : "narrow";
}

llvm::StringRef stringify(GradSync g) {
  return g == GradSync::TwoHop ? "2hop" : "global";
}

llvm::StringRef stringify(Recompute r) {
  switch (r) {
  case Recompute::None: return "none";
  case Recompute::Auto: return "auto";
  case Recompute::Always: return "always";
  case Recompute::Layers: return "layers";
  }
  return "?";
}

llvm::StringRef stringify(LrSchedule s) {
  return s == LrSchedule::Constant ? "constant" : "cosine";
}

std::optional<uint64_t> parseByteSize(llvm::StringRef text) {
  llvm::StringRef number = text.take_while(
      [](char c) { return llvm::isDigit(c) || c == '.'; });
  std::string unit = text.drop_front(number.size()).lower();
  double value;
  if (number.empty() || number.getAsDouble(value))
    return std::nullopt;
  double scale;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib")
    scale = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return std::nullopt;
  return uint64_t(value * scale);
}

bool parseStageBoundaries(llvm::StringRef text,
                          llvm::SmallVectorImpl<int64_t> &out) {
  out.clear();
  if (text.trim().empty())
    return true;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  for (llvm::StringRef part : parts) {
    int64_t value;
    if (part.trim().getAsInteger(10, value))
      return false;
    out.push_back(value);
  }
  return true;
}

} // namespace strata
