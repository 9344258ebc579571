//===- Checkpoint.cpp - Atomic checkpoints of the training state ----------===//
//
// One rank: DIR/step-%08d/{state.bin, index.json}: every PARAMETER, BUFFER
// and OPTIMIZER_STATE tensor by name. The folder is written as .tmp and
// renamed into place, then DIR/latest (the folder's name) is replaced the
// same way, so a kill at any moment leaves the previous checkpoint whole
// and `latest` pointing at it.
//
// N ranks (a distributed artifact): DIR/step-%08d/index.json names the
// topology, and DIR/step-%08d/rank-%05d/{state.bin, index.json} holds each
// rank's shards, as above. Every rank writes its folder into the shared
// .tmp folder; once all have (a barrier), rank 0 writes the index, renames
// the folder into place and moves `latest`, so a checkpoint is whole on
// every rank or not there at all. DIR must be one folder every rank sees.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Training.h"

#include "strata/Runtime/Communicator.h"
#include "strata/Runtime/Footprint.h"

#include "JsonText.h"

#include "plan.pb.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <sys/mman.h>

namespace strata::runtime {
namespace {

namespace fs = std::filesystem;

bool isCheckpointed(int kind) {
  return kind == plan::PARAMETER || kind == plan::BUFFER ||
         kind == plan::OPTIMIZER_STATE;
}

std::string hex(uint64_t v) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016llx",
                static_cast<unsigned long long>(v));
  return buffer;
}

Status writeAll(int fd, const char *data, size_t size, const std::string &path) {
  while (size) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return Status::error("cannot write '" + path + "': " +
                           std::strerror(n < 0 ? errno : ENOSPC));
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status writeFileSynced(const std::string &path, const std::string &bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return Status::error("cannot create '" + path + "': " +
                         std::strerror(errno));
  Status s = writeAll(fd, bytes.data(), bytes.size(), path);
  if (s && ::fsync(fd) != 0)
    s = Status::error("cannot write '" + path + "': " + std::strerror(errno));
  if (::close(fd) != 0 && s)
    s = Status::error("cannot write '" + path + "': " + std::strerror(errno));
  return s;
}

/// Makes the renames inside `dir` durable.
void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// The N-th save of this process into `dir` dies halfway through state.bin
/// when STRATA_TEST_KILL_DURING_SAVE=N (tests of atomicity).
bool killThisSave(const std::string &dir) {
  static std::map<std::string, int> saves;
  int n = ++saves[dir];
  const char *env = std::getenv("STRATA_TEST_KILL_DURING_SAVE");
  return env && std::atoi(env) == n;
}

/// "[3, 5]"
std::string jsonShape(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

/// The value of "key": in one line of index.json: a string's contents
/// (unescaped), a list with its brackets, or a number.
std::string field(const std::string &line, const std::string &key) {
  std::string tag = "\"" + key + "\": ";
  size_t at = line.find(tag);
  if (at == std::string::npos)
    return "";
  at += tag.size();
  if (at < line.size() && line[at] == '"') {
    std::string value;
    for (size_t i = at + 1; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] != '\\' || i + 1 >= line.size()) {
        value += line[i];
      } else if (line[++i] == 'u' && i + 4 < line.size()) {
        value += char(std::stoi(line.substr(i + 1, 4), nullptr, 16));
        i += 4;
      } else {
        value += line[i];
      }
    }
    return value;
  }
  if (at < line.size() && line[at] == '[')
    return line.substr(at, line.find(']', at) + 1 - at);
  size_t end = line.find_first_of(",}", at);
  return line.substr(at, end - at);
}


