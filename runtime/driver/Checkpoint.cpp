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


/// A tensor of more bytes than this gets a checksum for each block of this
/// many bytes besides its own, so that a resharding rank verifies what it
/// reads without reading the whole tensor. STRATA_TEST_CHECKPOINT_BLOCK
/// overrides it (tests of small models).
uint64_t checksumBlockBytes() {
  const char *env = std::getenv("STRATA_TEST_CHECKPOINT_BLOCK");
  long long v = env ? std::atoll(env) : 0;
  return v > 0 ? uint64_t(v) : uint64_t(1) << 20;
}

/// The index header fields every index.json of a checkpoint carries.
std::string indexHeader(const CheckpointIdentity &id, uint64_t step,
                        uint64_t seed) {
  std::ostringstream out;
  // Format 3: the model fingerprint, topology, data position, slices and
  // block checksums, and the index's own checksum.
  out << "{\n  \"format\": 3,\n  \"fingerprint\": " << jsonString(id.artifact)
      << ",\n  \"model_fingerprint\": " << jsonString(id.model)
      << ",\n  \"step\": " << step << ",\n  \"seed\": " << seed
      << ",\n  \"topology\": {\"ranks\": " << id.world
      << ", \"ranks_per_node\": " << id.ranksPerNode
      << ", \"partition\": " << id.partition << ", \"stages\": " << id.stages
      << ", \"accum\": " << id.accum << "},\n  \"global_batch\": "
      << id.globalBatch << ",\n  \"samples\": " << step * id.globalBatch;
  return out.str();
}

/// `body` (an index.json without its closing brace) with its checksum.
std::string sealIndex(const std::string &body) {
  return body + ",\n  \"index_checksum\": \"" +
         hex(fnv1a64(body.data(), body.size())) + "\"\n}\n";
}

/// Writes state.bin and index.json of `executor`'s persistent tensors into
/// the new folder `folder`. `killKey` names the save for
/// STRATA_TEST_KILL_DURING_SAVE.
Status writeStateFolder(const std::string &folder, const std::string &killKey,
                        const CheckpointIdentity &id, uint64_t step,
                        uint64_t seed, Executor &executor, int rank = -1) {
  std::error_code ec;
  if (!fs::create_directory(folder, ec))
    return Status::error("cannot create '" + folder + "'");
  std::ostringstream index;
  index << indexHeader(id, step, seed);
  // A rank's folder names its rank, so a folder moved to another rank's
  // place is refused on resume.
  if (rank >= 0)
    index << ",\n  \"rank\": " << rank;
  index << ",\n  \"tensors\": [\n";
  std::string statePath = folder + "/state.bin";
  int fd = ::open(statePath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return Status::error("cannot create '" + statePath + "'");
  bool kill = killThisSave(killKey);
  uint64_t block = checksumBlockBytes();
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
          << hex(fnv1a64(data, t.bytes())) << "\"";
    auto slice = id.slices.find(state.name);
    if (slice != id.slices.end())
      index << ", \"slice\": " << slice->second.slice
            << ", \"slices\": " << slice->second.slices
            << ", \"numel\": " << slice->second.numel;
    if (t.bytes() > block) {
      index << ", \"block_bytes\": " << block << ", \"blocks\": [";
      for (uint64_t at = 0; at < t.bytes(); at += block)
        index << (at ? ", \"" : "\"")
              << hex(fnv1a64(data + at, std::min(block, t.bytes() - at)))
              << "\"";
      index << "]";
    }
    index << "}";
    first = false;
    offset += t.bytes();
  }
  index << "\n  ]";
  ::fsync(fd);
  ::close(fd);
  return writeFileSynced(folder + "/index.json", sealIndex(index.str()));
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
  /// A slice of a sharded value (format 3): slice `slice` of `slices` of a
  /// value of `numel` elements.
  uint32_t slices = 1, slice = 0;
  uint64_t numel = 0;
  /// > 0: `blocks` holds the checksum of each `blockBytes` of the tensor.
  uint64_t blockBytes = 0;
  std::vector<std::string> blocks;
};

