//===- Checkpoint.cpp - Atomic checkpoints of the training state ----------===//
//
// DIR/step-%08d/{state.bin, index.json}: every PARAMETER, BUFFER and
// OPTIMIZER_STATE tensor by name. The folder is written as .tmp and renamed
// into place, then DIR/latest (the folder's name) is replaced the same way,
// so a kill at any moment leaves the previous checkpoint whole and `latest`
// pointing at it.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Training.h"

#include "plan.pb.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

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
    if (n < 0)
      return Status::error("cannot write '" + path + "'");
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status writeFileSynced(const std::string &path, const std::string &bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return Status::error("cannot create '" + path + "'");
  Status s = writeAll(fd, bytes.data(), bytes.size(), path);
  ::fsync(fd);
  ::close(fd);
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

/// `s` as a JSON string literal.
std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      out += buffer;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
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

} // namespace

Status saveCheckpoint(const std::string &dir, const std::string &fingerprint,
                      uint64_t step, uint64_t seed, Executor &executor) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08llu",
                static_cast<unsigned long long>(step));
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::string final = dir + "/" + name, staging = final + ".tmp";
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec))
    return Status::error("cannot create '" + staging + "'");

  std::ostringstream index;
  index << "{\n  \"format\": 1,\n  \"fingerprint\": " << quoted(fingerprint)
        << ",\n  \"step\": " << step << ",\n  \"seed\": " << seed
        << ",\n  \"tensors\": [\n";
  std::string statePath = staging + "/state.bin";
  int fd = ::open(statePath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return Status::error("cannot create '" + statePath + "'");
  bool kill = killThisSave(dir);
  uint64_t offset = 0;
  bool first = true;
  std::vector<Executor::StateTensor> states = executor.getStates();
  size_t total = 0;
  for (const auto &state : states)
    if (isCheckpointed(state.kind))
      total += state.view->bytes();
  for (const auto &state : states) {
    if (!isCheckpointed(state.kind))
      continue;
    const TensorView &t = *state.view;
    const char *data = static_cast<const char *>(t.data);
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
    index << (first ? "" : ",\n") << "    {\"name\": " << quoted(state.name)
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
  if (Status s = writeFileSynced(staging + "/index.json", index.str()); !s)
    return s;
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
  if (Status s = writeFileSynced(latestTmp, std::string(name) + "\n"); !s)
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

Status loadCheckpoint(const std::string &dir, const std::string &fingerprint,
                      Executor &executor, uint64_t &step) {
  step = 0;
  std::ifstream latest(dir + "/latest");
  std::string name;
  if (!latest || !std::getline(latest, name) || name.empty()) {
    std::cerr << "strata-run: note: no checkpoint in '" << dir
              << "' yet; starting from step 1\n";
    return Status::ok();
  }
  std::string folder = dir + "/" + name;
  std::ifstream index(folder + "/index.json");
  if (!index)
    return Status::error("checkpoint '" + folder + "' has no index.json");
  struct Entry {
    std::string dtype, shape, checksum;
    uint64_t offset = 0, bytes = 0;
  };
  std::map<std::string, Entry> entries;
  std::string line, savedFingerprint;
  bool haveStep = false;
  try {
    while (std::getline(index, line)) {
      if (line.find("\"name\"") != std::string::npos) {
        Entry &e = entries[field(line, "name")];
        e.dtype = field(line, "dtype");
        e.shape = field(line, "shape");
        e.checksum = field(line, "checksum");
        e.offset = std::stoull(field(line, "offset"));
        e.bytes = std::stoull(field(line, "bytes"));
      } else if (line.find("\"fingerprint\"") != std::string::npos) {
        savedFingerprint = field(line, "fingerprint");
      } else if (line.find("\"step\"") != std::string::npos) {
        step = std::stoull(field(line, "step"));
        haveStep = true;
      }
    }
  } catch (const std::exception &) {
    haveStep = false;
  }
  if (!haveStep) {
    step = 0;
    return Status::error("checkpoint '" + folder + "' has a damaged index.json");
  }
  if (savedFingerprint != fingerprint)
    return Status::error("checkpoint '" + folder +
                         "' was written by a different artifact (fingerprint " +
                         savedFingerprint + ", this artifact " + fingerprint +
                         "); resume with the artifact that wrote it");
  std::ifstream state(folder + "/state.bin", std::ios::binary);
  if (!state)
    return Status::error("checkpoint '" + folder + "' has no state.bin");
  // Everything is read and checked before the executor's state changes.
  std::vector<std::pair<TensorView *, std::string>> loaded;
  for (const auto &s : executor.getStates()) {
    if (!isCheckpointed(s.kind))
      continue;
    const TensorView &t = *s.view;
    auto it = entries.find(s.name);
    if (it == entries.end())
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
    loaded.emplace_back(s.view, std::move(bytes));
  }
  for (auto &[view, bytes] : loaded)
    std::memcpy(view->data, bytes.data(), bytes.size());
  return Status::ok();
}

} // namespace strata::runtime