/// Writes state.bin and index.json of `executor`'s persistent tensors into
/// the new folder `folder`. `killKey` names the save for
/// STRATA_TEST_KILL_DURING_SAVE.
Status writeStateFolder(const std::string &folder, const std::string &killKey,
                        const std::string &fingerprint, uint64_t step,
                        uint64_t seed, Executor &executor, int rank = -1) {
  std::error_code ec;
  if (!fs::create_directory(folder, ec))
    return Status::error("cannot create '" + folder + "'");
  std::ostringstream index;
  // Format 2: a rank's folder names its rank, so a folder moved to another
  // rank's place is refused on resume.
  index << "{\n  \"format\": 2,\n  \"fingerprint\": " << jsonString(fingerprint)
        << ",\n  \"step\": " << step << ",\n  \"seed\": " << seed;
  if (rank >= 0)
    index << ",\n  \"rank\": " << rank;
  index << ",\n  \"tensors\": [\n";
  std::string statePath = folder + "/state.bin";
  int fd = ::open(statePath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return Status::error("cannot create '" + statePath + "'");
  bool kill = killThisSave(killKey);
  uint64_t offset = 0;
  bool first = true;
  std::vector<Executor::StateTensor> states = executor.getStates();
  size_t total = 0;
  for (const auto &state : states)
    if (isCheckpointed(state.kind))
      total += state.view->bytes();
  std::string buffer;
  for (const auto &state : states) {
    if (!isCheckpointed(state.kind))
      continue;
    const TensorView &t = *state.view;
    // Through the executor: an SSD-tier tensor has no memory to read.
    buffer.resize(t.bytes());
    if (Status s = executor.readState(state, buffer.data()); !s) {
      ::close(fd);
      return s;
    }
    const char *data = buffer.data();
    if (kill && offset + t.bytes() >= total / 2) {
      // Half of state.bin, then die as `kill -9` would.
      (void)writeAll(fd, data, (total / 2) - offset, statePath);
      ::fsync(fd);
      std::raise(SIGKILL);
    }
    if (Status s = writeAll(fd, data, t.bytes(), statePath); !s) {
      ::close(fd);
      return s;
    }
    index << (first ? "" : ",\n") << "    {\"name\": " << jsonString(state.name)
          << ", \"kind\": " << state.kind << ", \"dtype\": \""
          << runtime::name(t.dtype) << "\", \"shape\": " << jsonShape(t.shape)
          << ", \"offset\": " << offset
          << ", \"bytes\": " << t.bytes() << ", \"checksum\": \""
          << hex(fnv1a64(data, t.bytes())) << "\"}";
    first = false;
    offset += t.bytes();
  }
  index << "\n  ]\n}\n";
  ::fsync(fd);
  ::close(fd);
  return writeFileSynced(folder + "/index.json", index.str());
}

/// Renames `staging` to DIR/`name`, points DIR/latest at it, and removes
/// every other step folder but the one `latest` named before.
Status commitCheckpoint(const std::string &dir, const std::string &name,
                        const std::string &staging) {
  std::error_code ec;
  std::string final = dir + "/" + name;
  fs::remove_all(final, ec);
  fs::rename(staging, final, ec);
  if (ec)
    return Status::error("cannot rename '" + staging + "': " + ec.message());
  syncDirectory(dir);
  std::string previous;
  {
    std::ifstream latest(dir + "/latest");
    std::getline(latest, previous);
  }
  std::string latestTmp = dir + "/latest.tmp";
  if (Status s = writeFileSynced(latestTmp, name + "\n"); !s)
    return s;
  fs::rename(latestTmp, dir + "/latest", ec);
  if (ec)
    return Status::error("cannot update '" + dir + "/latest': " + ec.message());
  syncDirectory(dir);
  // Keep this checkpoint and the one `latest` named before it; older ones
  // and the leftovers of killed saves go.
  std::vector<fs::path> stale;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::string n = entry.path().filename().string();
    if (n.rfind("step-", 0) == 0 && n != name && n != previous)
      stale.push_back(entry.path());
  }
  for (const fs::path &path : stale)
    fs::remove_all(path, ec);
  return Status::ok();
}

std::string stepName(uint64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08llu",
                static_cast<unsigned long long>(step));
  return name;
}

std::string rankName(int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank-%05d", rank);
  return name;
}

/// Every rank learns whether all succeeded; a failing rank's own message
/// wins over the note about another rank.
Status agree(Communicator &comm, Status mine, const std::string &what) {
  double failed = mine ? 0.0 : 1.0;
  if (Status s = comm.sumOverWorld(&failed, 1, what); !s)
    return s;
  if (!mine)
    return mine;
  if (failed > 0)
    return Status::error(what + " failed on another rank (see its message)");
  return Status::ok();
}

/// One tensor's entry in a state folder's index.json.
struct Entry {
  std::string dtype, shape, checksum;
  uint64_t offset = 0, bytes = 0;
  int kind = 0;
};

