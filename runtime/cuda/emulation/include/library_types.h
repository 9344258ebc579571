//===- library_types.h - CUDA's data type enums, for the emulation -*- C++ -*-===//
//
// Part of Strata's CUDA emulation (runtime/cuda/emulation): the subset of the
// CUDA toolkit's library_types.h the cuda backend uses, with the toolkit's
// values, so the backend's sources compile unchanged as host C++.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_CUDA_EMULATION_LIBRARY_TYPES_H
#define STRATA_CUDA_EMULATION_LIBRARY_TYPES_H

typedef enum cudaDataType_t {
  CUDA_R_16F = 2,
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16BF = 14,
  CUDA_R_8I = 3,
  CUDA_R_32I = 10,
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

#endif // STRATA_CUDA_EMULATION_LIBRARY_TYPES_H
