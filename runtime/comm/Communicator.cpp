//===- Communicator.cpp - Collectives between ranks over MPI --------------===//

#include "strata/Runtime/Communicator.h"

#include "strata/Runtime/NarrowFloat.h"

// The C API only: no OpenMPI C++ bindings.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <sys/prctl.h>

namespace strata::runtime {
namespace {

/// A timeout notice of channel c has tag kNoticeTag + c.
constexpr int kNoticeTag = 7701;
/// "What do you wait for?": the question carries {the asker's waiter, a
/// number}, its answer has tag kAnswerTag + that waiter and the number.
constexpr int kQuestionTag = 7710;
constexpr int kAnswerTag = 7720;
/// How long a rank that timed out listens for its peers' notices, and for
/// their answers.
constexpr double kGraceSeconds = 2.0, kAskSeconds = 0.5;
/// Polls of a wait between two looks at the questions asked.
constexpr int kSpinsPerLook = 64;

/// The pause between two polls of a request once a waiter has spun a
/// while. With `precise`, the thread's timer slack is set to 1 us the
/// first time: Linux lets a normal thread's sleep end up to its slack
/// (50 us by default) late, and while one rank's waiter overslept, its
/// peer spun through its own polls and slept too, so that two ranks on
/// their own cores settled into exchanging 64 bytes in about 180 us
/// instead of 2 (strata-sim --calibrate's intra_latency read one or the
/// other from round to round: 8 of 12 rounds slow; with the slack, 0 of
/// 12). Where the machine's ranks outnumber its cores, the default slack
/// is kept: the emulated cluster's 2-hop step (4 ranks on 2 cores) took
/// 116-137 ms with it against 100-116 without.
void pauseBetweenPolls(bool precise) {
  static thread_local bool set = false;
  if (precise && !set) {
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    set = true;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

/// A hash of this machine's boot id (one for every network namespace of
/// it, as tools/cluster.sh's emulated nodes are); 0 where it cannot be
/// read.
uint64_t machineId() {
  std::FILE *f = std::fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f)
    return 0;
  char id[64] = {};
  size_t n = std::fread(id, 1, sizeof(id) - 1, f);
  std::fclose(f);
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (size_t i = 0; i < n; ++i)
    h = (h ^ uint8_t(id[i])) * 1099511628211ull;
  return h;
}

using Clock = std::chrono::steady_clock;

Clock::duration span(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(seconds));
}

Clock::time_point after(double seconds) { return Clock::now() + span(seconds); }

MPI_Datatype mpiType(DType t) {
  switch (t) {
  case DType::F32: return MPI_FLOAT;
  case DType::F64: return MPI_DOUBLE;
  case DType::I64: return MPI_INT64_T;
  case DType::I32: return MPI_INT32_T;
  case DType::BF16:
  case DType::F16: return MPI_UINT16_T; // summed by narrowSum's ops
  default: return MPI_DATATYPE_NULL;
  }
}

/// bf16 / fp16 sums (--reduce-dtype narrow): each pair added in f32 and
/// rounded back, as NCCL sums them.
template <bool Bf16>
void sumNarrow(void *in, void *inout, int *len, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) {
    if constexpr (Bf16)
      b[i] = bf16Bits(fromBf16Bits(a[i]) + fromBf16Bits(b[i]));
    else
      b[i] = fp16Bits(fromFp16Bits(a[i]) + fromFp16Bits(b[i]));
  }
}

/// The MPI operation that sums elements of `t`.
MPI_Op sumOp(DType t) {
  if (t != DType::BF16 && t != DType::F16)
    return MPI_SUM;
  // Made once, after MPI_Init (the first reduction), never freed.
  static MPI_Op bf16 = MPI_OP_NULL, fp16 = MPI_OP_NULL;
  static std::once_flag made;
  std::call_once(made, [] {
    MPI_Op_create(&sumNarrow<true>, /*commute=*/1, &bf16);
    MPI_Op_create(&sumNarrow<false>, /*commute=*/1, &fp16);
  });
  return t == DType::BF16 ? bf16 : fp16;
}

MPI_Comm comm(void *c) { return static_cast<MPI_Comm>(c); }

std::string list(const std::vector<int> &ranks) {
  std::string out;
  for (int r : ranks) {
    if (!out.empty())
      out += ',';
    out += std::to_string(r);
  }
  return out;
}

} // namespace