/// The header and entries of an index.json.
struct Index {
  std::string fingerprint;
  uint64_t step = 0;
  uint64_t seed = 0;
  bool haveStep = false;
  /// A distributed checkpoint's top-level index: its topology.
  int ranks = 0, ranksPerNode = 0, partition = 0;
  /// A rank's folder (format 2): its rank; -1 where not recorded.
  int format = 1, rank = -1;
  std::map<std::string, Entry> entries;
};

Status readIndex(const std::string &folder, Index &out) {
  std::ifstream index(folder + "/index.json");
  if (!index)
    return Status::error("checkpoint '" + folder + "' has no index.json");
  std::string line;
  try {
    while (std::getline(index, line)) {
      if (line.find("\"name\"") != std::string::npos) {
        Entry &e = out.entries[field(line, "name")];
        e.dtype = field(line, "dtype");
        e.shape = field(line, "shape");
        e.checksum = field(line, "checksum");
        e.offset = std::stoull(field(line, "offset"));
        e.bytes = std::stoull(field(line, "bytes"));
        e.kind = std::stoi(field(line, "kind"));
      } else if (line.find("\"fingerprint\"") != std::string::npos) {
        out.fingerprint = field(line, "fingerprint");
      } else if (line.find("\"step\"") != std::string::npos) {
        out.step = std::stoull(field(line, "step"));
        out.haveStep = true;
      } else if (line.find("\"seed\"") != std::string::npos) {
        out.seed = std::stoull(field(line, "seed"));
      } else if (line.find("\"format\"") != std::string::npos) {
        out.format = std::stoi(field(line, "format"));
      } else if (line.find("\"rank\"") != std::string::npos) {
        out.rank = std::stoi(field(line, "rank"));
      } else if (line.find("\"ranks\"") != std::string::npos) {
        out.ranks = std::stoi(field(line, "ranks"));
        out.ranksPerNode = std::stoi(field(line, "ranks_per_node"));
        out.partition = std::stoi(field(line, "partition"));
      }
    }
  } catch (const std::exception &) {
    out.haveStep = false;
  }
  if (!out.haveStep)
    return Status::error("checkpoint '" + folder +
                         "' has a damaged index.json");
  return Status::ok();
}

/// Whether `folder` holds a whole checkpoint of `fingerprint`: its index
/// reads, and a distributed one has every rank's folder with its index.
/// `why` says what is wrong otherwise.
bool complete(const std::string &folder, const std::string &fingerprint,
              std::string &why) {
  Index index;
  if (Status s = readIndex(folder, index); !s) {
    why = s.message();
    return false;
  }
  if (index.fingerprint != fingerprint) {
    why = "written by a different artifact";
    return false;
  }
  for (int r = 0; r < index.ranks; ++r) {
    Index shard;
    if (Status s = readIndex(folder + "/" + rankName(r), shard); !s) {
      why = s.message();
      return false;
    }
  }
  return true;
}

/// The checkpoint to resume from: the one DIR/latest names; when `latest`
/// is missing or names no whole checkpoint, the newest whole step folder
/// (with a note). "" when DIR holds no step folder at all (a note: the run
/// starts at step 1); an error when it holds some and none is whole.
Status resumableFolder(const std::string &dir, const std::string &fingerprint,
                       bool note, std::string &out) {
  out.clear();
  std::string name, why;
  {
    std::ifstream latest(dir + "/latest");
    if (latest)
      std::getline(latest, name);
  }
  std::string latestWhy;
  if (!name.empty() && name.find('/') == std::string::npos &&
      fs::is_directory(dir + "/" + name)) {
    if (complete(dir + "/" + name, fingerprint, latestWhy)) {
      out = dir + "/" + name;
      return Status::ok();
    }
    // A checkpoint of another artifact is refused at the load, naming it.
    if (latestWhy == "written by a different artifact") {
      out = dir + "/" + name;
      return Status::ok();
    }
  }
  std::string state =
      name.empty() ? "missing or empty"
      : latestWhy.empty()
          ? "naming '" + name + "', which is gone"
          : "naming '" + name + "', which is damaged (" + latestWhy + ")";
  std::vector<std::string> steps;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::string n = entry.path().filename().string();
    // A ".tmp" folder is a save that never finished, not a checkpoint.
    bool unfinished = n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0;
    if (n.rfind("step-", 0) == 0 && !unfinished && entry.is_directory())
      steps.push_back(n);
  }
  std::sort(steps.rbegin(), steps.rend());
  std::string found;
  for (const std::string &n : steps) {
    std::string reason;
    if (n == name)
      continue; // latest's, found damaged above
    if (complete(dir + "/" + n, fingerprint, reason)) {
      out = dir + "/" + n;
      if (note)
        std::cerr << "strata-run: note: '" << dir << "/latest' is " << state
                  << "; resuming from " << n
                  << ", the newest whole checkpoint\n";
      return Status::ok();
    }
    found += (found.empty() ? "" : ", ") + n + " (" + reason + ")";
  }
  if (!steps.empty())
    return Status::error("'" + dir + "/latest' is " + state +
                         " and no step folder holds a whole checkpoint of "
                         "this artifact" + (found.empty() ? "" : ": " + found) +
                         "; refusing to start over (move the folder away to "
                         "train from step 1)");
  if (note)
    std::cerr << "strata-run: note: no checkpoint in '" << dir
              << "' yet; starting from step 1\n";
  return Status::ok();
}

