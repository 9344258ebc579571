//===- Runtime.cpp - The CUDA runtime API over host memory ----------------===//
//
// Part of Strata's CUDA emulation (see Emulation.h).
//
// Memory: device, pinned and stream-ordered allocations are host memory.
//
// Streams: a stream is a queue of operations (work, an event record, an
// event wait). Nothing runs when it is enqueued: the queues are drained at
// the next synchronizing call (cudaStreamSynchronize, cudaStreamQuery,
// cudaEventSynchronize, cudaEventQuery, cudaDeviceSynchronize, a blocking
// copy), each stream run as far as its event waits allow, streams taken in
// the order STRATA_CUDA_EMULATION_ORDER names: `first` (default: the oldest
// stream first), `last` (the newest first) or `seed=N` (a random order).
// Work that reads what another stream writes without an event between them
// sees it written or not depending on that order, so running a program under
// both `first` and `last` shows a missing dependency as differing results. A
// wait for an event no stream will record is reported, not hung on.
//
// Graphs: while a stream captures, its operations (and those of streams that
// join the capture by waiting for an event recorded in it) go into the graph
// instead, their arguments fixed as CUDA fixes a captured kernel's
// parameters. cudaGraphLaunch enqueues one operation that replays the
// graph's streams under the same rules. What CUDA refuses during a capture
// is refused here too: synchronizing or querying, cudaMalloc / cudaFree /
// cudaHostAlloc / cudaFreeHost, waiting for an event recorded outside the
// capture, the legacy stream, and ending a capture a forked stream has not
// joined back.
//
// Errors: a bad launch configuration is returned by cudaGetLastError; a
// failure inside work (fail()) is sticky, as a GPU's illegal address is:
// every later synchronizing call returns it.
//
//===----------------------------------------------------------------------===//

#include "Emulation.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace strata::cuda_emulation {

void runGrid(const LaunchConfig &config, const std::function<void()> &thread,
             const std::string &what);

namespace {

struct Op {
  enum Kind { Work, Record, Wait } kind = Work;
  std::function<void()> work;
  std::string what;
  cudaEvent_t event = nullptr;
  /// Record: the record's number for its event; Wait: the record it waits
  /// for.
  uint64_t generation = 0;
};

struct Lane {
  int id = 0;
  std::deque<Op> ops;
};

} // namespace
} // namespace strata::cuda_emulation

using strata::cuda_emulation::Lane;
using strata::cuda_emulation::Op;

struct CUgraph_st {
  /// One lane per stream that took part in the capture, by stream id.
  std::map<int, Lane> lanes;
  cudaStream_t origin = nullptr;
  bool invalidated = false;
  std::string invalidatedBy;
  /// Records made in the capture, per event: how many so far.
  std::unordered_map<cudaEvent_t, uint64_t> records;
  /// Where each record is: its lane and its index there.
  std::map<std::pair<cudaEvent_t, uint64_t>, std::pair<int, size_t>> recordAt;
  /// Stream-ordered allocations made during the capture (freed with the
  /// graph).
  std::vector<void *> allocations;
};

struct CUgraphExec_st {
  std::shared_ptr<CUgraph_st> graph;
};

struct CUstream_st {
  strata::cuda_emulation::Lane lane;
  std::shared_ptr<CUgraph_st> capture;
};

struct CUevent_st {
  /// Records issued outside captures, and how many of them have run.
  uint64_t issued = 0;
  uint64_t completed = 0;
  bool timing = true;
  std::chrono::steady_clock::time_point time;
  /// The capture this event was last recorded in, if its last record was.
  std::shared_ptr<CUgraph_st> capture;
  uint64_t captureGeneration = 0;
};

struct CUmemPoolHandle_st {};

namespace strata::cuda_emulation {
namespace {

struct State {
  std::recursive_mutex mutex;
  std::vector<cudaStream_t> streams; // creation order; [0] is the legacy one
  std::set<cudaEvent_t> events;
  int nextStreamId = 0;
  cudaError_t lastError = cudaSuccess;
  cudaError_t stickyError = cudaSuccess;
  std::unordered_map<const void *, int> sharedOptin;
  int device = 0;
  std::string order;
  std::mt19937_64 random;
  CUstream_st legacy;
  CUmemPoolHandle_st pool;