namespace {

/// Ends this process if setup (or MPI_Finalize) has not finished within
/// `seconds`: MPI_Init, the communicators' creation and MPI_Finalize are
/// blocking exchanges with every rank, which a rank stopped before them
/// (SIGSTOP, a hung node) would leave waiting forever, found by
/// tests/reliability/kill_anything.py. Exiting lets the launcher end the
/// job.
class SetupWatchdog {
public:
  SetupWatchdog(double seconds, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (done_.wait_for(lock, std::chrono::duration<double>(seconds),
                         [this] { return finished_; }))
        return;
      const char *rank = std::getenv("OMPI_COMM_WORLD_RANK");
      if (!rank)
        rank = std::getenv("PMI_RANK");
      char line[512];
      std::snprintf(line, sizeof(line),
                    "strata-run: error: rank %s: %s did not complete within "
                    "%g s (a rank that never started or was stopped?); "
                    "exiting so the launcher ends the job\n",
                    rank ? rank : "?", what_.c_str(), seconds);
      std::fputs(line, stderr);
      std::fflush(stderr);
      std::_Exit(3);
    });
  }
  ~SetupWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
    }
    done_.notify_all();
    thread_.join();
  }

private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::thread thread_;
};

/// A task srun started (SLURM_STEP_ID and SLURM_PROCID set) finds its peers
/// through PMI only when srun offered it one (--mpi=pmix; Debian's OpenMPI
/// reads PMIx alone): without, MPI_Init would abort with a page of text.
Status checkSlurmLaunch() {
  if (!std::getenv("SLURM_STEP_ID") || !std::getenv("SLURM_PROCID"))
    return Status::ok();
  if (std::getenv("PMIX_RANK") || std::getenv("PMI_RANK") ||
      std::getenv("OMPI_COMM_WORLD_RANK"))
    return Status::ok();
  std::string task = std::getenv("SLURM_PROCID");
  return Status::error(
      "task " + task +
      " was started by srun without a PMI for MPI to find the other tasks "
      "through: run srun --mpi=pmix (srun --mpi=list), or set "
      "MpiDefault=pmix in slurm.conf");
}

/// Under srun, MPI's rank and size must be Slurm's task id and task count
/// (SLURM_PROCID, SLURM_NTASKS): anything else means the tasks did not form
/// one communicator.
Status checkSlurmRanks(int rank, int size) {
  const char *task = std::getenv("SLURM_PROCID");
  const char *tasks = std::getenv("SLURM_NTASKS");
  if (!std::getenv("SLURM_STEP_ID") || !task || !tasks)
    return Status::ok();
  if (std::atoi(task) == rank && std::atoi(tasks) == size)
    return Status::ok();
  return Status::error("MPI made this rank " + std::to_string(rank) + " of " +
                       std::to_string(size) + " but srun started it as task " +
                       task + " of " + tasks +
                       " (SLURM_PROCID, SLURM_NTASKS): the tasks did not "
                       "form one MPI job; run srun --mpi=pmix");
}

/// Checks the launcher's placement against the artifact's ranks per node.
/// One host for every rank is the emulation of nodes in one machine (any K
/// goes); otherwise each node must hold K ranks, numbered node-major, as
/// the groups assume. The launcher says where a rank is: Open MPI through
/// OMPI_COMM_WORLD_LOCAL_RANK / _LOCAL_SIZE, MPICH's Hydra through
/// MPI_LOCALRANKID / MPI_LOCALNRANKS; Slurm's SLURM_LOCALID /
/// SLURM_TASKS_PER_NODE.
Status checkPlacement(int rank, int world, int ranksPerNode) {
  const char *names[][2] = {
      {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"SLURM_LOCALID", "SLURM_TASKS_PER_NODE"}};
  for (auto &name : names) {
    const char *localRank = std::getenv(name[0]);
    const char *localSize = std::getenv(name[1]);
    if (!localRank || !localSize)
      continue;
    // SLURM_TASKS_PER_NODE reads "2(x4)" for 4 nodes of 2.
    int local = std::atoi(localRank), size = std::atoi(localSize);
    if (size <= 0 || size >= world)
      return Status::ok();
    if (size != ranksPerNode)
      return Status::error(
          "the launcher placed " + std::to_string(size) +
          " ranks on this node (" + name[1] + "=" + localSize +
          ") but the artifact was compiled with --gpus-per-node " +
          std::to_string(ranksPerNode) + "; launch " +
          std::to_string(ranksPerNode) +
          " ranks per node or compile for --gpus-per-node " +
          std::to_string(size));
    if (local != rank % ranksPerNode)
      return Status::error(
          "rank " + std::to_string(rank) + " is local rank " + localRank +
          " of its node (" + name[0] + ") but --gpus-per-node " +
          std::to_string(ranksPerNode) + " numbers ranks node-major (local "
          "rank " + std::to_string(rank % ranksPerNode) +
          "); map ranks to nodes in order (mpirun --map-by slot)");
    return Status::ok();
  }
  return Status::ok();
}

} // namespace