/// The checkpoint `--resume` takes (resumableFolder) and its index;
/// `folder` is "" when there is none yet.
Status readResumable(const std::string &dir, const std::string &fingerprint,
                     bool note, std::string &folder, Index &index) {
  if (Status s = resumableFolder(dir, fingerprint, note, folder); !s)
    return s;
  return folder.empty() ? Status::ok() : readIndex(folder, index);
}

/// The folder DIR/latest names, or "" (for --consolidate, which needs it).
std::string latestFolder(const std::string &dir) {
  std::ifstream latest(dir + "/latest");
  std::string name;
  if (!latest || !std::getline(latest, name) || name.empty())
    return "";
  return dir + "/" + name;
}

/// Loads a state folder into the executor; everything is read and checked
/// before the executor's state changes.
Status loadStateFolder(const std::string &folder, const Index &index,
                       Executor &executor) {
  std::ifstream state(folder + "/state.bin", std::ios::binary);
  if (!state)
    return Status::error("checkpoint '" + folder + "' has no state.bin");
  std::vector<std::pair<Executor::StateTensor, std::string>> loaded;
  for (const auto &s : executor.getStates()) {
    if (!isCheckpointed(s.kind))
      continue;
    const TensorView &t = *s.view;
    auto it = index.entries.find(s.name);
    if (it == index.entries.end())
      return Status::error("checkpoint '" + folder + "' lacks '" + s.name + "'");
    const Entry &e = it->second;
    if (e.dtype != runtime::name(t.dtype) || e.shape != jsonShape(t.shape) ||
        e.bytes != t.bytes())
      return Status::error("checkpoint '" + folder + "' holds '" + s.name +
                           "' as " + e.dtype + e.shape + ", the artifact as " +
                           std::string(runtime::name(t.dtype)) +
                           jsonShape(t.shape));
    std::string bytes(t.bytes(), '\0');
    state.seekg(static_cast<std::streamoff>(e.offset));
    state.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!state || hex(fnv1a64(bytes.data(), bytes.size())) != e.checksum)
      return Status::error("checkpoint '" + folder + "': '" + s.name +
                           "' is truncated or corrupt");
    loaded.emplace_back(s, std::move(bytes));
  }
  for (auto &[state, bytes] : loaded)
    if (Status s = executor.writeState(state, bytes.data()); !s)
      return s;
  return Status::ok();
}

} // namespace