  State() {
    const char *env = std::getenv("STRATA_CUDA_EMULATION_ORDER");
    order = env ? env : "first";
    if (order.rfind("seed=", 0) == 0)
      random.seed(std::strtoull(order.c_str() + 5, nullptr, 10));
    else if (order != "first" && order != "last") {
      std::fprintf(stderr,
                   "STRATA_CUDA_EMULATION_ORDER=%s: expected first, last or "
                   "seed=N; using first\n",
                   order.c_str());
      order = "first";
    }
    legacy.lane.id = nextStreamId++;
    streams.push_back(&legacy);
  }
};

State &state() {
  static State *s = new State(); // never destroyed: streams outlive exit
  return *s;
}

cudaStream_t resolve(cudaStream_t stream) {
  return stream ? stream : &state().legacy;
}

int deviceCount() {
  const char *env = std::getenv("STRATA_CUDA_EMULATION_DEVICES");
  int n = env ? std::atoi(env) : 1;
  return n > 0 ? n : 1;
}

/// Whether a capture is under way (any stream capturing).
bool capturing() {
  for (cudaStream_t s : state().streams)
    if (s->capture)
      return true;
  return false;
}

/// Ends every capture with `why` (CUDA invalidates the capture when a
/// prohibited call is made during it).
cudaError_t refuseDuringCapture(const char *call) {
  if (!capturing())
    return cudaSuccess;
  for (cudaStream_t s : state().streams)
    if (s->capture && !s->capture->invalidated) {
      s->capture->invalidated = true;
      s->capture->invalidatedBy = call;
    }
  std::fprintf(stderr, "CUDA emulation: %s during a stream capture\n", call);
  return cudaErrorStreamCaptureUnsupported;
}

/// Runs the lanes' operations until all are empty, taking lanes in the
/// configured order, each as far as its waits allow. `completed` holds, per
/// event, the last record that has run. False (and `why`) when every
/// non-empty lane waits for a record that no lane will make.
bool drainLanes(std::vector<Lane *> lanes,
                std::unordered_map<cudaEvent_t, uint64_t> &completed,
                std::string &why) {
  State &st = state();
  if (st.order == "last")
    std::reverse(lanes.begin(), lanes.end());
  for (;;) {
    std::vector<Lane *> ready;
    bool any = false;
    for (Lane *l : lanes) {
      if (l->ops.empty())
        continue;
      any = true;
      const Op &head = l->ops.front();
      if (head.kind != Op::Wait || completed[head.event] >= head.generation)
        ready.push_back(l);
    }
    if (!any)
      return true;
    if (ready.empty()) {
      why = "every stream with work waits for an event record that no "
            "stream will make";
      for (Lane *l : lanes)
        l->ops.clear();
      return false;
    }
    Lane *pick = ready.front();
    if (st.order.rfind("seed=", 0) == 0)
      pick = ready[st.random() % ready.size()];
    while (!pick->ops.empty()) {
      Op &head = pick->ops.front();
      if (head.kind == Op::Wait) {
        if (completed[head.event] < head.generation)
          break;
      } else if (head.kind == Op::Record) {
        completed[head.event] =
            std::max(completed[head.event], head.generation);
        if (head.work)
          head.work();
      } else if (st.stickyError == cudaSuccess) {
        head.work();
      }
      pick->ops.pop_front();
    }
  }
}

/// Runs every stream's queued operations.
cudaError_t drainAll() {
  State &st = state();
  std::vector<Lane *> lanes;
  for (cudaStream_t s : st.streams)
    lanes.push_back(&s->lane);
  std::unordered_map<cudaEvent_t, uint64_t> completed;
  for (cudaEvent_t e : st.events)
    completed[e] = e->completed;
  std::string why;
  if (!drainLanes(lanes, completed, why))
    fail(cudaErrorLaunchFailure, "stream deadlock: " + why);
  for (cudaEvent_t e : st.events)
    e->completed = std::max(e->completed, completed[e]);
  return st.stickyError;
}

/// A synchronizing call: refused during a capture, else drains.
cudaError_t synchronize(const char *call) {
  if (cudaError_t e = refuseDuringCapture(call))
    return e;
  return drainAll();
}

cudaError_t add(cudaStream_t stream, Op op) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  stream = resolve(stream);
  if (stream == &st.legacy && capturing())
    return refuseDuringCapture("work on the legacy default stream");
  if (std::shared_ptr<CUgraph_st> g = stream->capture) {
    if (g->invalidated)
      return cudaErrorStreamCaptureInvalidated;
    Lane &lane = g->lanes[stream->lane.id];
    lane.id = stream->lane.id;
    lane.ops.push_back(std::move(op));
    return cudaSuccess;
  }
  stream->lane.ops.push_back(std::move(op));
  return cudaSuccess;
}

double nowMs(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t.time_since_epoch())
      .count();
}

} // namespace