struct Communicator::Answer {
  MPI_Request request = MPI_REQUEST_NULL;
  struct Body {
    uint64_t number;
    /// Seconds until the answerer ends the job (-1: it waits for nothing).
    double abortWithin;
    char waitsFor[496];
  } body;
};

struct Communicator::PendingSend {
  MPI_Request request;
  std::string bytes;
};

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  (void)finishSends();
  if (p2p_) {
    MPI_Comm m = comm(p2p_);
    MPI_Comm_free(&m);
  }
  for (auto &channel : comms_)
    for (void *&c : channel)
      if (c) {
        MPI_Comm m = comm(c);
        MPI_Comm_free(&m);
      }
  if (notices_) {
    MPI_Comm m = comm(notices_);
    MPI_Comm_free(&m);
  }
}

Status Communicator::create(const TopologyInfo &topology, double timeoutSeconds,
                            std::unique_ptr<Communicator> &out) {
  SetupWatchdog watchdog(timeoutSeconds,
                         "starting MPI and the communicators");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    if (Status s = checkSlurmLaunch(); !s)
      return s;
    // The collective streams' threads and the main thread call MPI, never
    // two at once: every call holds the communicator's lock.
    int provided;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED)
      return Status::error("this MPI library does not support "
                           "MPI_THREAD_SERIALIZED, which the collective "
                           "streams need");
    static double finalizeSeconds = 0;
    finalizeSeconds = timeoutSeconds;
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized)
        return;
      // MPI_Finalize waits for every rank too.
      SetupWatchdog watchdog(finalizeSeconds, "finishing MPI");
      MPI_Finalize();
    });
  }
  std::unique_ptr<Communicator> c(new Communicator());
  c->topology_ = topology;
  c->timeout_ = timeoutSeconds;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &c->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (Status s = checkSlurmRanks(c->rank_, size); !s)
    return s;
  if (size != topology.world)
    return Status::error("the artifact was compiled for --world " +
                         std::to_string(topology.world) + " but " +
                         std::to_string(size) +
                         " ranks were launched (mpirun -np " +
                         std::to_string(topology.world) + ")");
  int p = topology.partition, r = c->rank_;
  int k = std::max(topology.ranksPerNode, 1);
  if (Status placed = checkPlacement(r, size, k); !placed)
    return placed;
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int hostLength = 0;
  MPI_Get_processor_name(host, &hostLength);
  std::vector<char> hosts(size_t(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts.data(),
                MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
  for (int i = 0; i < size; ++i)
    c->hosts_.emplace_back(&hosts[size_t(i) * MPI_MAX_PROCESSOR_NAME]);
  uint64_t machine = machineId();
  std::vector<uint64_t> machines(size_t(size), 0);
  MPI_Allgather(&machine, 1, MPI_UINT64_T, machines.data(), 1, MPI_UINT64_T,
                MPI_COMM_WORLD);
  size_t sharing =
      size_t(std::count(machines.begin(), machines.end(), machine));
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  c->precisePauses_ = machine != 0 && sharing <= cores;
  // Colours in Group order; within a colour, ranks keep their order.
  int colors[kGroups] = {r / p, r % (p * std::max(topology.stages, 1)), 0,
                         r / p * k + r % k, r / k};
  // Channel 1 (the reduce stream) duplicates channel 0's communicators:
  // the same ranks in the same order, but collectives never match across.
  for (int i = 0; i < kGroups; ++i) {
    MPI_Comm m, dup;
    MPI_Comm_split(MPI_COMM_WORLD, colors[i], r, &m);
    MPI_Comm_dup(m, &dup);
    c->comms_[0][i] = m;
    c->comms_[1][i] = dup;
  }
  for (int g = 0; g < kGroups; ++g)
    c->members_[g] = groupMembers(topology, Group(g), c->rank_);
  MPI_Comm notices;
  MPI_Comm_dup(MPI_COMM_WORLD, &notices);
  c->notices_ = notices;
  c->answers_ = std::make_unique<Answer[]>(kAnswerSlots);
  c->asked_ = std::make_unique<uint64_t[]>(2 * kWaiters * kQuestionSlots);
  if (topology.stages > 1) {
    MPI_Comm p2p;
    MPI_Comm_dup(MPI_COMM_WORLD, &p2p);
    c->p2p_ = p2p;
  }
  out = std::move(c);
  return Status::ok();
}

namespace {
constexpr int kStageTag = 7702;
} // namespace

Status Communicator::sendToStage(int stage, const void *data, size_t bytes,
                                 const std::string &what) {
  if (!p2p_ || stage < 0 || stage >= topology_.stages || stage == this->stage())
    return Status::error(what + ": no stage " + std::to_string(stage) +
                         " to send to from stage " +
                         std::to_string(this->stage()));
  if (bytes > size_t(std::numeric_limits<int>::max()))
    return Status::error(what + ": " + std::to_string(bytes) +
                         " bytes is more than one message carries");
  std::lock_guard<std::mutex> lock(mpi_);
  // Reap the sends that completed.
  for (size_t i = 0; i < sends_.size();) {
    int done = 0;
    MPI_Test(&sends_[i]->request, &done, MPI_STATUS_IGNORE);
    if (done) {
      sends_[i] = std::move(sends_.back());
      sends_.pop_back();
    } else {
      ++i;
    }
  }
  auto pending = std::make_unique<PendingSend>();
  pending->bytes.assign(static_cast<const char *>(data), bytes);
  MPI_Isend(pending->bytes.data(), int(bytes), MPI_BYTE,
            rankOnStage(topology_, rank_, stage), kStageTag, comm(p2p_),
            &pending->request);
  sends_.push_back(std::move(pending));
  p2pBytes_ += double(bytes);
  return Status::ok();
}

Status Communicator::recvFromStage(int stage, void *data, size_t bytes,
                                   const std::string &what) {
  if (!p2p_ || stage < 0 || stage >= topology_.stages || stage == this->stage())
    return Status::error(what + ": no stage " + std::to_string(stage) +
                         " to receive from on stage " +
                         std::to_string(this->stage()));
  int peer = rankOnStage(topology_, rank_, stage);
  MPI_Request request;
  {
    std::lock_guard<std::mutex> lock(mpi_);
    MPI_Irecv(data, int(bytes), MPI_BYTE, peer, kStageTag, comm(p2p_),
              &request);
  }
  auto started = Clock::now();
  auto deadline = after(timeout_);
  std::string from = what + " from stage " + std::to_string(stage) +
                     " (rank " + std::to_string(peer) + ")";
  beginWait(kChannels, from, deadline + span(kAskSeconds));
  MPI_Status status;
  for (int spins = 0;; ++spins) {
    int done = 0;
    {
      std::lock_guard<std::mutex> lock(mpi_);
      MPI_Test(&request, &done, &status);
      if (spins % kSpinsPerLook == 0)
        answerQuestions();
    }
    if (done) {
      endWait(kChannels);
      recvWait_ +=
          std::chrono::duration<double>(Clock::now() - started).count();
      break;
    }
    if (Clock::now() > deadline) {
      // The peer may itself wait for a rank that is gone: let it say so.
      std::string waits =
          waitForThoseWaiting({peer}, kChannels, timeout_ + 2 * kGraceSeconds)
              .front();
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%g", timeout_);
      std::string line = "strata-run: error: rank " + std::to_string(rank_) +
                         " (stage " + std::to_string(this->stage()) +
                         "): waited " + seconds + " s for " + from +
                         (waits.empty() ? std::string()
                                        : ", which waits for " + waits) +
                         "; aborting every rank\n";
      std::fwrite(line.data(), 1, line.size(), stderr);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
      std::abort();
    }
    if (spins > 1000)
      pauseBetweenPolls(precisePauses_);
  }
  int received = 0;
  MPI_Get_count(&status, MPI_BYTE, &received);
  if (size_t(received) != bytes)
    return Status::error(what + " from stage " + std::to_string(stage) +
                         ": got " + std::to_string(received) +
                         " bytes, expected " + std::to_string(bytes));
  return Status::ok();
}

Status Communicator::finishSends() {
  // Polled, the lock released between polls (a stream may still be in a
  // collective).
  for (auto &pending : sends_)
    for (int done = 0; !done;) {
      {
        std::lock_guard<std::mutex> lock(mpi_);
        MPI_Test(&pending->request, &done, MPI_STATUS_IGNORE);
      }
      if (!done)
        pauseBetweenPolls(precisePauses_);
    }
  sends_.clear();
  return Status::ok();
}

uint64_t Communicator::sequence(Group group, int channel) const {
  return sequence_[channel][int(group)].load();
}

int Communicator::indexIn(Group group) const {
  std::vector<int> m = members(group);
  return int(std::find(m.begin(), m.end(), rank_) - m.begin());
}

void Communicator::count(Group group, Kind kind, double bytes) {
  Link link;
  if (!ringLink(topology_, group, rank_, link))
    return;
  std::lock_guard<std::mutex> lock(countMutex_);
  traffic_[int(kind)][link] += bytes;
}

void Communicator::abortJob(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  // Not under the lock: a stream may hold it for a poll, and MPI_Abort
  // ends every rank whatever the other threads do.
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

std::string Communicator::describe(Group group, int channel,
                                   const std::string &what) const {
  return what + " #" + std::to_string(sequence_[channel][int(group)].load()) +
         " on the " + groupName(group) + " group {" + list(members(group)) +
         "}" + (channel ? std::string(" (reduce stream)") : std::string());
}

void Communicator::beginWait(int waiter, const std::string &what,
                             Clock::time_point abortBy) {
  std::lock_guard<std::mutex> lock(waitMutex_);
  Wait &w = waits_[waiter];
  w.active = true;
  std::snprintf(w.what, sizeof(w.what), "%s", what.c_str());
  w.abortBy = abortBy;
}

void Communicator::endWait(int waiter) {
  std::lock_guard<std::mutex> lock(waitMutex_);
  waits_[waiter].active = false;
}

void Communicator::answerQuestions() {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kQuestionTag, comm(notices_), &flag, &status);
    if (!flag)
      return;
    uint64_t question[2];
    MPI_Recv(question, 2, MPI_UINT64_T, status.MPI_SOURCE, kQuestionTag,
             comm(notices_), MPI_STATUS_IGNORE);
    Answer *answer = nullptr;
    for (int i = 0; i < kAnswerSlots && !answer; ++i) {
      int done = 0;
      MPI_Test(&answers_[i].request, &done, MPI_STATUS_IGNORE);
      if (done)
        answer = &answers_[i];
    }
    if (!answer || question[0] >= uint64_t(kWaiters))
      continue; // unanswered: the asker takes this rank for gone
    Answer::Body &body = answer->body;
    body.number = question[1];
    body.abortWithin = -1;
    body.waitsFor[0] = 0;
    {
      std::lock_guard<std::mutex> lock(waitMutex_);
      auto now = Clock::now();
      size_t used = 0;
      for (const Wait &w : waits_) {
        if (!w.active)
          continue;
        double within = std::max(
            std::chrono::duration<double>(w.abortBy - now).count(), 0.0);
        if (body.abortWithin < 0 || within < body.abortWithin)
          body.abortWithin = within;
        int n = std::snprintf(body.waitsFor + used,
                              sizeof(body.waitsFor) - used, "%s%s",
                              used ? " and " : "", w.what);
        used = std::min(sizeof(body.waitsFor) - 1, used + size_t(std::max(n, 0)));
      }
    }
    MPI_Isend(&body, int(sizeof(body)), MPI_BYTE, status.MPI_SOURCE,
              kAnswerTag + int(question[0]), comm(notices_),
              &answer->request);
  }
}