/// The header and entries of an index.json.
struct Index {
  std::string fingerprint, model;
  uint64_t step = 0;
  uint64_t seed = 0;
  uint64_t globalBatch = 0, samples = 0;
  bool haveStep = false;
  /// A distributed checkpoint's step folder: its rank folders are
  /// rank-00000 .. rank-<ranks - 1>.
  bool shards = false;
  /// The topology that wrote it (format 3 in every index; the step folder
  /// of a distributed one before).
  int ranks = 0, ranksPerNode = 0, partition = 0, stages = 1;
  uint32_t accum = 0;
  /// A rank's folder (format 2 on): its rank; -1 where not recorded.
  int format = 1, rank = -1;
  std::map<std::string, Entry> entries;
};

/// `key`'s number in `line`, or `otherwise` when the line has none.
uint64_t number(const std::string &line, const std::string &key,
                uint64_t otherwise) {
  std::string value = field(line, key);
  if (value.empty())
    return otherwise;
  size_t used = 0;
  uint64_t v = std::stoull(value, &used);
  if (used != value.size() || value[0] == '-')
    throw std::invalid_argument(key);
  return v;
}

/// ["a", "b"] -> {a, b}
std::vector<std::string> stringList(const std::string &list) {
  std::vector<std::string> out;
  for (size_t at = list.find('"'); at != std::string::npos;) {
    size_t end = list.find('"', at + 1);
    if (end == std::string::npos)
      throw std::invalid_argument("list");
    out.push_back(list.substr(at + 1, end - at - 1));
    at = list.find('"', end + 1);
  }
  return out;
}

Status readIndex(const std::string &folder, Index &out) {
  std::ifstream file(folder + "/index.json", std::ios::binary);
  if (!file)
    return Status::error("checkpoint '" + folder + "' has no index.json");
  std::string text{std::istreambuf_iterator<char>(file),
                   std::istreambuf_iterator<char>()};
  Status damaged = Status::error("checkpoint '" + folder +
                                 "' has a damaged index.json");
  // Format 3 seals the index with the checksum of what precedes it.
  const std::string seal = ",\n  \"index_checksum\": \"";
  size_t sealed = text.rfind(seal);
  if (sealed != std::string::npos) {
    if (text.compare(sealed + seal.size(), 16,
                     hex(fnv1a64(text.data(), sealed))) != 0)
      return damaged;
    text.resize(sealed);
  }
  std::istringstream index(text);
  std::string line;
  try {
    while (std::getline(index, line)) {
      if (line.find("\"name\"") != std::string::npos) {
        Entry &e = out.entries[field(line, "name")];
        e.dtype = field(line, "dtype");
        e.shape = field(line, "shape");
        e.checksum = field(line, "checksum");
        // Strictly: std::stoull alone took "-4" as 2^64 - 4 (found by
        // tests/fuzz's checkpoint-load target).
        e.offset = number(line, "offset", UINT64_MAX);
        e.bytes = number(line, "bytes", UINT64_MAX);
        if (e.offset == UINT64_MAX || e.bytes == UINT64_MAX)
          return damaged;
        e.kind = std::stoi(field(line, "kind"));
        e.slices = uint32_t(number(line, "slices", 1));
        e.slice = uint32_t(number(line, "slice", 0));
        e.numel = number(line, "numel", 0);
        e.blockBytes = number(line, "block_bytes", 0);
        if (e.blockBytes) {
          e.blocks = stringList(field(line, "blocks"));
          if (e.blocks.size() != (e.bytes + e.blockBytes - 1) / e.blockBytes)
            return damaged;
        }
        if (e.slices == 0 || e.slice >= e.slices)
          return damaged;
      } else if (line.find("\"model_fingerprint\"") != std::string::npos) {
        out.model = field(line, "model_fingerprint");
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
      } else if (line.find("\"global_batch\"") != std::string::npos) {
        out.globalBatch = number(line, "global_batch", 0);
      } else if (line.find("\"samples\"") != std::string::npos) {
        out.samples = number(line, "samples", 0);
      } else if (line.find("\"shards\"") != std::string::npos) {
        out.shards = true;
      } else if (line.find("\"ranks\"") != std::string::npos) {
        out.ranks = std::stoi(field(line, "ranks"));
        out.ranksPerNode = std::stoi(field(line, "ranks_per_node"));
        out.partition = std::stoi(field(line, "partition"));
        out.stages = int(number(line, "stages", 1));
        out.accum = uint32_t(number(line, "accum", 0));
      }
    }
  } catch (const std::exception &) {
    out.haveStep = false;
  }
  // Before format 3 a distributed step folder's index was the one with a
  // topology.
  if (out.format < 3 && out.ranks > 0)
    out.shards = true;
  if (!out.haveStep || (out.format >= 3 && sealed == std::string::npos) ||
      (out.shards && (out.ranks < 1 || out.partition < 1 || out.stages < 1)))
    return damaged;
  return Status::ok();
}

