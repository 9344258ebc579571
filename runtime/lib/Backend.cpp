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

/// The loaded libStrataRuntimeCUDA.so, loaded once and never unloaded (its
/// devices' code lives there); null with the reason in `why`.
void *loadCudaBackend(std::string &why) {
  static std::string failure;
  static void *library = [] {
    failure = "libStrataRuntimeCUDA.so is not built (no CUDA toolkit at "
              "build time)";
    for (const std::string &path : candidates()) {
      if (void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))
        return handle;
      const char *error = ::dlerror();
      // A library that is there but cannot load says more than one that is
      // not: keep the first such reason.
      if (error && ::access(path.c_str(), F_OK) == 0 &&
          failure.rfind("libStrataRuntimeCUDA.so is not built", 0) == 0)
        failure = error;
    }
    return static_cast<void *>(nullptr);
  }();
  why = failure;
  return library;
}

/// The library's entry point `symbol`, as an `Fn`; else why not.
template <typename Fn> Status findEntry(const char *symbol, Fn &out) {
  std::string why;
  void *library = loadCudaBackend(why);
  if (!library)
    return Status::error("cuda backend unavailable: " + why);
  out = reinterpret_cast<Fn>(::dlsym(library, symbol));
  if (!out)
    return Status::error(
        std::string("cuda backend unavailable: the library has no ") + symbol);
  return Status::ok();
}

} // namespace

Status probeCudaBackend(std::string &devices) {
  int (*probe)(char *, size_t) = nullptr;
  if (Status s = findEntry("strata_cuda_probe", probe); !s)
    return s;
  char message[512] = {0};
  int count = probe(message, sizeof(message));
  if (count <= 0)
    return Status::error(std::string("cuda backend unavailable: ") + message);
  devices = message;
  return Status::ok();
}

Status listCudaKernels(std::vector<std::string> &names) {
  size_t (*list)(char *, size_t) = nullptr;
  if (Status s = findEntry("strata_cuda_kernel_names", list); !s)
    return s;
  std::string text(list(nullptr, 0), '\0');
  list(text.data(), text.size());
  names.clear();
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos;
       start = end + 1)
    names.push_back(text.substr(start, end - start));
  return Status::ok();
}

Status createCudaDevice(const CudaDeviceOptions &options,
                        std::unique_ptr<Device> &out) {
  std::string devices;
  if (Status s = probeCudaBackend(devices); !s)
    return s;
  CreateCudaDeviceFn create = nullptr;
  if (Status s = findEntry("strata_cuda_create_device", create); !s)
    return s;
  char message[1024] = {0};
  Device *device = nullptr;
  if (create(&options, &device, message, sizeof(message)) != 0 || !device)
    return Status::error(std::string("cuda backend: ") + message);
  out.reset(device);
  return Status::ok();
}

Status chooseBackend(const std::string &requested, std::string &chosen,
                     std::string &note) {
  note.clear();
  if (requested == "cpu" || requested == "queued") {
    chosen = requested;
    return Status::ok();
  }
  if (requested != "cuda" && requested != "auto")
    return Status::error("unknown backend '" + requested +
                         "' (cpu, cuda, auto or queued)");
  std::string devices;
  if (Status probed = probeCudaBackend(devices); !probed) {
    if (requested == "cuda")
      return Status::error(probed.message() + "; use --backend cpu");
    chosen = "cpu";
    note = probed.message() + "; running on the cpu backend";
    return Status::ok();
  }
  chosen = "cuda";
  note = "cuda backend: " + devices;
  return Status::ok();
}

} // namespace strata::runtime