std::vector<std::string>
Communicator::waitForThoseWaiting(const std::vector<int> &missing, int waiter,
                                  double cap) {
  auto end = after(cap);
  // What each said last: a rank that answered once and then went silent
  // (it ended the job, or is ending it) is still named by what it waited for.
  std::vector<std::string> said(missing.size());
  if (missing.empty())
    return said;
  for (;;) {
    std::vector<double> within(missing.size(), -1);
    std::vector<bool> answered(missing.size());
    uint64_t number;
    {
      std::lock_guard<std::mutex> lock(mpi_);
      number = ++questions_;
      for (int peer : missing) {
        if (askedCount_[waiter] == kQuestionSlots)
          break; // a rank that keeps deferring: give up asking
        uint64_t *question =
            &asked_[2 * size_t(waiter * kQuestionSlots + askedCount_[waiter]++)];
        question[0] = uint64_t(waiter);
        question[1] = number;
        MPI_Request request;
        MPI_Isend(question, 2, MPI_UINT64_T, peer, kQuestionTag,
                  comm(notices_), &request);
        MPI_Request_free(&request);
      }
    }
    auto listenUntil = std::min(after(kAskSeconds), end);
    size_t answers = 0;
    while (Clock::now() < listenUntil && answers < missing.size()) {
      int flag = 0;
      MPI_Status status;
      Answer::Body body;
      {
        std::lock_guard<std::mutex> lock(mpi_);
        answerQuestions();
        MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag + waiter, comm(notices_), &flag,
                   &status);
        if (flag)
          MPI_Recv(&body, int(sizeof(body)), MPI_BYTE, status.MPI_SOURCE,
                   kAnswerTag + waiter, comm(notices_), MPI_STATUS_IGNORE);
      }
      if (!flag) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      auto it = std::find(missing.begin(), missing.end(), status.MPI_SOURCE);
      if (body.number != number || it == missing.end())
        continue; // an answer to an earlier question
      size_t i = size_t(it - missing.begin());
      if (answered[i])
        continue;
      answered[i] = true;
      ++answers;
      body.waitsFor[sizeof(body.waitsFor) - 1] = 0;
      if (body.waitsFor[0])
        said[i] = body.waitsFor;
      within[i] = body.abortWithin;
    }
    // Defer only while every missing rank waits elsewhere: each will end
    // the job itself, naming whom it waits for.
    double soonest = -1;
    for (size_t i = 0; i < missing.size(); ++i) {
      if (!answered[i] || within[i] < 0)
        return said;
      soonest = soonest < 0 ? within[i] : std::min(soonest, within[i]);
    }
    // (It asks its own missing ranks first, kAskSeconds.)
    auto until = std::min(after(soonest + kAskSeconds + 1.0), end);
    if (Clock::now() >= until)
      return said;
    {
      std::lock_guard<std::mutex> lock(waitMutex_);
      waits_[waiter].abortBy = until;
    }
    while (Clock::now() < until) {
      {
        std::lock_guard<std::mutex> lock(mpi_);
        answerQuestions();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (Clock::now() >= end)
      return said;
  }
}

void Communicator::abortStalled(Group group, int channel,
                                const std::string &what) {
  // Tell the group's other members this rank arrived, then listen for
  // theirs for a grace period: whoever stays silent never arrived. Each
  // channel's notices have a tag of their own (both streams may time out at
  // once) and name the channel: their collectives count apart.
  std::vector<int> m = members(group);
  uint64_t sequence = sequence_[channel][int(group)].load();
  uint64_t notice[3] = {uint64_t(group), uint64_t(channel), sequence};
  double grace = std::min(timeout_, kGraceSeconds);
  auto until = after(grace);
  {
    std::lock_guard<std::mutex> lock(waitMutex_);
    waits_[channel].abortBy = until;
  }
  std::vector<MPI_Request> sends;
  {
    std::lock_guard<std::mutex> lock(mpi_);
    for (int peer : m)
      if (peer != rank_) {
        sends.emplace_back();
        MPI_Isend(notice, 3, MPI_UINT64_T, peer, kNoticeTag + channel,
                  comm(notices_), &sends.back());
      }
  }
  std::set<int> arrived = {rank_};
  while (Clock::now() < until && arrived.size() < m.size()) {
    int flag = 0;
    MPI_Status status;
    uint64_t theirs[3];
    {
      std::lock_guard<std::mutex> lock(mpi_);
      answerQuestions();
      MPI_Iprobe(MPI_ANY_SOURCE, kNoticeTag + channel, comm(notices_), &flag,
                 &status);
      if (flag)
        MPI_Recv(theirs, 3, MPI_UINT64_T, status.MPI_SOURCE,
                 kNoticeTag + channel, comm(notices_), MPI_STATUS_IGNORE);
    }
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (theirs[0] == notice[0] && theirs[1] == notice[1] &&
        theirs[2] == notice[2])
      arrived.insert(status.MPI_SOURCE);
  }
  std::vector<int> missing;
  for (int peer : m)
    if (!arrived.count(peer))
      missing.push_back(peer);
  std::string absent =
      missing.empty() ? std::string()
                      : "rank(s) " + list(missing) + " never arrived (" +
                            nodesOf(missing) + ")";
  // From now on a rank that asks what this one waits for hears whom it
  // found missing too: if this rank's own line never reaches the launcher
  // (its abort races the output), the asker's line still names the rank at
  // the end of the chain and its node.
  if (!missing.empty()) {
    std::lock_guard<std::mutex> lock(waitMutex_);
    std::snprintf(waits_[channel].what, sizeof(waits_[channel].what),
                  "%s, where %s", describe(group, channel, what).c_str(),
                  absent.c_str());
  }
  // A missing rank that waits for another collective times out on its own:
  // its message names the rank at the end of the chain.
  std::vector<std::string> waits =
      waitForThoseWaiting(missing, channel, timeout_ + 2 * grace);
  std::string elsewhere;
  for (size_t i = 0; i < missing.size(); ++i)
    if (!waits[i].empty())
      elsewhere += "; rank " + std::to_string(missing[i]) + " waits for " +
                   waits[i];
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", timeout_);
  // One write, so the ranks' lines do not interleave.
  std::string line =
      "strata-run: error: rank " + std::to_string(rank_) + ": " +
      describe(group, channel, what) + " did not complete within " + seconds +
      " s: " +
      (missing.empty()
           ? std::string("every rank arrived but the collective did not "
                         "finish")
           : absent + elsewhere) +
      "; aborting every rank\n";
  // Tests only: a rank whose line and abort are lost keeps answering and
  // lets the job end from elsewhere (distributed.communicator.chain-muted).
  if (const char *muted = std::getenv("STRATA_COMM_TEST_MUTE_RANK");
      muted && std::atoi(muted) == rank_)
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mpi_);
        answerQuestions();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();
}