Status saveCheckpoint(const std::string &dir, const std::string &fingerprint,
                      uint64_t step, uint64_t seed, Executor &executor,
                      Communicator *comm) {
  std::string name = stepName(step);
  std::string staging = dir + "/" + name + ".tmp";
  std::error_code ec;
  if (!comm) {
    fs::create_directories(dir, ec);
    fs::remove_all(staging, ec);
    if (Status s = writeStateFolder(staging, dir, fingerprint, step, seed,
                                    executor);
        !s)
      return s;
    return commitCheckpoint(dir, name, staging);
  }
  // Rank 0 prepares the shared folder, every rank writes its own, rank 0
  // commits once all have.
  const TopologyInfo &t = comm->topology();
  bool leader = comm->rank() == 0;
  Status prepared = Status::ok();
  if (leader) {
    fs::create_directories(dir, ec);
    fs::remove_all(staging, ec);
    if (!fs::create_directory(staging, ec))
      prepared = Status::error("cannot create '" + staging + "'");
  }
  if (Status s = agree(*comm, prepared, "checkpoint " + name); !s)
    return s;
  Status written =
      writeStateFolder(staging + "/" + rankName(comm->rank()), dir,
                       fingerprint, step, seed, executor, comm->rank());
  if (Status s = agree(*comm, written, "checkpoint " + name); !s)
    return s;
  Status committed = Status::ok();
  if (leader) {
    std::ostringstream index;
    index << "{\n  \"format\": 2,\n  \"fingerprint\": " << jsonString(fingerprint)
          << ",\n  \"step\": " << step << ",\n  \"seed\": " << seed
          << ",\n  \"topology\": {\"ranks\": " << t.world
          << ", \"ranks_per_node\": " << t.ranksPerNode
          << ", \"partition\": " << t.partition << "},\n  \"shards\": [";
    for (int r = 0; r < t.world; ++r)
      index << (r ? ", " : "") << jsonString(rankName(r));
    index << "]\n}\n";
    committed = writeFileSynced(staging + "/index.json", index.str());
    if (committed)
      committed = commitCheckpoint(dir, name, staging);
  }
  return agree(*comm, committed, "checkpoint " + name);
}

Status loadCheckpoint(const std::string &dir, const std::string &fingerprint,
                      Executor &executor, uint64_t &step,
                      Communicator *comm) {
  step = 0;
  std::string folder;
  Index index;
  if (Status s = readResumable(dir, fingerprint, !comm || comm->rank() == 0,
                               folder, index);
      !s)
    return s;
  if (folder.empty())
    return Status::ok();
  if (index.fingerprint != fingerprint)
    return Status::error("checkpoint '" + folder +
                         "' was written by a different artifact (fingerprint " +
                         index.fingerprint + ", this artifact " + fingerprint +
                         "); resume with the artifact that wrote it");
  bool distributed = index.ranks > 0;
  if (distributed != (comm != nullptr))
    return Status::error(
        "checkpoint '" + folder + "' was written by " +
        (distributed ? std::to_string(index.ranks) + " ranks" : "one rank") +
        ", this run has " +
        (comm ? std::to_string(comm->world()) + " ranks" : "one"));
  if (comm) {
    const TopologyInfo &t = comm->topology();
    if (index.ranks != t.world || index.ranksPerNode != t.ranksPerNode ||
        index.partition != t.partition)
      return Status::error("checkpoint '" + folder + "' was written by " +
                           std::to_string(index.ranks) + " ranks, K = " +
                           std::to_string(index.ranksPerNode) + ", P = " +
                           std::to_string(index.partition) +
                           "; resume with the same topology");
    folder += "/" + rankName(comm->rank());
    Index shard;
    if (Status s = readIndex(folder, shard); !s)
      return s;
    if (shard.fingerprint != fingerprint || shard.step != index.step)
      return Status::error("checkpoint '" + folder +
                           "' does not belong to its step folder");
    if (shard.format >= 2 && shard.rank != comm->rank())
      return Status::error("checkpoint '" + folder + "' holds rank " +
                           std::to_string(shard.rank) + "'s shards, not rank " +
                           std::to_string(comm->rank()) + "'s");
    index.entries = std::move(shard.entries);
  }
  if (Status s = loadStateFolder(folder, index, executor); !s)
    return s;
  step = index.step;
  return Status::ok();
}

Status peekCheckpoint(const std::string &dir, const std::string &fingerprint,
                      bool &found, uint64_t &step, uint64_t &seed) {
  found = false;
  std::string folder;
  Index index;
  if (Status s = readResumable(dir, fingerprint, false, folder, index); !s)
    return s;
  if (folder.empty())
    return Status::ok();
  found = true;
  step = index.step;
  seed = index.seed;
  return Status::ok();
}

CheckpointLock::~CheckpointLock() {
  if (fd_ < 0)
    return;
  // No pid left behind for a later holder's message to name.
  (void)!::ftruncate(fd_, 0);
  ::close(fd_); // releases the lock
}

