// The FMA peak of one core in float: 12 independent chains of AVX-512
// fused multiply-adds (16 lanes, 2 FLOPs a lane), enough to cover the
// FMA units' latency. docs/performance.md compares the products' rate in
// a step with it.
//
//   cc -O2 -mavx512f bench/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

int main(void) {
  __m512 acc[12];
  const __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-9f);
  for (int i = 0; i < 12; i++)
    acc[i] = _mm512_set1_ps((float)i);
  const long n = 200000000;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long k = 0; k < n; k++) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++)
      acc[i] = _mm512_fmadd_ps(acc[i], b, c);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  float sum = 0; // keeps the chains live
  for (int i = 0; i < 12; i++)
    sum += _mm512_reduce_add_ps(acc[i]);
  printf("%.1f GFLOP/s per core (float FMA peak; checksum %g)\n",
         (double)n * 12 * 32 / s / 1e9, sum);
  return 0;
}