std::string Communicator::nodesOf(const std::vector<int> &ranks) const {
  int k = std::max(topology_.ranksPerNode, 1);
  std::string out;
  int last = -1;
  for (int r : ranks)
    if (r / k != last) {
      last = r / k;
      out += (out.empty() ? "node " : ", node ") + std::to_string(last);
      if (size_t(r) < hosts_.size())
        out += " on " + hosts_[r];
    }
  return out;
}

Status Communicator::waitAll(std::vector<void *> &requests, Group group,
                             int channel, const std::string &what) {
  auto deadline = after(timeout_);
  beginWait(channel, describe(group, channel, what),
            deadline + span(std::min(timeout_, kGraceSeconds)));
  std::vector<MPI_Request> r;
  for (void *p : requests)
    r.push_back(*static_cast<MPI_Request *>(p));
  for (int spins = 0;; ++spins) {
    int done = 0;
    {
      std::lock_guard<std::mutex> lock(mpi_);
      MPI_Testall(int(r.size()), r.data(), &done, MPI_STATUSES_IGNORE);
      if (spins % kSpinsPerLook == 0)
        answerQuestions();
    }
    if (done) {
      endWait(channel);
      return Status::ok();
    }
    if (Clock::now() > deadline)
      abortStalled(group, channel, what);
    if (spins > 1000)
      pauseBetweenPolls(precisePauses_);
  }
}

