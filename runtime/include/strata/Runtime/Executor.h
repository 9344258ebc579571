//===- Executor.h - Loads an artifact and runs its programs -----*- C++ -*-===//
//
// The runtime core, which only executes what the plan says:
//
// - The loader (Executor::create) checks the plan, binds every tensor to
//   its bytes (persistent state, constants and the activation arena laid
//   out by strata-plan-memory in one block of device memory, a host block
//   for the HOST tier, the SSD tier's file, all allocated once), copies
//   constants and initial parameters in, and prepares each kernel.
// - The runner (Executor::run) enqueues a program on the device's streams
//   in plan order (kernels, copies, the plan's records and waits), with
//   inputs copied in first and outputs copied out last, and waits once, for
//   stream 0. One runner for every device (Device.h): the CPU's stream
//   threads, CUDA streams, the queue model. Where the host cannot address
//   device memory, inputs and outputs are staged through host buffers
//   (findInput/findOutput return those).
//
// A step after the first calls the allocator zero times.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_EXECUTOR_H
#define STRATA_RUNTIME_EXECUTOR_H

#include "strata/Runtime/Artifact.h"
#include "strata/Runtime/Device.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata::plan {
class Instruction;
class Program;
} // namespace strata::plan

namespace strata::runtime {

struct ExecutorOptions {
  /// Picks each sharded parameter's slice of params.bin.
  int rank = 0;
  /// Where the SSD tier's file goes (created, then unlinked at once, so it
  /// vanishes with the process).
  std::string ssdDir = "/tmp";
  /// Delay each stream up to this many microseconds (pseudo-random) before
  /// every instruction the plan marks delayable (collectives, moves,
  /// optimizer updates), so a missing event shows up as a wrong answer
  /// (FSDP's tests do the same); devices that cannot delay ignore it.
  uint64_t injectDelayMicros = 0;
  /// On a device that can capture (CUDA graphs), the second run of each
  /// program records it into a graph and every later run replays that:
  /// one launch per program instead of one per instruction. Random
  /// streams (dropout) read their seeds from device memory the graph
  /// refreshes, so a replay draws each run's masks.
  bool captureGraphs = false;
  /// Pipeline stages: the stage this rank runs. Only its programs are
  /// loaded and only the tensors they name are allocated and given values
  /// (runtime/include/strata/Runtime/Footprint.h); -1: every program.
  int stage = -1;
};

class Executor {
public:
  /// Lays out the device block (persistent state, constants, the activation
  /// arena), the host block and the SSD file, copies constants and initial
  /// parameters in, and resolves every instruction's kernel (an op without
  /// one is an error). Streams, events, seed slots and what --inject-delay
  /// delays are the plan's; nothing is inferred from op names.
  static Status create(const Artifact &artifact, std::shared_ptr<Device> device,
                       std::unique_ptr<Executor> &out,
                       const ExecutorOptions &options);
  /// On the CPU, with `kernels`.
  static Status create(const Artifact &artifact, const KernelRegistry &kernels,
                       std::unique_ptr<Executor> &out,
                       const ExecutorOptions &options) {
    return create(artifact, createCpuDevice(kernels), out, options);
  }
  static Status create(const Artifact &artifact, const KernelRegistry &kernels,
                       std::unique_ptr<Executor> &out, int rank = 0) {
    ExecutorOptions options;
    options.rank = rank;
    return create(artifact, kernels, out, options);
  }
  Device &getDevice() { return *device_; }
  ~Executor();
  /// The collectives sched.* instructions use. On a device with its own
  /// collectives (NCCL) this connects them: one communicator per group
  /// kind, each bootstrapped from its first member's id over `comm`.
  Status setCommunicator(Communicator *comm);

  /// A tensor that keeps its value between programs and steps.
  struct StateTensor {
    std::string name;
    int kind; // plan::TensorKind
    TensorView *view;
  };

  /// The view of an input or output by name; names are global across
  /// programs (one name, one tensor). Host memory always: the tensor
  /// itself, or its staging buffer on a device the host cannot address.
  TensorView *findInput(const std::string &name);
  const TensorView *findOutput(const std::string &name) const;
  /// `program`'s output `name` (programs may bind different tensors to one
  /// name); null when it has none.
  const TensorView *findOutput(std::string_view program,
                               const std::string &name) const;
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

