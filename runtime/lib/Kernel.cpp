//===- Kernel.cpp - Kernel attributes and registry ------------------------===//

#include "strata/Runtime/Kernel.h"

namespace strata::runtime {

const AttrValue *KernelAttrs::find(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

int64_t KernelAttrs::getInt(std::string_view name, int64_t defaultValue) const {
  const AttrValue *v = find(name);
  if (const auto *i = v ? std::get_if<int64_t>(v) : nullptr)
    return *i;
  return defaultValue;
}

double KernelAttrs::getFloat(std::string_view name, double defaultValue) const {
  const AttrValue *v = find(name);
  if (!v)
    return defaultValue;
  if (const auto *d = std::get_if<double>(v))
    return *d;
  if (const auto *i = std::get_if<int64_t>(v))
    return static_cast<double>(*i);
  return defaultValue;
}

std::string KernelAttrs::getString(std::string_view name,
                                   std::string_view defaultValue) const {
  const AttrValue *v = find(name);
  if (const auto *s = v ? std::get_if<std::string>(v) : nullptr)
    return *s;
  return std::string(defaultValue);
}

std::vector<int64_t> KernelAttrs::getInts(std::string_view name) const {
  const AttrValue *v = find(name);
  if (const auto *l = v ? std::get_if<std::vector<int64_t>>(v) : nullptr)
    return *l;
  return {};
}

std::vector<std::string> KernelRegistry::names() const {
  std::vector<std::string> out;
  for (const auto &[name, fn] : kernels_)
    out.push_back(name);
  return out;
}

} // namespace strata::runtime