/// One grouped call: `start` issues buffer i's non-blocking collective and
/// returns its shard (all-gather, reduce-scatter) or buffer (all-reduce)
/// bytes, counted on the ring model under `kind`; then every request is
/// polled together.
template <typename Start>
Status Communicator::grouped(Group group, int channel, Kind kind,
                             const std::vector<Buffer> &buffers,
                             const char *what, Start start) {
  if (channel < 0 || channel >= kChannels)
    return Status::error(std::string(what) + ": no channel " +
                         std::to_string(channel));
  for (const Buffer &b : buffers)
    if (kind != Kind::AllGather && mpiType(b.dtype) == MPI_DATATYPE_NULL)
      return Status::error(std::string(what) + ": unsupported element type " +
                           std::string(name(b.dtype)));
  ++sequence_[channel][int(group)];
  double g = double(members(group).size());
  std::vector<MPI_Request> requests(buffers.size());
  {
    std::lock_guard<std::mutex> lock(mpi_);
    for (size_t i = 0; i < buffers.size(); ++i)
      count(group, kind,
            ringBytes(kind, int(g),
                      start(buffers[i], comm(comms_[channel][int(group)]),
                            &requests[i])));
  }
  std::vector<void *> pending;
  for (MPI_Request &r : requests)
    pending.push_back(&r);
  return waitAll(pending, group, channel, what);
}

