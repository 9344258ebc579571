//===- Executor.h - Runs an artifact's instructions -------------*- C++ -*-===//
//
// The executor owns one block holding every tensor of the plan (persistent
// state, constants, and the activation arena laid out by strata-plan-memory),
// allocated once when it is created, and a ScratchArena for the kernels'
// scratch, so a step after the first calls the allocator zero times.
// Kernels come from a backend's registry (the CPU one for now).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_EXECUTOR_H
#define STRATA_RUNTIME_EXECUTOR_H

#include "strata/Runtime/Artifact.h"
#include "strata/Runtime/ScratchArena.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <string_view>
#include <vector>

namespace strata::runtime {

struct ExecutorOptions {
  /// Picks each sharded parameter's slice of params.bin.
  int rank = 0;
  /// Where the SSD tier's file goes (created, then unlinked at once, so it
  /// vanishes with the process).
  std::string ssdDir = "/tmp";
  /// Sleep up to this many microseconds (pseudo-random) before every
  /// collective, move and optimizer update, so a missing event shows up as
  /// a wrong answer (FSDP's tests do the same).
  uint64_t injectDelayMicros = 0;
};

class Executor {
public:
  /// Lays out the device block (persistent state, constants, the activation
  /// arena), the host block and the SSD file, copies constants and initial
  /// parameters in, and resolves every instruction's kernel (an op without
  /// one is an error).
  static Status create(const Artifact &artifact, const KernelRegistry &kernels,
                       std::unique_ptr<Executor> &out,
                       const ExecutorOptions &options);
  static Status create(const Artifact &artifact, const KernelRegistry &kernels,
                       std::unique_ptr<Executor> &out, int rank = 0) {
    ExecutorOptions options;
    options.rank = rank;
    return create(artifact, kernels, out, options);
  }
  ~Executor();
  /// The collectives sched.* instructions use.
  void setCommunicator(Communicator *comm) { comm_ = comm; }

  /// A tensor that keeps its value between programs and steps.
  struct StateTensor {
    std::string name;
    int kind; // plan::TensorKind
    TensorView *view;
  };

  /// The view of an input or output by name; names are global across
  /// programs (one name, one tensor).
  TensorView *findInput(const std::string &name);
  const TensorView *findOutput(const std::string &name) const;
  /// The inputs and outputs of one program, by name.
  std::vector<std::string> getInputNames(std::string_view program = "forward") const;
  std::vector<std::string> getOutputNames(std::string_view program = "forward") const;
  bool hasProgram(std::string_view program) const;
  /// Every PARAMETER, BUFFER, GRADIENT and OPTIMIZER_STATE tensor.
  std::vector<StateTensor> getStates();
  /// Copies a persistent tensor's bytes out of or into it, whatever its
  /// tier (an SSD tensor has no memory to read directly).
  Status readState(const StateTensor &state, void *out) const;
  Status writeState(const StateTensor &state, const void *in);
  /// Zeroes every GRADIENT tensor (the start of an accumulation window).
  void zeroGradients();

  /// Runs a program's instructions in order; the first failing kernel's
  /// message names the instruction and its ONNX node.
  Status run(std::string_view program = "forward", uint64_t seed = 0);

  size_t getArenaBytes() const { return arena_.size(); }
  size_t getHostBytes() const { return host_.size(); }
  uint64_t getSsdBytes() const { return ssdBytes_; }
  /// Heap allocations (operator new) during the last run(): kernels'
  /// scratch comes from the executor's ScratchArena, so after the first
  /// step this is 0.
  uint64_t getLastRunAllocations() const { return lastRunAllocations_; }
  /// Bytes the kernels' scratch arena holds.
  size_t getScratchBytes() const { return scratch_.capacity(); }

  /// With tracing on, every run records when each instruction started and
  /// ended on its stream (into memory reserved here, so a traced step
  /// allocates nothing either).
  struct TraceEvent {
    int64_t startNs = 0, endNs = 0;
    uint32_t stream = 0;
  };
  void setTracing(bool on) { tracing_ = on; }
  /// The last run's events, by instruction, and that program's streams.
  const std::vector<TraceEvent> &getLastTrace() const { return trace_; }
  std::vector<std::string> getStreamNames(std::string_view program) const;

private:
  /// An instruction with its views prebuilt: the arena never moves, so a
  /// run copies nothing.
  struct Step {
    const KernelFn *kernel;
    std::vector<TensorView> inputs, outputs;
    KernelAttrs attrs;
    std::string description;
    /// The instruction's random stream: its "rng_stream" attribute when it
    /// has one (a forward op and its gradient share it), else its index.
    uint64_t rngStream;
    /// The schedule: the stream it runs on, the steps it waits for, and
    /// whether it waits for every earlier step (after the join).
    uint32_t stream = 0;
    std::vector<uint32_t> waits;
    /// --inject-delay applies (a collective, a move, an optimizer update).
    bool delayable = false;
  };
  struct Program {
    std::vector<Step> steps;
    std::vector<std::string> inputs, outputs;
    /// Per stream, its steps in order; the steps from `tail` on run after
    /// every stream has finished.
    std::vector<std::vector<uint32_t>> streams;
    std::vector<std::string> streamNames;
    size_t tail = 0;
  };
  /// One run of a program over the streams.
  struct Job {
    Program *program = nullptr;
    std::string_view name;
    uint64_t seed = 0, epoch = 0;
  };
  Status runSequential(Program &program, std::string_view name,
                       uint64_t seed);
  Status runStreams(Program &program, std::string_view name, uint64_t seed);
  /// Runs step i of the current job on this thread, after its waits.
  bool runStep(const Job &job, uint32_t i, ScratchArena &arena);
  void worker(size_t stream);
  Executor() = default;
  std::vector<unsigned char> arena_;
  std::vector<TensorView> tensors_;
  std::map<std::string, Program, std::less<>> programs_;
  std::map<std::string, uint32_t> inputs_, outputs_;
  std::vector<StateTensor> states_;
  Communicator *comm_ = nullptr;
  ScratchArena scratch_;
  ExecutorOptions options_;
  bool tracing_ = false;
  std::vector<TraceEvent> trace_;
  /// The streams' threads (stream 0 is the caller's), their arenas, and
  /// the completion epoch of every step of the running program.
  std::vector<std::thread> workers_;
  std::vector<std::unique_ptr<ScratchArena>> workerArenas_;
  std::unique_ptr<std::atomic<uint64_t>[]> done_;
  size_t doneSize_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  Job job_;
  uint64_t generation_ = 0;
  size_t pending_ = 0;
  bool shutdown_ = false;
  std::atomic<bool> failed_{false};
  std::string failure_;
  std::vector<unsigned char> host_;
  int ssdFile_ = -1;
  uint64_t ssdBytes_ = 0;
  uint64_t lastRunAllocations_ = 0;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_EXECUTOR_H
