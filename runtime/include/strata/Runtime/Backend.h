//===- Backend.h - Choosing where an artifact runs --------------*- C++ -*-===//
//
// strata-run --backend cpu|cuda|auto. The CPU backend is always there. The
// CUDA backend is a library (libStrataRuntimeCUDA.so) loaded at run time,
// built wherever the CUDA toolkit is; a machine without it, the CUDA
// runtime, a driver or a GPU gets one line saying which.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_BACKEND_H
#define STRATA_RUNTIME_BACKEND_H

#include "strata/Runtime/Device.h"

#include <memory>
#include <string>
#include <vector>

namespace strata::runtime {

/// Loads the CUDA backend library and asks it for devices. Ok with a
/// description of the devices; otherwise "cuda backend unavailable: <why>".
Status probeCudaBackend(std::string &devices);

/// The ops the CUDA backend library has kernels for (no GPU needed; an
/// error when the library is not built or cannot load).
Status listCudaKernels(std::vector<std::string> &names);

/// A CUDA device from the backend library (after the probe succeeds).
Status createCudaDevice(const CudaDeviceOptions &options,
                        std::unique_ptr<Device> &out);

/// Resolves --backend: "cpu" stays; "cuda" is the cuda backend or an error
/// saying why it is unavailable; "auto" is "cuda" where the probe finds a
/// GPU, else "cpu" with `note` saying why.
Status chooseBackend(const std::string &requested, std::string &chosen,
                     std::string &note);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_BACKEND_H