Status Communicator::allGather(Group group, const std::vector<Buffer> &buffers,
                               int channel) {
  return grouped(group, channel, Kind::AllGather, buffers, "all_gather",
                 [](const Buffer &b, MPI_Comm c, MPI_Request *r) {
                   int bytes = static_cast<int>(b.count * byteWidth(b.dtype));
                   MPI_Iallgather(b.in, bytes, MPI_BYTE, b.out, bytes,
                                  MPI_BYTE, c, r);
                   return double(bytes);
                 });
}

Status Communicator::reduceScatterSum(Group group,
                                      const std::vector<Buffer> &buffers,
                                      int channel) {
  return grouped(group, channel, Kind::ReduceScatter, buffers,
                 "reduce_scatter",
                 [](const Buffer &b, MPI_Comm c, MPI_Request *r) {
                   MPI_Ireduce_scatter_block(b.in, b.out,
                                             static_cast<int>(b.count),
                                             mpiType(b.dtype), sumOp(b.dtype),
                                             c, r);
                   return double(b.count * byteWidth(b.dtype));
                 });
}

Status Communicator::allReduceSum(Group group,
                                  const std::vector<Buffer> &buffers,
                                  int channel) {
  return grouped(group, channel, Kind::AllReduce, buffers, "all_reduce",
                 [](const Buffer &b, MPI_Comm c, MPI_Request *r) {
                   const void *send = b.in == b.out ? MPI_IN_PLACE : b.in;
                   MPI_Iallreduce(send, b.out, static_cast<int>(b.count),
                                  mpiType(b.dtype), sumOp(b.dtype), c, r);
                   return double(b.count * byteWidth(b.dtype));
                 });
}