/// Whether a checkpoint of `index` is `id`'s to resume: written by the same
/// artifact, or by another artifact of the same model (resharded).
bool resumableBy(const Index &index, const CheckpointIdentity &id) {
  return index.fingerprint == id.artifact ||
         (!id.model.empty() && index.model == id.model);
}

/// Whether `folder` holds a whole checkpoint `id` can resume: its index
/// reads, and a distributed one has every rank's folder with its index.
/// `why` says what is wrong otherwise.
bool complete(const std::string &folder, const CheckpointIdentity &id,
              std::string &why) {
  Index index;
  if (Status s = readIndex(folder, index); !s) {
    why = s.message();
    return false;
  }
  if (!resumableBy(index, id)) {
    why = "written by a different artifact";
    return false;
  }
  for (int r = 0; index.shards && r < index.ranks; ++r) {
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
Status resumableFolder(const std::string &dir, const CheckpointIdentity &id,
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
    if (complete(dir + "/" + name, id, latestWhy)) {
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
    if (complete(dir + "/" + n, id, reason)) {
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
Status readResumable(const std::string &dir, const CheckpointIdentity &id,
                     bool note, std::string &folder, Index &index) {
  if (Status s = resumableFolder(dir, id, note, folder); !s)
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

/// "8 ranks (K 2, P 4, 1 stage, accumulation 1)"
std::string describeTopology(int ranks, int k, int p, int stages,
                             uint32_t accum) {
  if (ranks <= 1 && stages <= 1)
    return "one rank (accumulation " + std::to_string(accum) + ")";
  return std::to_string(ranks) + " ranks (K " + std::to_string(k) + ", P " +
         std::to_string(p) + ", " + std::to_string(stages) +
         (stages == 1 ? " stage" : " stages") + ", accumulation " +
         std::to_string(accum) + ")";
}

/// A rank folder of the checkpoint being resharded, its state.bin open.
struct OldShard {
  std::string folder;
  Index index;
  int fd = -1;
  OldShard() = default;
  OldShard(const OldShard &) = delete;
  ~OldShard() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// Bytes [from, to) of entry `e` of `shard`'s state.bin into `out`, checked
/// against the checksums that cover them: its blocks' where it has them,
/// else its own (then the whole entry is read).
Status readChecked(const OldShard &shard, const std::string &name,
                   const Entry &e, uint64_t from, uint64_t to, char *out) {
  uint64_t begin = 0, end = e.bytes;
  if (e.blockBytes) {
    begin = from / e.blockBytes * e.blockBytes;
    end = std::min(e.bytes, (to + e.blockBytes - 1) / e.blockBytes *
                                e.blockBytes);
  }
  std::string bytes(end - begin, '\0');
  Status corrupt = Status::error("checkpoint '" + shard.folder + "': '" +
                                 name + "' is truncated or corrupt");
  if (e.offset > UINT64_MAX - e.bytes)
    return corrupt;
  for (uint64_t done = 0; done < bytes.size();) {
    ssize_t n = ::pread(shard.fd, bytes.data() + done, bytes.size() - done,
                        off_t(e.offset + begin + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return corrupt;
    done += uint64_t(n);
  }
  if (!e.blockBytes) {
    if (hex(fnv1a64(bytes.data(), bytes.size())) != e.checksum)
      return corrupt;
  } else {
    for (uint64_t at = begin; at < end; at += e.blockBytes) {
      uint64_t n = std::min(e.blockBytes, end - at);
      if (hex(fnv1a64(bytes.data() + (at - begin), n)) !=
          e.blocks[at / e.blockBytes])
        return corrupt;
    }
  }
  std::memcpy(out, bytes.data() + (from - begin), to - from);
  return Status::ok();
}

/// Loads the checkpoint `folder` (index `top`), written by another artifact
/// of the same model, into this rank's state: each tensor's elements (its
/// slice of the value, or the whole value) are read from the old slices
/// that cover them, in the first pipeline (ranks 0 .. stages x P - 1, which
/// hold every value once; a value on several stages, such as a tied
/// embedding, has the same bits on each). Everything is read and checked
/// before the executor's state changes.
Status reshardInto(const std::string &folder, const Index &top,
                   const CheckpointIdentity &id, Executor &executor,
                   bool leader) {
  std::vector<std::unique_ptr<OldShard>> shards;
  if (!top.shards) {
    shards.push_back(std::make_unique<OldShard>());
    shards.back()->folder = folder;
    shards.back()->index = top;
  } else {
    int holders = std::min(top.ranks, top.partition * top.stages);
    for (int r = 0; r < holders; ++r) {
      auto shard = std::make_unique<OldShard>();
      shard->folder = folder + "/" + rankName(r);
      if (Status s = readIndex(shard->folder, shard->index); !s)
        return s;
      const Index &i = shard->index;
      if (i.fingerprint != top.fingerprint || i.step != top.step ||
          i.seed != top.seed)
        return Status::error("checkpoint '" + shard->folder +
                             "' does not belong to its step folder");
      if (i.rank != r)
        return Status::error("checkpoint '" + shard->folder + "' holds rank " +
                             std::to_string(i.rank) + "'s shards, not rank " +
                             std::to_string(r) + "'s");
      shards.push_back(std::move(shard));
    }
  }
  for (auto &shard : shards) {
    std::string path = shard->folder + "/state.bin";
    shard->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (shard->fd < 0)
      return Status::error("checkpoint '" + shard->folder +
                           "' has no state.bin");
  }
  if (leader)
    std::cerr << "strata-run: note: resharding " << folder
              << ", written by another artifact of this model, from "
              << describeTopology(top.ranks, top.ranksPerNode, top.partition,
                                  top.stages, top.accum)
              << " onto "
              << describeTopology(id.world, id.ranksPerNode, id.partition,
                                  id.stages, id.accum)
              << "\n";
  if (leader && top.globalBatch && id.globalBatch &&
      top.globalBatch != id.globalBatch)
    std::cerr << "strata-run: warning: the checkpoint was trained with "
              << top.globalBatch << " samples a step, this run takes "
              << id.globalBatch << "; its batches from step " << top.step + 1
              << " on are not those the interrupted run would have drawn\n";

  std::vector<std::pair<Executor::StateTensor, std::string>> loaded;
  for (const auto &state : executor.getStates()) {
    if (!isCheckpointed(state.kind))
      continue;
    const TensorView &t = *state.view;
    uint64_t width = byteWidth(t.dtype);
    uint64_t count = uint64_t(t.numel());
    // The elements [begin, begin + count) of the value of `numel` that this
    // tensor holds; past `numel` it is the zero padding of the last slice.
    uint64_t begin = 0, numel = count;
    auto mine = id.slices.find(state.name);
    if (mine != id.slices.end()) {
      begin = uint64_t(mine->second.slice) * count;
      numel = mine->second.numel;
    }
    uint64_t wanted = begin < numel ? std::min(numel, begin + count) - begin : 0;
    std::string bytes(t.bytes(), '\0');
    std::vector<bool> sliceRead;
    uint64_t filled = 0;
    bool found = false;
    for (const auto &shard : shards) {
      auto it = shard->index.entries.find(state.name);
      if (it == shard->index.entries.end())
        continue;
      const Entry &e = it->second;
      found = true;
      uint64_t oldCount = e.bytes / std::max<uint64_t>(width, 1);
      uint64_t oldNumel = e.slices > 1 ? e.numel : oldCount;
      if (e.dtype != runtime::name(t.dtype) || oldNumel != numel ||
          (e.slices == 1 && mine == id.slices.end() &&
           e.shape != jsonShape(t.shape)))
        return Status::error(
            "checkpoint '" + shard->folder + "' holds '" + state.name +
            "' as " + e.dtype + e.shape + " (" + std::to_string(oldNumel) +
            " elements), the artifact as " + std::string(runtime::name(t.dtype)) +
            jsonShape(t.shape) + " (" + std::to_string(numel) + " elements)");
      if (sliceRead.size() < e.slices)
        sliceRead.resize(e.slices, false);
      if (sliceRead[e.slice])
        continue; // a replica or another stage's copy of a slice read
      sliceRead[e.slice] = true;
      uint64_t oldBegin = uint64_t(e.slice) * oldCount;
      uint64_t from = std::max(oldBegin, begin);
      uint64_t to = std::min({oldBegin + oldCount, begin + count, numel});
      if (from >= to)
        continue;
      if (Status s = readChecked(*shard, state.name, e, (from - oldBegin) * width,
                                 (to - oldBegin) * width,
                                 bytes.data() + (from - begin) * width);
          !s)
        return s;
      filled += to - from;
    }
    if (!found)
      return Status::error("checkpoint '" + folder + "' lacks '" + state.name +
                           "'");
    if (filled != wanted)
      return Status::error("checkpoint '" + folder + "' holds " +
                           std::to_string(filled) + " of the " +
                           std::to_string(wanted) + " elements of '" +
                           state.name + "' this rank needs");
    loaded.emplace_back(state, std::move(bytes));
  }
  for (auto &[state, bytes] : loaded)
    if (Status s = executor.writeState(state, bytes.data()); !s)
      return s;
  return Status::ok();
}

} // namespace

CheckpointIdentity CheckpointIdentity::of(const plan::Plan &plan, int rank) {
  CheckpointIdentity id;
  id.artifact = plan.fingerprint();
  id.model = plan.model_fingerprint();
  if (plan.has_topology() && plan.topology().world() > 1) {
    const plan::Topology &t = plan.topology();
    id.world = int(t.world());
    id.ranksPerNode = int(std::max(t.ranks_per_node(), 1u));
    id.partition = int(std::max(t.partition(), 1u));
    id.stages = int(std::max(t.pipeline_stages(), 1u));
  }
  id.accum = std::max<uint32_t>(plan.training().accum(), 1);
  id.globalBatch = plan.training().batch() * id.accum *
                   uint64_t(id.world / id.stages);
  // A sharded parameter's slice is rank % shards (Parameter.shards); its
  // optimizer states ("adamw.exp_avg:<name>", ...) are sliced as it is.
  std::map<std::string, Slice> byParameter;
  std::map<std::string, uint64_t> sliceNumel;
  for (const plan::Parameter &p : plan.parameters()) {
    if (p.shards() <= 1 || p.tensor() >= uint32_t(plan.tensors_size()))
      continue;
    uint64_t numel = 1;
    for (int64_t d : p.full_shape())
      numel *= uint64_t(d);
    byParameter[p.name()] = {p.shards(), uint32_t(rank) % p.shards(), numel};
    uint64_t count = 1;
    for (int64_t d : plan.tensors(int(p.tensor())).shape())
      count *= uint64_t(d);
    sliceNumel[p.name()] = count;
  }
  for (const plan::Tensor &t : plan.tensors()) {
    if (!isCheckpointed(t.kind()))
      continue;
    const std::string &name = t.name();
    size_t colon = name.find(':');
    std::string value = colon == std::string::npos || t.kind() == plan::PARAMETER
                            ? name
                            : name.substr(colon + 1);
    auto it = byParameter.find(value);
    if (it == byParameter.end())
      continue;
    uint64_t count = 1;
    for (int64_t d : t.shape())
      count *= uint64_t(d);
    if (count == sliceNumel[value])
      id.slices[name] = it->second;
  }
  return id;
}

Status saveCheckpoint(const std::string &dir, const CheckpointIdentity &id,
                      uint64_t step, uint64_t seed, Executor &executor,
                      Communicator *comm) {
  std::string name = stepName(step);
  std::string staging = dir + "/" + name + ".tmp";
  std::error_code ec;
  if (!comm) {
    fs::create_directories(dir, ec);
    fs::remove_all(staging, ec);
    if (Status s = writeStateFolder(staging, dir, id, step, seed, executor);
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
  Status written = writeStateFolder(staging + "/" + rankName(comm->rank()),
                                    dir, id, step, seed, executor,
                                    comm->rank());
  if (Status s = agree(*comm, written, "checkpoint " + name); !s)
    return s;
  Status committed = Status::ok();
  if (leader) {
    std::ostringstream index;
    index << indexHeader(id, step, seed) << ",\n  \"shards\": [";
    for (int r = 0; r < t.world; ++r)
      index << (r ? ", " : "") << jsonString(rankName(r));
    index << "]";
    committed = writeFileSynced(staging + "/index.json", sealIndex(index.str()));
    if (committed)
      committed = commitCheckpoint(dir, name, staging);
  }
  return agree(*comm, committed, "checkpoint " + name);
}

Status loadCheckpoint(const std::string &dir, const CheckpointIdentity &id,
                      Executor &executor, uint64_t &step,
                      Communicator *comm) {
  step = 0;
  std::string folder;
  Index index;
  bool leader = !comm || comm->rank() == 0;
  if (Status s = readResumable(dir, id, leader, folder, index); !s)
    return s;
  if (folder.empty())
    return Status::ok();
  if (index.fingerprint != id.artifact) {
    if (!id.model.empty() && index.model == id.model) {
      if (Status s = reshardInto(folder, index, id, executor, leader); !s)
        return s;
      step = index.step;
      return Status::ok();
    }
    return Status::error(
        "checkpoint '" + folder +
        "' was written by a different artifact (fingerprint " +
        index.fingerprint + ", this artifact " + id.artifact + ")" +
        (index.model.empty() || id.model.empty()
             ? "; resume with the artifact that wrote it"
             : " of a different model or training configuration (model "
               "fingerprint " + index.model + ", this artifact " + id.model +
               "); resume with an artifact compiled from the same model "
               "and training options"));
  }
  bool distributed = index.shards;
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
    if (shard.fingerprint != id.artifact || shard.step != index.step ||
        shard.seed != index.seed)
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

Status peekCheckpoint(const std::string &dir, const CheckpointIdentity &id,
                      bool &found, uint64_t &step, uint64_t &seed) {
  found = false;
  std::string folder;
  Index index;
  if (Status s = readResumable(dir, id, false, folder, index); !s)
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
  if (!top.shards)
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
  std::vector<OldShard> shards(size_t(p * stages));
  for (int r = 0; r < p * stages; ++r) {
    OldShard &shard = shards[size_t(r)];
    shard.folder = folder + "/" + rankName(r);
    if (Status s = readIndex(shard.folder, shard.index); !s)
      return s;
    std::string path = shard.folder + "/state.bin";
    shard.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (shard.fd < 0)
      return Status::error("checkpoint '" + shard.folder +
                           "' has no state.bin");
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
      const OldShard &shard = shards[size_t(r)];
      auto it = shard.index.entries.find(param.name());
      if (it == shard.index.entries.end())
        return Status::error("checkpoint '" + shard.folder + "' lacks '" +
                             param.name() + "'");
      const Entry &e = it->second;
      std::string bytes(e.bytes, '\0');
      if (Status s = readChecked(shard, param.name(), e, 0, e.bytes,
                                 bytes.data());
          !s)
        return s;
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
    // Without a sum that can wrap (an offset near 2^64 once passed).
    if (e.bytes > w->size_ || e.offset > w->size_ - e.bytes)
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
