//===- nvToolsExt.h - NVTX ranges, emulated as nothing ----------*- C++ -*-===//
//
// Part of Strata's CUDA emulation: the NVTX range calls the cuda backend
// makes for Nsight's timeline, which have nothing to mark here.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_CUDA_EMULATION_NVTOOLSEXT_H
#define STRATA_CUDA_EMULATION_NVTOOLSEXT_H

inline int nvtxRangePushA(const char *) { return 0; }
inline int nvtxRangePop() { return 0; }

#endif // STRATA_CUDA_EMULATION_NVTOOLSEXT_H
