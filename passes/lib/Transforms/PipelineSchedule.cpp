//===- PipelineSchedule.cpp - Pipeline schedules, their timing, their proof ===//

#include "strata/Transforms/PipelineSchedule.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>

namespace strata::pipeline {

const char *phaseName(Phase phase) {
  switch (phase) {
  case Phase::Forward: return "forward";
  case Phase::Backward: return "backward";
  case Phase::Weight: return "weight gradient";
  }
  return "?";
}

namespace {

const double kNever = std::numeric_limits<double>::infinity();

/// 1F1B: warm-up forwards, one forward one backward, cool-down backwards.
std::vector<Action> oneFOneB(int64_t stage, int64_t stages, int64_t m) {
  std::vector<Action> order;
  int64_t warmup = std::min(stages - stage - 1, m);
  for (int64_t k = 0; k < warmup; ++k)
    order.push_back({Phase::Forward, k});
  for (int64_t k = 0; k + warmup < m; ++k) {
    order.push_back({Phase::Forward, k + warmup});
    order.push_back({Phase::Backward, k});
  }
  for (int64_t k = std::max<int64_t>(0, m - warmup); k < m; ++k)
    order.push_back({Phase::Backward, k});
  return order;
}

/// ZB-H1 by simulation: an idle stage runs a ready B, else a ready F while
/// fewer than p-s micro-batches hold activations, else a pending W.
StageOrders zeroBubble(int64_t m, llvm::ArrayRef<StageCost> costs) {
  int64_t p = int64_t(costs.size());
  StageOrders orders(p);
  // End times of each stage's F and B per micro-batch (kNever: not yet).
  std::vector<std::vector<double>> endF(p, std::vector<double>(m, kNever)),
      endB(p, std::vector<double>(m, kNever));
  std::vector<int64_t> nextF(p, 0), nextB(p, 0), doneW(p, 0);
  std::vector<std::deque<int64_t>> pendingW(p);
  std::vector<double> freeAt(p, 0.0);
  auto finished = [&](int64_t s) {
    return nextF[s] == m && nextB[s] == m && pendingW[s].empty();
  };
  // Each turn schedules an action or moves a stage's clock forward; a
  // valid pipeline needs far fewer turns than this (the guard only stops a
  // bug from looping: the order it leaves fails verifySchedule).
  for (int64_t turn = 0; turn < 64 * p * (3 * m + 1) + 1024; ++turn) {
    int64_t s = -1;
    for (int64_t i = 0; i < p; ++i)
      if (!finished(i) && (s < 0 || freeAt[i] < freeAt[s]))
        s = i;
    if (s < 0)
      break;
    double now = freeAt[s];
    // When the next B and F could start (kNever: a dependency is not
    // scheduled yet; it will end after `now`).
    double readyB = kNever, readyF = kNever;
    if (nextB[s] < m && nextB[s] < nextF[s]) {
      int64_t k = nextB[s];
      readyB = std::max(endF[s][k], s + 1 < p ? endB[s + 1][k] : 0.0);
    }
    int64_t inFlight = nextF[s] - doneW[s];
    if (nextF[s] < m && inFlight < p - s)
      readyF = s > 0 ? endF[s - 1][nextF[s]] : 0.0;
    Action action;
    if (readyB <= now) {
      action = {Phase::Backward, nextB[s]};
    } else if (readyF <= now) {
      action = {Phase::Forward, nextF[s]};
    } else if (!pendingW[s].empty()) {
      action = {Phase::Weight, pendingW[s].front()};
    } else {
      // Idle until something this stage waits for can have happened: the
      // next known end, or another stage's next decision.
      double next = std::min(readyB, readyF);
      for (int64_t i = 0; i < p; ++i)
        if (i != s && !finished(i) && freeAt[i] > now)
          next = std::min(next, freeAt[i]);
      for (int64_t i = 0; i < p; ++i)
        for (int64_t k = 0; k < m; ++k) {
          if (endF[i][k] > now && endF[i][k] < next)
            next = endF[i][k];
          if (endB[i][k] > now && endB[i][k] < next)
            next = endB[i][k];
        }
      if (next == kNever || next <= now) {
        // Every other stage is at `now` too and waits: step past them.
        double later = kNever;
        for (int64_t i = 0; i < p; ++i)
          if (!finished(i) && freeAt[i] > now)
            later = std::min(later, freeAt[i]);
        next = later == kNever ? now + 1e-9 * (1 + now) : later;
      }
      freeAt[s] = next;
      continue;
    }
    const StageCost &c = costs[s];
    double end = now;
    switch (action.phase) {
    case Phase::Forward:
      end += c.forward;
      endF[s][action.microBatch] = end;
      ++nextF[s];
      break;
    case Phase::Backward:
      end += c.backward;
      endB[s][action.microBatch] = end;
      pendingW[s].push_back(action.microBatch);
      ++nextB[s];
      break;
    case Phase::Weight:
      end += c.weight;
      pendingW[s].pop_front();
      ++doneW[s];
      break;
    }
    orders[s].push_back(action);
    freeAt[s] = end;
  }
  return orders;
}

std::string describe(const Message &m, int64_t stage,
                     const std::function<std::string(int64_t)> &tagName) {
  std::string what =
      tagName(m.tag) + " of micro-batch " + std::to_string(m.microBatch);
  if (m.send)
    return "stage " + std::to_string(stage) + " sends " + what + " to stage " +
           std::to_string(m.peer);
  return "stage " + std::to_string(stage) + " waits for " + what +
         " from stage " + std::to_string(m.peer);
}

std::string scheduleTag(int64_t tag) {
  return tag == 0 ? "the activation" : "the gradient";
}

std::vector<Message> messagesOf(const std::vector<Action> &order,
                                int64_t stage, int64_t stages) {
  std::vector<Message> out;
  for (const Action &a : order) {
    if (a.phase == Phase::Forward) {
      if (stage > 0)
        out.push_back({false, stage - 1, a.microBatch, 0});
      if (stage + 1 < stages)
        out.push_back({true, stage + 1, a.microBatch, 0});
    } else if (a.phase == Phase::Backward) {
      if (stage + 1 < stages)
        out.push_back({false, stage + 1, a.microBatch, 1});
      if (stage > 0)
        out.push_back({true, stage - 1, a.microBatch, 1});
    }
  }
  return out;
}

} // namespace

StageOrders buildSchedule(ScheduleKind kind, int64_t microBatches,
                          llvm::ArrayRef<StageCost> costs) {
  int64_t p = int64_t(costs.size());
  if (kind == ScheduleKind::ZeroBubble)
    return zeroBubble(microBatches, costs);
  StageOrders orders;
  for (int64_t s = 0; s < p; ++s)
    orders.push_back(oneFOneB(s, p, microBatches));
  return orders;
}

std::string verifySchedule(ScheduleKind kind, const StageOrders &orders,
                           int64_t m) {
  int64_t p = int64_t(orders.size());
  // Each phase of each micro-batch once, F before B before W.
  for (int64_t s = 0; s < p; ++s) {
    std::map<std::pair<int, int64_t>, size_t> position;
    for (size_t i = 0; i < orders[s].size(); ++i) {
      const Action &a = orders[s][i];
      std::string where = "stage " + std::to_string(s) + " runs the " +
                          phaseName(a.phase) + " of micro-batch " +
                          std::to_string(a.microBatch);
      if (a.microBatch < 0 || a.microBatch >= m)
        return where + ", but a step has " + std::to_string(m);
      if (kind == ScheduleKind::OneFOneB && a.phase == Phase::Weight)
        return where + ", but under 1F1B the backward computes it";
      if (!position.emplace(std::make_pair(int(a.phase), a.microBatch), i)
               .second)
        return where + " twice";
    }
    std::vector<Phase> phases{Phase::Forward, Phase::Backward};
    if (kind == ScheduleKind::ZeroBubble)
      phases.push_back(Phase::Weight);
    for (int64_t k = 0; k < m; ++k)
      for (size_t j = 0; j < phases.size(); ++j) {
        auto it = position.find({int(phases[j]), k});
        if (it == position.end())
          return "stage " + std::to_string(s) + " never runs the " +
                 phaseName(phases[j]) + " of micro-batch " + std::to_string(k);
        if (j > 0 && position[{int(phases[j - 1]), k}] > it->second)
          return "stage " + std::to_string(s) + " runs the " +
                 phaseName(phases[j]) + " of micro-batch " +
                 std::to_string(k) + " before its " + phaseName(phases[j - 1]);
      }
  }

  std::vector<std::vector<Message>> programs;
  for (int64_t s = 0; s < p; ++s)
    programs.push_back(messagesOf(orders[s], s, p));
  return verifyMessages(programs, scheduleTag);
}

std::string
verifyMessages(const std::vector<std::vector<Message>> &programs,
               const std::function<std::string(int64_t)> &tagName) {
  int64_t p = int64_t(programs.size());
  // Sends never block; a receive takes the oldest message of its channel,
  // which must be the one it expects. channel[(from, to)]: sent, not yet
  // received.
  std::map<std::pair<int64_t, int64_t>, std::deque<Message>> channels;
  std::vector<size_t> next(p, 0);
  for (int64_t s = 0; s < p; ++s)
    for (const Message &m : programs[s])
      if (m.peer < 0 || m.peer >= p || m.peer == s)
        return describe(m, s, tagName) + ", which is no other stage";
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t s = 0; s < p; ++s)
      while (next[s] < programs[s].size()) {
        const Message &msg = programs[s][next[s]];
        if (msg.send) {
          channels[{s, msg.peer}].push_back(msg);
        } else {
          auto &queue = channels[{msg.peer, s}];
          if (queue.empty())
            break;
          const Message &head = queue.front();
          if (head.microBatch != msg.microBatch || head.tag != msg.tag)
            return describe(msg, s, tagName) + ", but stage " +
                   std::to_string(msg.peer) + " sent " + tagName(head.tag) +
                   " of micro-batch " + std::to_string(head.microBatch) +
                   " first";
          queue.pop_front();
        }
        ++next[s];
        progress = true;
      }
  }
  std::string blocked;
  for (int64_t s = 0; s < p; ++s) {
    if (next[s] == programs[s].size())
      continue;
    const Message &msg = programs[s][next[s]];
    if (next[msg.peer] == programs[msg.peer].size())
      return describe(msg, s, tagName) + ", which never sends it";
    blocked += (blocked.empty() ? "" : "; ") + describe(msg, s, tagName);
  }
  if (!blocked.empty())
    return "the schedule deadlocks: " + blocked;
  for (const auto &[key, queue] : channels)
    if (!queue.empty())
      return describe(queue.front(), key.first, tagName) +
             ", which never receives it";
  return "";
}

