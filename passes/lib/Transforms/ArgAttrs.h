//===- ArgAttrs.h - Argument attributes set many at a time ------*- C++ -*-===//
//
// `FuncOp::setArgAttr` builds the function's whole array of argument
// dictionaries anew for each call, and the context keeps every array it
// built: setting an attribute on each of N arguments one by one costs N^2 in
// time and in memory for the context's life (gigabytes for each compile of a
// 10B-parameter model, which --auto repeats per candidate). ArgAttrBatch
// collects the attributes and sets them all at once.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TRANSFORMS_ARGATTRS_H
#define STRATA_TRANSFORMS_ARGATTRS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OperationSupport.h"

#include <map>

namespace strata {

class ArgAttrBatch {
public:
  explicit ArgAttrBatch(mlir::func::FuncOp func) : func(func) {}
  ArgAttrBatch(const ArgAttrBatch &) = delete;
  ArgAttrBatch &operator=(const ArgAttrBatch &) = delete;
  ~ArgAttrBatch() { apply(); }

  /// Sets `name` on argument `arg` when the batch is applied (the argument
  /// numbers must not change before then).
  void set(unsigned arg, llvm::StringRef name, mlir::Attribute value) {
    pending[arg].set(name, value);
  }

  /// Sets what was collected, in one array.
  void apply() {
    if (pending.empty())
      return;
    llvm::SmallVector<mlir::DictionaryAttr> all;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      mlir::DictionaryAttr old = func.getArgAttrDict(i);
      auto it = pending.find(i);
      if (it == pending.end()) {
        all.push_back(old);
        continue;
      }
      mlir::NamedAttrList attrs;
      if (old)
        attrs.append(old.getValue());
      for (mlir::NamedAttribute a : it->second)
        attrs.set(a.getName(), a.getValue());
      all.push_back(attrs.getDictionary(func.getContext()));
    }
    func.setAllArgAttrs(all);
    pending.clear();
  }

private:
  mlir::func::FuncOp func;
  std::map<unsigned, mlir::NamedAttrList> pending;
};

} // namespace strata

#endif // STRATA_TRANSFORMS_ARGATTRS_H
