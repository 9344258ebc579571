//===- HostDevice.h - Functions both the host and CUDA compile --*- C++ -*-===//
//
// STRATA_HOST_DEVICE marks an inline function the CPU kernels call on the
// host and the CUDA kernels on the device, so the two share one definition
// (NarrowFloat.h, UnaryGrad.h).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_HOSTDEVICE_H
#define STRATA_RUNTIME_HOSTDEVICE_H

#ifdef __CUDACC__
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif

#endif // STRATA_RUNTIME_HOSTDEVICE_H