Timeline simulate(ScheduleKind kind, const StageOrders &orders,
                  llvm::ArrayRef<StageCost> costs) {
  int64_t p = int64_t(orders.size());
  Timeline t;
  t.stages.resize(p);
  std::map<std::tuple<int64_t, int, int64_t>, double> end;
  auto endOf = [&](int64_t s, Phase phase, int64_t k) -> std::optional<double> {
    auto it = end.find({s, int(phase), k});
    if (it == end.end())
      return std::nullopt;
    return it->second;
  };
  std::vector<size_t> next(p, 0);
  std::vector<double> freeAt(p, 0.0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t s = 0; s < p; ++s)
      while (next[s] < orders[s].size()) {
        const Action &a = orders[s][next[s]];
        double start = freeAt[s];
        std::optional<double> dep = 0.0, dep2 = 0.0;
        double length = 0;
        switch (a.phase) {
        case Phase::Forward:
          if (s > 0)
            dep = endOf(s - 1, Phase::Forward, a.microBatch);
          length = costs[s].forward;
          break;
        case Phase::Backward:
          dep = endOf(s, Phase::Forward, a.microBatch);
          if (s + 1 < p)
            dep2 = endOf(s + 1, Phase::Backward, a.microBatch);
          length = costs[s].backward;
          if (kind == ScheduleKind::OneFOneB)
            length += costs[s].weight;
          break;
        case Phase::Weight:
          dep = endOf(s, Phase::Backward, a.microBatch);
          length = costs[s].weight;
          break;
        }
        if (!dep || !dep2)
          break;
        start = std::max({start, *dep, *dep2});
        double finish = start + length;
        end[{s, int(a.phase), a.microBatch}] = finish;
        t.stages[s].push_back({a, start, finish});
        freeAt[s] = finish;
        ++next[s];
        progress = true;
      }
  }
  double first = kNever, last = 0;
  for (const auto &stage : t.stages)
    for (const auto &slot : stage) {
      first = std::min(first, slot.start);
      last = std::max(last, slot.end);
    }
  t.makespan = first == kNever ? 0 : last - first;
  return t;
}

double Timeline::bubble(size_t stage) const {
  if (makespan <= 0)
    return 0;
  double busy = 0;
  for (const auto &slot : stages[stage])
    busy += slot.end - slot.start;
  return 1.0 - busy / makespan;
}

double Timeline::meanBubble() const {
  double sum = 0;
  for (size_t s = 0; s < stages.size(); ++s)
    sum += bubble(s);
  return stages.empty() ? 0 : sum / double(stages.size());
}

int64_t peakInFlight(ScheduleKind kind, const std::vector<Action> &order) {
  int64_t live = 0, peak = 0;
  Phase release =
      kind == ScheduleKind::ZeroBubble ? Phase::Weight : Phase::Backward;
  for (const Action &a : order) {
    if (a.phase == Phase::Forward)
      peak = std::max(peak, ++live);
    else if (a.phase == release)
      --live;
  }
  return peak;
}

} // namespace strata::pipeline