Status CheckpointLock::acquire(const std::string &dir, Communicator *comm,
                               std::unique_ptr<CheckpointLock> &out) {
  std::unique_ptr<CheckpointLock> lock(new CheckpointLock());
  Status mine = Status::ok();
  if (!comm || comm->rank() == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::string path = dir + "/.lock";
    lock->fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock->fd_ < 0) {
      mine = Status::error("cannot open '" + path + "': " +
                           std::strerror(errno));
    } else if (::flock(lock->fd_, LOCK_EX | LOCK_NB) != 0) {
      char holder[64] = {};
      ssize_t n = ::pread(lock->fd_, holder, sizeof(holder) - 1, 0);
      std::string who = n > 0 ? std::string(holder, size_t(n)) : "";
      while (!who.empty() && (who.back() == '\n' || who.back() == ' '))
        who.pop_back();
      mine = Status::error(
          "checkpoint folder '" + dir + "' is in use by another run" +
          (who.empty() ? "" : " (" + who + ")") +
          "; give this run its own --checkpoint-dir");
    } else {
      char line[64];
      int len = std::snprintf(line, sizeof(line), "pid %d\n", int(getpid()));
      if (::ftruncate(lock->fd_, 0) == 0)
        (void)!::pwrite(lock->fd_, line, size_t(len), 0);
    }
  }
  if (comm)
    if (Status s = agree(*comm, mine, "locking the checkpoint folder"); !s)
      return s;
  if (!mine)
    return mine;
  out = std::move(lock);
  return Status::ok();
}

