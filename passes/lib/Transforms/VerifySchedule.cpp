//===- VerifySchedule.cpp - The proof that the streams are ordered --------===//
//
// strata-verify-schedule: from the streams, the events and the memory plan,
// every two ops on different streams that touch the same bytes (one
// writing) are ordered, and the collectives off the `reduce` stream share
// one stream (the runtime gives `reduce` communicators of its own and every
// other stream the same ones, so two streams of collectives sharing them
// could issue them in different orders on different ranks). It runs at the
// end of every compile and catches hand-broken plans.
//
//===----------------------------------------------------------------------===//

#include "strata/Transforms/Passes.h"

#include "ScheduleAnalysis.h"

#include "strata/Dialect/Graph/IR/GraphOps.h"
#include "strata/Dialect/Sched/IR/SchedOps.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace strata {
#define GEN_PASS_DEF_VERIFYSCHEDULEPASS
#include "strata/Transforms/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

using sched::Stream;

bool isCollective(Operation *op) {
  return isa<sched::AllGatherOp, sched::ReduceScatterOp, sched::AllReduceOp>(
      op);
}

struct VerifySchedulePass
    : public strata::impl::VerifySchedulePassBase<VerifySchedulePass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(verify(func)))
        return signalPassFailure();
  }

  /// Vector clocks over the streams: an instruction is ordered after
  /// everything of its own stream before it and, through the tokens its
  /// stream waited for, after what those tokens' streams had run when they
  /// were recorded.
  LogicalResult verify(func::FuncOp func) {
    std::vector<schedule::OpAccess> ops;
    std::vector<Stream> streams;
    if (failed(schedule::collectAccesses(func, ops, streams)))
      return failure();
    size_t s = streams.size();
    auto indexOf = [&](Stream stream) {
      auto at = llvm::find(streams, stream);
      if (at == streams.end()) {
        streams.push_back(stream);
        return streams.size() - 1;
      }
      return size_t(at - streams.begin());
    };
    // Event ops may name streams no instruction uses.
    func.walk([&](Operation *op) {
      if (isa<sched::RecordOp, sched::WaitOp>(op))
        indexOf(*sched::getStream(op));
    });
    s = streams.size();
    std::vector<std::vector<int64_t>> current(s, std::vector<int64_t>(s, 0));
    std::vector<std::vector<int64_t>> clock(ops.size());
    std::vector<int64_t> ordinal(ops.size());
    DenseMap<Value, std::vector<int64_t>> tokenClock;
    DenseMap<Operation *, size_t> instruction;
    for (size_t i = 0; i < ops.size(); ++i)
      instruction[ops[i].op] = i;
    std::vector<std::vector<size_t>> byStream(s);
    std::optional<Stream> collectiveStream;
    auto fail = [&](size_t i, const Twine &message) {
      return ops[i].op->emitError("strata-verify-schedule: @")
             << func.getSymName() << ": " << message;
    };
    for (Operation &op : func.getBody().front()) {
      if (auto record = dyn_cast<sched::RecordOp>(op)) {
        tokenClock[record.getToken()] = current[indexOf(record.getStream())];
        continue;
      }
      if (auto wait = dyn_cast<sched::WaitOp>(op)) {
        std::vector<int64_t> &mine = current[indexOf(wait.getStream())];
        for (Value token : wait.getTokens()) {
          auto it = tokenClock.find(token);
          if (it == tokenClock.end())
            return wait.emitError("strata-verify-schedule: @")
                   << func.getSymName()
                   << ": waits for a token no earlier sched.record made";
          for (size_t u = 0; u < s; ++u)
            mine[u] = std::max(mine[u], it->second[u]);
        }
        continue;
      }
      auto at = instruction.find(&op);
      if (at == instruction.end())
        continue;
      size_t i = at->second;
      int own = ops[i].stream;
      if (isCollective(&op) && streams[own] != Stream::Reduce) {
        if (!collectiveStream)
          collectiveStream = streams[own];
        else if (streams[own] != *collectiveStream)
          return fail(i, schedule::describe(ops[i], int64_t(i), streams) +
                             " is a collective off stream " +
                             sched::stringifyStream(*collectiveStream).str() +
                             " and off stream reduce: the ranks could issue "
                             "collectives in different orders and deadlock");
      }
      std::vector<int64_t> &mine = current[own];
      ordinal[i] = ++mine[own];
      clock[i] = mine;
      // Everything on other streams this op conflicts with must be ordered
      // before it. Stream u's instructions are in `byStream[u]` in order,
      // ordinal k at k - 1: those after clock[i][u] are the unordered ones,
      // the only ones to check (all earlier instructions were, quadratic in
      // the program). The first conflict in program order is reported.
      size_t first = SIZE_MAX;
      for (size_t u = 0; u < s; ++u) {
        if (int(u) == own)
          continue;
        const std::vector<size_t> &list = byStream[u];
        for (size_t k = size_t(std::max<int64_t>(clock[i][u], 0));
             k < list.size() && list[k] < first; ++k)
          if (schedule::conflict(ops[list[k]], ops[i])) {
            first = list[k];
            break;
          }
      }
      if (first != SIZE_MAX)
        return fail(i, schedule::describe(ops[i], int64_t(i), streams) +
                           " and " +
                           schedule::describe(ops[first], int64_t(first),
                                              streams) +
                           " touch the same bytes, one writing, and no wait "
                           "orders them");
      byStream[own].push_back(i);
    }
    return success();
  }
};

} // namespace