Status Communicator::sumOverWorld(double *values, size_t n,
                                  const std::string &what) {
  ++sequence_[0][int(Group::World)];
  MPI_Request request;
  {
    std::lock_guard<std::mutex> lock(mpi_);
    MPI_Iallreduce(MPI_IN_PLACE, values, static_cast<int>(n), MPI_DOUBLE,
                   MPI_SUM, comm(comms_[0][int(Group::World)]), &request);
  }
  std::vector<void *> pending = {&request};
  return waitAll(pending, Group::World, 0, what);
}

Status Communicator::gatherOverWorld(uint64_t value, std::vector<uint64_t> &out,
                                     const std::string &what) {
  ++sequence_[0][int(Group::World)];
  out.assign(size_t(topology_.world), 0);
  MPI_Request request;
  {
    std::lock_guard<std::mutex> lock(mpi_);
    MPI_Iallgather(&value, 1, MPI_UINT64_T, out.data(), 1, MPI_UINT64_T,
                   comm(comms_[0][int(Group::World)]), &request);
  }
  std::vector<void *> pending = {&request};
  return waitAll(pending, Group::World, 0, what);
}

Status Communicator::broadcastFromFirst(Group group, std::string &bytes,
                                        const std::string &what) {
  ++sequence_[0][int(group)];
  uint64_t size = bytes.size();
  MPI_Request request;
  {
    std::lock_guard<std::mutex> lock(mpi_);
    MPI_Ibcast(&size, 1, MPI_UINT64_T, 0, comm(comms_[0][int(group)]),
               &request);
  }
  std::vector<void *> pending = {&request};
  if (Status s = waitAll(pending, group, 0, what); !s)
    return s;
  bytes.resize(size);
  ++sequence_[0][int(group)];
  {
    std::lock_guard<std::mutex> lock(mpi_);
    MPI_Ibcast(bytes.data(), static_cast<int>(size), MPI_BYTE, 0,
               comm(comms_[0][int(group)]), &request);
  }
  pending = {&request};
  return waitAll(pending, group, 0, what);
}

} // namespace strata::runtime