Status consolidateCheckpoint(const Artifact &artifact, const std::string &dir,
                             const std::string &outDir, uint64_t &step) {
  const plan::Plan &plan = artifact.getPlan();
  std::string folder = latestFolder(dir);
  if (folder.empty())
    return Status::error("no checkpoint in '" + dir + "' to consolidate");
  Index top;
  if (Status s = readIndex(folder, top); !s)
    return s;
  if (top.fingerprint != plan.fingerprint())
    return Status::error("checkpoint '" + folder +
                         "' was written by a different artifact (fingerprint " +
                         top.fingerprint + ", this artifact " +
                         plan.fingerprint() + ")");
  if (top.ranks == 0)
    return Status::error("checkpoint '" + folder +
                         "' is a one-rank checkpoint: its weights are whole "
                         "already");
  step = top.step;
  // Pipeline group 0 (ranks 0 .. p*P-1) holds every shard: stage s's P
  // ranks are s*P .. s*P+P-1, and each holds its own stage's parameters
  // only (a parameter on several stages, such as a tied embedding, has the
  // same bits on each; the first holder's is read;
  // runtime/include/strata/Runtime/Footprint.h).
  int p = std::max(top.partition, 1);
  int stages = pipelineStages(plan);
  std::vector<int> holder(size_t(plan.tensors_size()), -1);
  std::vector<std::vector<bool>> held = tensorsOfEveryStage(plan);
  for (int s = int(held.size()) - 1; s >= 0; --s)
    for (size_t id = 0; id < held[size_t(s)].size(); ++id)
      if (held[size_t(s)][id])
        holder[id] = s;
  std::vector<Index> shards(size_t(p * stages));
  std::vector<std::ifstream> states(size_t(p * stages));
  for (int r = 0; r < p * stages; ++r) {
    std::string rankFolder = folder + "/" + rankName(r);
    if (Status s = readIndex(rankFolder, shards[r]); !s)
      return s;
    states[r].open(rankFolder + "/state.bin", std::ios::binary);
    if (!states[r])
      return Status::error("checkpoint '" + rankFolder + "' has no state.bin");
  }
  std::error_code ec;
  std::string staging = outDir + ".tmp";
  fs::remove_all(staging, ec);
  if (!fs::create_directories(staging, ec))
    return Status::error("cannot create '" + staging + "'");
  std::string statePath = staging + "/state.bin";
  int fd = ::open(statePath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return Status::error("cannot create '" + statePath + "'");
  std::ostringstream index;
  index << "{\n  \"format\": 1,\n  \"fingerprint\": "
        << jsonString("consolidated:" + plan.fingerprint()) << ",\n  \"step\": "
        << top.step << ",\n  \"seed\": " << top.seed
        << ",\n  \"tensors\": [\n";
  uint64_t offset = 0;
  bool first = true;
  // One value at a time: its P slices read, padding dropped, written.
  for (const plan::Parameter &param : plan.parameters()) {
    const plan::Tensor &tensor = plan.tensors(param.tensor());
    int parts = std::max<int>(int(param.shards()), 1);
    std::vector<int64_t> shape(param.full_shape().begin(),
                               param.full_shape().end());
    if (shape.empty() && parts == 1)
      shape.assign(tensor.shape().begin(), tensor.shape().end());
    DType dtype = fromPlanDType(tensor.dtype());
    int64_t numel = 1;
    for (int64_t d : shape)
      numel *= d;
    if (holder[param.tensor()] < 0)
      return Status::error("plan: no stage holds parameter '" +
                           param.name() + "'");
    int firstRank = holder[param.tensor()] * p;
    std::string value;
    for (int r = firstRank; r < firstRank + parts; ++r) {
      auto it = shards[r].entries.find(param.name());
      if (it == shards[r].entries.end())
        return Status::error("checkpoint '" + folder + "/" + rankName(r) +
                             "' lacks '" + param.name() + "'");
      const Entry &e = it->second;
      std::string bytes(e.bytes, '\0');
      states[r].seekg(static_cast<std::streamoff>(e.offset));
      states[r].read(bytes.data(), static_cast<std::streamsize>(e.bytes));
      if (!states[r] || hex(fnv1a64(bytes.data(), bytes.size())) != e.checksum)
        return Status::error("checkpoint '" + folder + "/" + rankName(r) +
                             "': '" + param.name() +
                             "' is truncated or corrupt");
      value += bytes;
    }
    size_t bytes = size_t(numel) * byteWidth(dtype);
    if (value.size() < bytes)
      return Status::error("checkpoint '" + folder + "': the shards of '" +
                           param.name() + "' hold " +
                           std::to_string(value.size()) + " bytes, the value " +
                           std::to_string(bytes));
    value.resize(bytes);
    if (Status s = writeAll(fd, value.data(), value.size(), statePath); !s) {
      ::close(fd);
      return s;
    }
    index << (first ? "" : ",\n") << "    {\"name\": " << jsonString(param.name())
          << ", \"kind\": " << tensor.kind() << ", \"dtype\": \""
          << runtime::name(dtype) << "\", \"shape\": " << jsonShape(shape)
          << ", \"offset\": " << offset << ", \"bytes\": " << value.size()
          << ", \"checksum\": \"" << hex(fnv1a64(value.data(), value.size()))
          << "\"}";
    first = false;
    offset += value.size();
  }
  index << "\n  ]\n}\n";
  ::fsync(fd);
  ::close(fd);
  if (Status s = writeFileSynced(staging + "/index.json", index.str()); !s)
    return s;
  fs::remove_all(outDir, ec);
  fs::rename(staging, outDir, ec);
  if (ec)
    return Status::error("cannot rename '" + staging + "': " + ec.message());
  return Status::ok();
}

Status MappedWeights::open(const std::string &folder,
                           std::unique_ptr<MappedWeights> &out) {
  Index index;
  if (Status s = readIndex(folder, index); !s)
    return s;
  std::string path = folder + "/state.bin";
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error("cannot open '" + path + "'");
  struct stat st;
  ::fstat(fd, &st);
  std::unique_ptr<MappedWeights> w(new MappedWeights());
  w->size_ = size_t(st.st_size);
  if (w->size_) {
    void *m = ::mmap(nullptr, w->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return Status::error("cannot map '" + path + "'");
    }
    w->data_ = static_cast<const char *>(m);
  }
  ::close(fd);
  for (const auto &[name, e] : index.entries) {
    if (e.offset + e.bytes > w->size_)
      return Status::error("'" + path + "' is shorter than its index.json");
    w->values_[name] = std::string_view(w->data_ + e.offset, e.bytes);
  }
  out = std::move(w);
  return Status::ok();
}

MappedWeights::~MappedWeights() {
  if (data_)
    ::munmap(const_cast<char *>(data_), size_);
}

std::string_view MappedWeights::get(const std::string &name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::string_view() : it->second;
}

} // namespace strata::runtime
