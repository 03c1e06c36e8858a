#pragma once
// FP4FORGE_SCHEME_TARGETS(FN): one scheme_fast::TargetEntry {target bit, &N_<TARGET>::FN} per Highway
// target compiled into the including file, best first (x86 target bits: lower = better). Include it in
// the HWY_ONCE part of a file that went through <hwy/foreach_target.h> (HWY_TARGETS is then known).
#include <hwy/highway.h>

#if HWY_TARGETS & HWY_AVX3_DL
#define FP4FORGE_TARGET_AVX3_DL(FN) {HWY_AVX3_DL, &N_AVX3_DL::FN},
#else
#define FP4FORGE_TARGET_AVX3_DL(FN)
#endif
#if HWY_TARGETS & HWY_AVX3
#define FP4FORGE_TARGET_AVX3(FN) {HWY_AVX3, &N_AVX3::FN},
#else
#define FP4FORGE_TARGET_AVX3(FN)
#endif
#if HWY_TARGETS & HWY_AVX2
#define FP4FORGE_TARGET_AVX2(FN) {HWY_AVX2, &N_AVX2::FN},
#else
#define FP4FORGE_TARGET_AVX2(FN)
#endif
#if HWY_TARGETS & HWY_SSE4
#define FP4FORGE_TARGET_SSE4(FN) {HWY_SSE4, &N_SSE4::FN},
#else
#define FP4FORGE_TARGET_SSE4(FN)
#endif
#if HWY_TARGETS & HWY_SSSE3
#define FP4FORGE_TARGET_SSSE3(FN) {HWY_SSSE3, &N_SSSE3::FN},
#else
#define FP4FORGE_TARGET_SSSE3(FN)
#endif
#if HWY_TARGETS & HWY_NEON
#define FP4FORGE_TARGET_NEON(FN) {HWY_NEON, &N_NEON::FN},
#else
#define FP4FORGE_TARGET_NEON(FN)
#endif
#if HWY_TARGETS & HWY_EMU128
#define FP4FORGE_TARGET_EMU128(FN) {HWY_EMU128, &N_EMU128::FN},
#else
#define FP4FORGE_TARGET_EMU128(FN)
#endif
#if HWY_TARGETS & HWY_SCALAR
#define FP4FORGE_TARGET_SCALAR(FN) {HWY_SCALAR, &N_SCALAR::FN},
#else
#define FP4FORGE_TARGET_SCALAR(FN)
#endif

#define FP4FORGE_SCHEME_TARGETS(FN)                                                                  \
  FP4FORGE_TARGET_AVX3_DL(FN) FP4FORGE_TARGET_AVX3(FN) FP4FORGE_TARGET_AVX2(FN) FP4FORGE_TARGET_SSE4(FN) \
  FP4FORGE_TARGET_SSSE3(FN) FP4FORGE_TARGET_NEON(FN) FP4FORGE_TARGET_EMU128(FN) FP4FORGE_TARGET_SCALAR(FN)