  /// Runs that replayed a captured graph, since load.
  uint64_t getGraphReplays() const { return graphReplays_; }
  /// The device block, a whole number of pages.
  size_t getArenaBytes() const { return deviceBytes_; }
  /// What the block holds before rounding to pages: persistent state,
  /// constants and the activation arena of the programs loaded (with
  /// stages, this rank's stage's only; strata-inspect's planned peak).
  size_t getPlannedDeviceBytes() const { return plannedDeviceBytes_; }
  size_t getHostBytes() const { return hostBytes_; }
  uint64_t getSsdBytes() const { return ssdBytes_; }
  /// Heap allocations (operator new) during the last run(): kernels'
  /// scratch comes from the device's arenas (ScratchArena.h), so after the
  /// first step this is 0.
  uint64_t getLastRunAllocations() const { return lastRunAllocations_; }

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
  /// run copies nothing. Every field comes from the plan.
  struct Step {
    /// A kernel, or an event's record or wait (plan::InstructionKind).
    int kind = 0;
    const KernelFn *kernel = nullptr;
    std::vector<TensorView> inputs, outputs;
    KernelAttrs attrs;
    std::string description;
    /// The stream it runs on; a record's or wait's event.
    uint32_t stream = 0;
    uint32_t event = 0;
    /// The instruction's random stream and its seed's slot (-1: it draws
    /// no random numbers).
    uint64_t rngStream = 0;
    int seedSlot = -1;
    /// --inject-delay applies (a collective, a move, an optimizer update).
    bool delayable = false;
    /// What the kernel's prepare function made at load.
    std::shared_ptr<void> prepared;
    /// A collective's group, and its kind (-1: not one), counted by the
    /// executor when the device runs collectives.
    Group group = Group::Partition;
    int collective = -1;
    /// A collective's channel (collectiveChannelOf its stream's name).
    int channel = 0;
    /// SEND / RECV: the other stage.
    int peerStage = -1;
  };
  struct Program {
    std::vector<Step> steps;
    std::vector<std::string> inputs, outputs;
    std::vector<uint32_t> outputIds;
    /// Per stream, its steps in order.
    std::vector<std::vector<uint32_t>> streams;
    std::vector<std::string> streamNames;
    /// The plan's events and seed slots.
    uint32_t events = 0, seedSlots = 0;
    /// The inputs and outputs copied through staging buffers (a device the
    /// host cannot address), by tensor id.
    std::vector<uint32_t> stagedInputs, stagedOutputs;
    /// Whether it sends to or receives from other stages (never captured:
    /// the host takes part in each message).
    bool exchanges = false;
    /// Graphs: runs so far, and the captured graph.
    uint64_t runs = 0;
    std::shared_ptr<void> graph;
    /// Where the program's seed slots start in the seed block.
    uint32_t firstSeedSlot = 0;
  };
  /// Where layOutTensors puts each tensor (by id: its offset in the device
  /// or host block) and how large each tier is.
  struct Layout {
    std::vector<size_t> offsets;
    size_t deviceBytes = 0, hostBytes = 0;
    size_t plannedDeviceBytes = 0; // before rounding to pages
    uint64_t ssdBytes = 0;
  };
  /// Copies bytes into or out of a tensor wherever it lives (device memory,
  /// the host block, the SSD file).
  Status storeBytes(const TensorView &v, const void *in, const std::string &what);
  Status loadBytes(const TensorView &v, void *out, const std::string &what) const;

  // The loader, in the order create calls it.