cudaError_t enqueue(cudaStream_t stream, std::function<void()> work,
                    const char *what) {
  Op op;
  op.work = std::move(work);
  op.what = what;
  return add(stream, std::move(op));
}

void fail(cudaError_t error, const std::string &message) {
  State &st = state();
  if (st.stickyError == cudaSuccess) {
    st.stickyError = error;
    std::fprintf(stderr, "CUDA emulation: %s\n", message.c_str());
  }
}

void launchGrid(const LaunchConfig &config, std::function<void()> thread) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  const dim3 &g = config.grid, &b = config.block;
  uint64_t threads = uint64_t(b.x) * b.y * b.z;
  int optin = 48 * 1024;
  if (auto it = st.sharedOptin.find(config.kernel); it != st.sharedOptin.end())
    optin = std::max(optin, it->second);
  const char *bad = nullptr;
  if (g.x == 0 || g.y == 0 || g.z == 0 || threads == 0)
    bad = "an empty grid or block";
  else if (threads > 1024 || b.z > 64)
    bad = "more than 1024 threads a block";
  else if (g.y > 65535 || g.z > 65535 || g.x > 2147483647u)
    bad = "a grid dimension past its limit";
  else if (config.sharedBytes > size_t(optin))
    bad = "more dynamic shared memory than the kernel opted in to "
          "(cudaFuncSetAttribute)";
  if (bad) {
    std::fprintf(stderr, "CUDA emulation: invalid launch: %s\n", bad);
    st.lastError = cudaErrorInvalidConfiguration;
    return;
  }
  char what[160];
  std::snprintf(what, sizeof(what), "kernel %p <<<(%u, %u, %u), (%u, %u, %u), %zu>>>",
                config.kernel, g.x, g.y, g.z, b.x, b.y, b.z,
                config.sharedBytes);
  std::string name = what;
  cudaError_t e = enqueue(
      config.stream,
      [config, thread = std::move(thread), name] {
        runGrid(config, thread, name);
      },
      what);
  if (e != cudaSuccess)
    st.lastError = e;
}

} // namespace strata::cuda_emulation

using namespace strata::cuda_emulation;

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  case cudaErrorInitializationError: return "cudaErrorInitializationError";
  case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
  case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
  case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
  case cudaErrorNotReady: return "cudaErrorNotReady";
  case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
  case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
  case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
  case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
  case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
  case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
  case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  case cudaErrorLaunchFailure: return "unspecified launch failure (emulated)";
  case cudaErrorStreamCaptureUnsupported:
    return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated:
    return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureUnjoined:
    return "capture was not joined back into the origin stream";
  case cudaErrorStreamCaptureIsolation:
    return "dependency on an event recorded outside the capture";
  default: return cudaGetErrorName(error);
  }
}

cudaError_t cudaGetLastError() {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  cudaError_t e = st.lastError != cudaSuccess ? st.lastError : st.stickyError;
  st.lastError = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  State &st = state();
  return st.lastError != cudaSuccess ? st.lastError : st.stickyError;
}

cudaError_t cudaGetDeviceCount(int *count) {
  *count = deviceCount();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= deviceCount())
    return cudaErrorInvalidDevice;
  state().device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = state().device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (device < 0 || device >= deviceCount())
    return cudaErrorInvalidDevice;
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "CUDA emulation on the CPU");
  prop->totalGlobalMem = size_t(16) << 30;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = 227 * 1024; // an H100's
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  // Few multiprocessors: grids sized by them are small, so grid-stride
  // loops take several turns.
  const char *env = std::getenv("STRATA_CUDA_EMULATION_SMS");
  prop->multiProcessorCount = env && std::atoi(env) > 0 ? std::atoi(env) : 2;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  std::lock_guard<std::recursive_mutex> lock(state().mutex);
  return synchronize("cudaDeviceSynchronize");
}

