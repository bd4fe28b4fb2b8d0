// 16-bit floating-point storage on the CPU: conversions between fp32 and the bit patterns of bf16
// and fp16, rounding as the GPU does (CUDA's __float2bfloat16 and __float2half: round to nearest,
// ties to even). The CPU kernels compute in fp32 only; the executor's cpu device uses these to
// emulate bf16/fp16 storage (inputs widened exactly, results rounded once on store), which is the
// numerical contract of the CUDA kernels (kernels/cuda/dtype.hpp).
#pragma once

#include <cstdint>

namespace planner::kernels::cpu {

// bf16: 8 exponent bits, 8 significant bits. NaN stays a (quiet) NaN; overflow rounds to inf.
std::uint16_t float_to_bf16(float x);
float bf16_to_float(std::uint16_t bits);

// fp16 (IEEE binary16): 5 exponent bits, 11 significant bits, subnormals below 2^-14. Values of
// magnitude >= 65520 (half-way above the largest finite 65504) become inf; NaN stays a quiet NaN.
std::uint16_t float_to_fp16(float x);
float fp16_to_float(std::uint16_t bits);

// Array forms: y[i] = conversion of x[i] for i < n (x and y do not overlap).
void float_to_bf16(const float* x, std::int64_t n, std::uint16_t* y);
void bf16_to_float(const std::uint16_t* x, std::int64_t n, float* y);
void float_to_fp16(const float* x, std::int64_t n, std::uint16_t* y);
void fp16_to_float(const std::uint16_t* x, std::int64_t n, float* y);

}  // namespace planner::kernels::cpu