  /// Gives every tensor its dtype and shape and places it: persistent
  /// tensors and constants end to end in the device block (or the host
  /// block, or the SSD file, by tier), then the activation arena at the
  /// plan's offsets; each block rounded up to whole pages.
  Status layOutTensors(const plan::Plan &p, Layout &layout);
  /// Allocates the device and host blocks and the SSD file once, and
  /// points every tensor at its bytes.
  Status allocateTiers(const plan::Plan &p, const Layout &layout);
  /// Creates the SSD tier's file of `bytes` in options_.ssdDir (unlinked at
  /// once, so it vanishes with the process).
  Status createSsdFile(uint64_t bytes);
  /// Copies the constants and this rank's initial parameters in.
  Status copyInitialValues(const Artifact &artifact);
  /// Lists the tensors that keep their value between steps (states_).
  void collectStates(const plan::Plan &p);
  /// Builds a program's steps, checks its streams, events and seed slots,
  /// and records its bindings (inputs_, outputs_).
  Status loadProgram(const plan::Program &prog);
  /// Builds the step of instruction `index` of `prog`: its kernel, views
  /// and attributes, random stream and seed slot, group, and what its
  /// kernel's prepare function makes.
  Status buildStep(const plan::Program &prog, const plan::Instruction &inst,
                   size_t index, Step &step);
  /// Creates the device's queues (the most streams and events of any
  /// program) and the seed block every program's seed slots share.
  Status createQueuesAndSeeds();
  /// Where the host cannot address device memory: one staging buffer per
  /// input or output tensor, in one host block.
  Status allocateStaging();

  // The runner, in the order runProgram calls it.

  /// Runs a program: replays its graph, or enqueues its steps (capturing
  /// them on the run that captures), then waits for stream 0.
  Status runProgram(Program &program, std::string_view name, uint64_t seed);
  /// Writes this run's seeds of a program into the seed staging block.
  void stageSeeds(Program &program, uint64_t seed);
  /// Launches a program's captured graph and waits for it.
  Status replayGraph(Program &program, std::string_view name);
  /// Creates the run's timers and marks its start on stream 0; `traceBase`
  /// receives the host clock the device's times are relative to.
  Status startTrace(const Program &program, int64_t &traceBase);
  /// Enqueues the copies of seeds and staged inputs on stream 0.
  Status enqueueInputs(const Program &program);
  /// Enqueues step i of a program on its stream (`run`: the runs since
  /// load, which picks --inject-delay's delays).
  Status enqueue(Program &program, uint32_t i, uint64_t seed, uint64_t run);
  /// Enqueues the copies of staged outputs on stream 0.
  Status enqueueOutputs(const Program &program);
  /// A SEND or RECV: after its stream drains, through the communicator.
  Status exchange(Step &step, uint32_t stream);
  /// Where the host reads or writes tensor `id`: its staging buffer, or
  /// the tensor itself when the host can address it.
  const TensorView *hostView(uint32_t id) const;
  /// Ends the capture into the program's graph and launches it once.
  Status finishCapture(Program &program);
  /// Reads the run's timers into trace_.
  Status collectTrace(const Program &program, int64_t traceBase);

  Executor() = default;
  std::shared_ptr<Device> device_;
  void *deviceBlock_ = nullptr, *hostBlock_ = nullptr, *stagingBlock_ = nullptr;
  /// The random steps' seeds, on the device and staged.
  void *seedBlock_ = nullptr, *seedStaging_ = nullptr;
  size_t deviceBytes_ = 0, hostBytes_ = 0, plannedDeviceBytes_ = 0;
  std::vector<TensorView> tensors_;
  /// By tensor id: whether this rank's programs name it (only those are
  /// allocated); the programs this rank loads.
  std::vector<bool> used_;
  std::vector<const plan::Program *> loaded_;
  /// By tensor id: the host buffer of a staged input or output.
  std::map<uint32_t, TensorView> staging_;
  std::map<std::string, Program, std::less<>> programs_;
  std::map<std::string, uint32_t> inputs_, outputs_;
  std::vector<StateTensor> states_;
  Communicator *comm_ = nullptr;
  ExecutorOptions options_;
  bool tracing_ = false;
  std::vector<TraceEvent> trace_;
  size_t eventCount_ = 0;
  size_t doneSize_ = 0;
  /// Runs since load (each run's injected delays differ).
  uint64_t runs_ = 0;
  int ssdFile_ = -1;
  uint64_t ssdBytes_ = 0;
  uint64_t lastRunAllocations_ = 0;
  uint64_t graphReplays_ = 0;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_EXECUTOR_H
