//===- Backend.cpp - Choosing where an artifact runs ----------------------===//

#include "strata/Runtime/Backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

namespace strata::runtime {
namespace {

/// Where libStrataRuntimeCUDA.so may be: $STRATA_CUDA_BACKEND, then the
/// build's lib/ beside bin/, then the loader's search path.
std::vector<std::string> candidates() {
  std::vector<std::string> paths;
  if (const char *env = std::getenv("STRATA_CUDA_BACKEND"))
    paths.push_back(env);
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string exe(self, size_t(n));
    std::string dir = exe.substr(0, exe.rfind('/'));
    paths.push_back(dir + "/../lib/libStrataRuntimeCUDA.so");
    paths.push_back(dir + "/libStrataRuntimeCUDA.so");
  }
  paths.push_back("libStrataRuntimeCUDA.so");
  return paths;
}

} // namespace

Status probeCudaBackend(std::string &devices) {
  void *library = nullptr;
  std::string why = "libStrataRuntimeCUDA.so is not built (no CUDA toolkit "
                    "at build time)";
  for (const std::string &path : candidates()) {
    library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library)
      break;
    const char *error = ::dlerror();
    // A library that is there but cannot load says more than one that is
    // not: keep the first such reason.
    if (error && ::access(path.c_str(), F_OK) == 0)
      why = error;
  }
  if (!library)
    return Status::error("cuda backend unavailable: " + why);
  using Probe = int (*)(char *, size_t);
  auto probe = reinterpret_cast<Probe>(::dlsym(library, "strata_cuda_probe"));
  if (!probe)
    return Status::error("cuda backend unavailable: the library has no "
                         "strata_cuda_probe");
  char message[512] = {0};
  int count = probe(message, sizeof(message));
  if (count <= 0)
    return Status::error(std::string("cuda backend unavailable: ") + message);
  devices = message;
  return Status::ok();
}

Status chooseBackend(const std::string &requested, std::string &chosen,
                     std::string &note) {
  note.clear();
  if (requested == "cpu") {
    chosen = "cpu";
    return Status::ok();
  }
  if (requested != "cuda" && requested != "auto")
    return Status::error("unknown backend '" + requested +
                         "' (cpu, cuda or auto)");
  std::string devices;
  Status probed = probeCudaBackend(devices);
  std::string why =
      probed ? "cuda backend: found " + devices +
                   ", but its executor is not built yet (issue 6)"
             : probed.message();
  if (requested == "cuda")
    return Status::error(why + "; use --backend cpu");
  chosen = "cpu";
  note = why + "; running on the cpu backend";
  return Status::ok();
}

} // namespace strata::runtime
