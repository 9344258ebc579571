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

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
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

/// The N-th save dies halfway through state.bin when
/// STRATA_TEST_KILL_DURING_SAVE=N (tests of atomicity).
bool killThisSave() {
  static int saves = 0;
  ++saves;
  const char *env = std::getenv("STRATA_TEST_KILL_DURING_SAVE");
  return env && std::atoi(env) == saves;
}

/// The value of "key": in one line of index.json.
std::string field(const std::string &line, const std::string &key) {
  std::string tag = "\"" + key + "\": ";
  size_t at = line.find(tag);
  if (at == std::string::npos)
    return "";
  at += tag.size();
  if (line[at] == '"') {
    size_t end = line.find('"', at + 1);
    return line.substr(at + 1, end - at - 1);
  }
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
  index << "{\n  \"format\": 1,\n  \"fingerprint\": \"" << fingerprint
        << "\",\n  \"step\": " << step << ",\n  \"seed\": " << seed
        << ",\n  \"tensors\": [\n";
  std::string statePath = staging + "/state.bin";
  int fd = ::open(statePath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return Status::error("cannot create '" + statePath + "'");
  bool kill = killThisSave();
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
    index << (first ? "" : ",\n") << "    {\"name\": \"" << state.name
          << "\", \"kind\": " << state.kind << ", \"shape\": \""
          << t.describe() << "\", \"offset\": " << offset
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
  std::string latestTmp = dir + "/latest.tmp";
  if (Status s = writeFileSynced(latestTmp, std::string(name) + "\n"); !s)
    return s;
  fs::rename(latestTmp, dir + "/latest", ec);
  if (ec)
    return Status::error("cannot update '" + dir + "/latest': " + ec.message());
  // Keep the newest two checkpoints.
  std::vector<std::string> old;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::string n = entry.path().filename().string();
    if (n.rfind("step-", 0) == 0 && n.find(".tmp") == std::string::npos)
      old.push_back(n);
  }
  std::sort(old.begin(), old.end());
  for (size_t i = 0; i + 2 < old.size(); ++i)
    fs::remove_all(dir + "/" + old[i], ec);
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
  std::map<std::string, std::pair<uint64_t, uint64_t>> entries; // offset, bytes
  std::map<std::string, std::string> checksums;
  std::string line, savedFingerprint;
  bool haveStep = false;
  while (std::getline(index, line)) {
    if (line.find("\"fingerprint\"") != std::string::npos)
      savedFingerprint = field(line, "fingerprint");
    else if (line.find("\"step\"") != std::string::npos &&
             line.find("\"name\"") == std::string::npos) {
      step = std::stoull(field(line, "step"));
      haveStep = true;
    } else if (line.find("\"name\"") != std::string::npos) {
      std::string n = field(line, "name");
      entries[n] = {std::stoull(field(line, "offset")),
                    std::stoull(field(line, "bytes"))};
      checksums[n] = field(line, "checksum");
    }
  }
  if (!haveStep)
    return Status::error("checkpoint '" + folder + "' has a damaged index.json");
  if (savedFingerprint != fingerprint)
    return Status::error("checkpoint '" + folder +
                         "' was written by a different artifact (fingerprint " +
                         savedFingerprint + ", this artifact " + fingerprint +
                         "); resume with the artifact that wrote it");
  std::ifstream state(folder + "/state.bin", std::ios::binary);
  if (!state)
    return Status::error("checkpoint '" + folder + "' has no state.bin");
  for (const auto &s : executor.getStates()) {
    if (!isCheckpointed(s.kind))
      continue;
    auto it = entries.find(s.name);
    if (it == entries.end() || it->second.second != s.view->bytes())
      return Status::error("checkpoint '" + folder + "' lacks '" + s.name +
                           "' or holds it with another size");
    state.seekg(static_cast<std::streamoff>(it->second.first));
    state.read(static_cast<char *>(s.view->data),
               static_cast<std::streamsize>(s.view->bytes()));
    if (!state || hex(fnv1a64(s.view->data, s.view->bytes())) != checksums[s.name])
      return Status::error("checkpoint '" + folder + "': '" + s.name +
                           "' is truncated or corrupt");
  }
  return Status::ok();
}

} // namespace strata::runtime
