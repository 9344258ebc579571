//===- InsertEvents.cpp - The fewest events that order the streams --------===//
//
// strata-insert-events, after the memory plan: for every op and every other
// stream, the latest earlier op there whose bytes conflict with this op's
// (one writing) must complete first unless the waits already order it
// (vector clocks); each such op gets a sched.record after it and the
// waiting op a sched.wait before it.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "ScheduleAnalysis.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace strata {
#define GEN_PASS_DEF_INSERTEVENTSPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

using sched::Stream;

struct InsertEventsPass
    : public strata::impl::InsertEventsPassBase<InsertEventsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      std::vector<schedule::OpAccess> ops;
      std::vector<Stream> streams;
      if (failed(schedule::collectAccesses(func, ops, streams)))
        return signalPassFailure();
      size_t s = streams.size();
      // clock[i][t]: the last instruction of stream t (+1) op i is ordered
      // after; ordinal[i]: op i's position on its own stream (+1).
      std::vector<std::vector<int64_t>> clock(ops.size());
      std::vector<int64_t> ordinal(ops.size());
      std::vector<std::vector<size_t>> onStream(s);
      std::vector<SmallVector<size_t>> waits(ops.size());
      for (size_t i = 0; i < ops.size(); ++i) {
        int own = ops[i].stream;
        clock[i] = onStream[own].empty() ? std::vector<int64_t>(s, 0)
                                         : clock[onStream[own].back()];
        for (size_t t = 0; t < s; ++t) {
          if (int(t) == own)
            continue;
          // The latest conflicting op on stream t not yet ordered before.
          for (size_t j = onStream[t].size(); j-- > 0;) {
            size_t a = onStream[t][j];
            if (ordinal[a] <= clock[i][t])
              break;
            if (!schedule::conflict(ops[a], ops[i]))
              continue;
            waits[i].push_back(a);
            for (size_t u = 0; u < s; ++u)
              clock[i][u] = std::max(clock[i][u], clock[a][u]);
            break;
          }
        }
        onStream[own].push_back(i);
        ordinal[i] = int64_t(onStream[own].size());
        clock[i][own] = ordinal[i];
      }
      // A token right after each op another stream waits for, and one wait
      // before each op that waits, for its tokens in instruction order.
      OpBuilder b(func.getContext());
      DenseMap<size_t, Value> tokens;
      for (size_t i = 0; i < ops.size(); ++i) {
        if (waits[i].empty())
          continue;
        llvm::sort(waits[i]);
        SmallVector<Value> awaited;
        for (size_t a : waits[i]) {
          Value &token = tokens[a];
          if (!token) {
            b.setInsertionPointAfter(ops[a].op);
            token = b.create<sched::RecordOp>(ops[a].op->getLoc(),
                                              streams[ops[a].stream])
                        .getToken();
          }
          awaited.push_back(token);
        }
        b.setInsertionPoint(ops[i].op);
        b.create<sched::WaitOp>(ops[i].op->getLoc(), streams[ops[i].stream],
                                awaited);
      }
      SmallVector<Attribute> names;
      for (Stream stream : streams)
        names.push_back(sched::StreamAttr::get(func.getContext(), stream));
      func->setAttr(sched::SchedDialect::kStreamsAttrName, b.getArrayAttr(names));
    }
  }
};

} // namespace