namespace {

/// Host memory for cudaMalloc / cudaHostAlloc, `alignment`-aligned (CUDA's
/// allocations are at least 256-byte aligned); refused during a capture.
cudaError_t allocate(void **ptr, size_t bytes, size_t alignment,
                     const char *call) {
  std::lock_guard<std::recursive_mutex> lock(state().mutex);
  if (cudaError_t e = refuseDuringCapture(call))
    return e;
  *ptr = std::aligned_alloc(
      alignment, (std::max<size_t>(bytes, 1) + alignment - 1) / alignment *
                     alignment);
  return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

/// cudaFree / cudaFreeHost: they wait for the device (queued work may still
/// read the memory); refused during a capture.
cudaError_t release(void *ptr, const char *call) {
  std::lock_guard<std::recursive_mutex> lock(state().mutex);
  if (cudaError_t e = refuseDuringCapture(call))
    return e;
  drainAll();
  std::free(ptr);
  return cudaSuccess;
}

} // namespace

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  return allocate(ptr, bytes, 256, "cudaMalloc");
}

cudaError_t cudaFree(void *ptr) { return release(ptr, "cudaFree"); }

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags) {
  return allocate(ptr, bytes, 4096, "cudaHostAlloc");
}

cudaError_t cudaFreeHost(void *ptr) { return release(ptr, "cudaFreeHost"); }

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  *ptr = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!*ptr)
    return cudaErrorMemoryAllocation;
  if (std::shared_ptr<CUgraph_st> g = resolve(stream)->capture)
    g->allocations.push_back(*ptr);
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  // During a capture the graph owns the memory until it is destroyed.
  if (resolve(stream)->capture)
    return cudaSuccess;
  return enqueue(stream, [ptr] { std::free(ptr); }, "cudaFreeAsync");
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device) {
  *pool = &state().pool;
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr,
                                    void *value) {
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind) {
  std::lock_guard<std::recursive_mutex> lock(state().mutex);
  if (cudaError_t e = synchronize("cudaMemcpy"))
    return e;
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes && (!dst || !src))
    return cudaErrorInvalidValue;
  return enqueue(
      stream, [dst, src, bytes] { std::memmove(dst, src, bytes); },
      "cudaMemcpyAsync");
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes,
                            cudaStream_t stream) {
  if (bytes && !dst)
    return cudaErrorInvalidValue;
  return enqueue(
      stream, [dst, value, bytes] { std::memset(dst, value, bytes); },
      "cudaMemsetAsync");
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  // The flags do not matter here: the legacy stream's implicit
  // synchronization with blocking streams is not modelled (the backend's
  // streams are all non-blocking).
  auto *s = new CUstream_st();
  s->lane.id = st.nextStreamId++;
  st.streams.push_back(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  if (!stream || stream == &st.legacy)
    return cudaErrorInvalidResourceHandle;
  // Its queued work still runs, as on a GPU.
  drainAll();
  st.streams.erase(std::find(st.streams.begin(), st.streams.end(), stream));
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(state().mutex);
  return synchronize("cudaStreamSynchronize");
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(state().mutex);
  return synchronize("cudaStreamQuery");
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned flags) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  if (!event)
    return cudaErrorInvalidResourceHandle;
  stream = resolve(stream);
  Op op;
  op.kind = Op::Wait;
  op.event = event;
  op.what = "cudaStreamWaitEvent";
  if (event->capture) {
    std::shared_ptr<CUgraph_st> g = event->capture;
    if (stream->capture && stream->capture != g)
      return refuseDuringCapture("waiting for an event of another capture");
    // The stream joins the capture.
    stream->capture = g;
    op.generation = event->captureGeneration;
    return add(stream, std::move(op));
  }
  if (stream->capture) {
    refuseDuringCapture("waiting for an event recorded outside the capture");
    return cudaErrorStreamCaptureIsolation;
  }
  op.generation = event->issued;
  return add(stream, std::move(op));
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
                               void *userData) {
  return enqueue(stream, [fn, userData] { fn(userData); },
                 "cudaLaunchHostFunc");
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  auto *e = new CUevent_st();
  e->timing = !(flags & cudaEventDisableTiming);
  st.events.insert(e);
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  if (!st.events.erase(event))
    return cudaErrorInvalidResourceHandle;
  // Queued waits and records may still name it; they run first.
  drainAll();
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  if (!event)
    return cudaErrorInvalidResourceHandle;
  stream = resolve(stream);
  Op op;
  op.kind = Op::Record;
  op.event = event;
  op.what = "cudaEventRecord";
  if (std::shared_ptr<CUgraph_st> g = stream->capture) {
    op.generation = ++g->records[event];
    event->capture = g;
    event->captureGeneration = op.generation;
    Lane &lane = g->lanes[stream->lane.id];
    g->recordAt[{event, op.generation}] = {stream->lane.id, lane.ops.size()};
    return add(stream, std::move(op));
  }
  event->capture = nullptr;
  op.generation = ++event->issued;
  if (event->timing)
    op.work = [event] { event->time = std::chrono::steady_clock::now(); };
  return add(stream, std::move(op));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  std::lock_guard<std::recursive_mutex> lock(state().mutex);
  return synchronize("cudaEventSynchronize");
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  // A query is a synchronizing call here: the queues run, and then every
  // recorded event has completed.
  std::lock_guard<std::recursive_mutex> lock(state().mutex);
  return synchronize("cudaEventQuery");
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  std::lock_guard<std::recursive_mutex> lock(state().mutex);
  if (!start || !end || !start->timing || !end->timing)
    return cudaErrorInvalidResourceHandle;
  if (start->completed < start->issued || end->completed < end->issued ||
      !start->issued || !end->issued)
    return cudaErrorNotReady;
  *ms = float(nowMs(end->time) - nowMs(start->time));
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                   cudaStreamCaptureMode mode) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  if (!stream || stream == &st.legacy)
    return cudaErrorStreamCaptureUnsupported;
  if (stream->capture)
    return cudaErrorStreamCaptureUnsupported;
  auto g = std::make_shared<CUgraph_st>();
  g->origin = stream;
  stream->capture = g;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  std::shared_ptr<CUgraph_st> g = stream ? stream->capture : nullptr;
  if (!g || g->origin != stream)
    return cudaErrorStreamCaptureUnmatched;
  for (cudaStream_t s : st.streams)
    if (s->capture == g)
      s->capture = nullptr;
  for (cudaEvent_t e : st.events)
    if (e->capture == g)
      e->capture = nullptr;
  *graph = nullptr;
  if (g->invalidated) {
    std::fprintf(stderr, "CUDA emulation: capture invalidated by %s\n",
                 g->invalidatedBy.c_str());
    return cudaErrorStreamCaptureInvalidated;
  }
  // Every other stream's last work must be joined into the origin: the
  // origin waits for a record made after it.
  int originId = stream->lane.id;
  std::map<int, size_t> joinedUpTo;
  for (const Op &op : g->lanes[originId].ops)
    if (op.kind == Op::Wait) {
      auto [lane, index] = g->recordAt.at({op.event, op.generation});
      joinedUpTo[lane] = std::max(joinedUpTo[lane], index + 1);
    }
  for (auto &[id, lane] : g->lanes) {
    if (id == originId)
      continue;
    size_t lastWork = 0;
    for (size_t i = 0; i < lane.ops.size(); ++i)
      if (lane.ops[i].kind != Op::Wait)
        lastWork = i + 1;
    if (lastWork > joinedUpTo[id]) {
      std::fprintf(stderr,
                   "CUDA emulation: a stream's captured work is not joined "
                   "back into the capture's origin stream\n");
      return cudaErrorStreamCaptureUnjoined;
    }
  }
  *graph = new CUgraph_st(std::move(*g));
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  if (!graph)
    return cudaErrorInvalidValue;
  auto copy = std::make_shared<CUgraph_st>();
  copy->lanes = graph->lanes;
  // The allocations made during the capture stay with the executable.
  copy->allocations = std::move(graph->allocations);
  graph->allocations.clear();
  *exec = new CUgraphExec_st{copy};
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph)
    return cudaErrorInvalidValue;
  for (void *p : graph->allocations)
    std::free(p);
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (!exec)
    return cudaErrorInvalidValue;
  std::lock_guard<std::recursive_mutex> lock(state().mutex);
  drainAll();
  for (void *p : exec->graph->allocations)
    std::free(p);
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec)
    return cudaErrorInvalidValue;
  std::shared_ptr<CUgraph_st> g = exec->graph;
  return enqueue(
      stream,
      [g] {
        // A fresh copy of the graph's streams each replay; the records it
        // waits for are its own.
        std::map<int, Lane> lanes = g->lanes;
        std::vector<Lane *> order;
        for (auto &[id, lane] : lanes)
          order.push_back(&lane);
        std::unordered_map<cudaEvent_t, uint64_t> completed;
        std::string why;
        if (!drainLanes(order, completed, why))
          fail(cudaErrorLaunchFailure, "graph deadlock: " + why);
      },
      "cudaGraphLaunch");
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr,
                                 int value) {
  State &st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mutex);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return cudaErrorInvalidValue;
  if (value < 0 || value > 227 * 1024)
    return cudaErrorInvalidValue;
  st.sharedOptin[func] = value;
  return cudaSuccess;
}
