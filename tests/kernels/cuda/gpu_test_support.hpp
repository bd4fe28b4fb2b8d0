// Helpers for the CUDA kernel tests: the fixture that skips without a device, host-side rounding to
// bf16/fp16, uploads and downloads through float, and the comparison against the CPU kernels.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../kernel_test_support.hpp"
#include "planner/kernels/cuda/device_buffer.hpp"
#include "planner/kernels/cuda/dtype.hpp"
#include "planner/kernels/cuda/stream.hpp"
#include "planner/kernels/device_info.hpp"
#include "tolerance.hpp"

namespace planner::kernels::cuda::testing {

using cpu::testing::add_positions;
using cpu::testing::random_floats;
using cpu::testing::random_ids;
using cpu::testing::slice_positions;

// Throws (failing the running test with the message) when a Status is not ok: the helpers below
// run inside tests, where gtest reports an escaped exception as a failure of that test.
inline void require(const Status& status, const std::string& what = "") {
  if (!status.is_ok())
    throw std::runtime_error(what + (what.empty() ? "" : ": ") + status.message());
}
template <class T>
T require(Result<T> result, const std::string& what = "") {
  require(result.status(), what);
  return std::move(result).value();
}

// The element types the typed tests run over.
using ElementTypes = ::testing::Types<float, bf16, fp16>;

// Skips every test of a suite on machines without a CUDA device, saying why; otherwise gives each
// test its own stream.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static const CudaInventory inventory = cuda_inventory();
    if (inventory.devices.empty()) {
      GTEST_SKIP() << "no CUDA device: " << inventory.reason;
    }
    require(set_device(0), "set_device");
    stream_ = require(CudaStream::create(), "CudaStream::create");
  }
  cudaStream_t stream() const { return stream_.get(); }

 private:
  CudaStream stream_;
};

// Host-side conversions between float and the element types (round to nearest even), the same
// rounding the kernels' stores use.
template <class T>
T from_float(float x);
template <>
inline float from_float<float>(float x) {
  return x;
}
template <>
inline bf16 from_float<bf16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
inline fp16 from_float<fp16>(float x) {
  return __float2half_rn(x);
}
inline float to_float(float x) {
  return x;
}
inline float to_float(bf16 x) {
  return __bfloat162float(x);
}
inline float to_float(fp16 x) {
  return __half2float(x);
}

// x rounded to T and back: the values a T tensor holds.
template <class T>
std::vector<float> quantize(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    out[i] = to_float(from_float<T>(x[i]));
  return out;
}

// A device array of T holding x (rounded to T), ready when this returns.
template <class T>
DeviceBuffer<T> upload(const std::vector<float>& x, cudaStream_t stream) {
  std::vector<T> host(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    host[i] = from_float<T>(x[i]);
  return require(to_device(host, stream), "upload");
}
inline DeviceBuffer<std::int32_t> upload_ids(const std::vector<std::int32_t>& ids,
                                             cudaStream_t stream) {
  return require(to_device(ids, stream), "upload ids");
}
template <class T>
DeviceBuffer<T> zeros(std::int64_t n, cudaStream_t stream) {
  DeviceBuffer<T> buffer = require(DeviceBuffer<T>::allocate(n), "allocate");
  require(buffer.zero(stream), "zero");
  return buffer;
}

// The device array's values as float, after the work enqueued so far.
template <class T>
std::vector<float> download(const DeviceBuffer<T>& buffer, cudaStream_t stream) {
  const std::vector<T> host = require(to_host(buffer, stream), "download");
  std::vector<float> out(host.size());
  for (std::size_t i = 0; i < host.size(); ++i)
    out[i] = to_float(host[i]);
  return out;
}

// Checks a GPU output of type T against the CPU kernel's fp32 output `want`: bitwise against want
// rounded to T for KernelKind::kExact, else within tolerance(kind, T), naming the worst element.
template <class T>
void expect_matches_cpu(const std::vector<float>& got, const std::vector<float>& want,
                        KernelKind kind, const std::string& what) {
  const std::string label = what + " <" + std::string(to_string(kDTypeOf<T>)) + ">";
  ASSERT_EQ(got.size(), want.size()) << label;
  if (kind == KernelKind::kExact) {
    const std::vector<float> rounded = quantize<T>(want);
    std::size_t mismatches = 0, first = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const bool same = got[i] == rounded[i] || (std::isnan(got[i]) && std::isnan(rounded[i]));
      if (!same && mismatches++ == 0) first = i;
    }
    EXPECT_EQ(mismatches, 0u) << label << ": " << mismatches << " elements differ, first " << first
                              << ": got " << (got.empty() ? 0.0f : got[first]) << ", expected "
                              << (rounded.empty() ? 0.0f : rounded[first]);
    return;
  }
  const Tolerance t = tolerance(kind, kDTypeOf<T>);
  cpu::testing::expect_close(got, want, t.rtol, t.atol, label);
}

// For fp32 outputs (statistics, parameter gradients) of a kernel with T inputs.
inline void expect_close_fp32(const std::vector<float>& got, const std::vector<float>& want,
                              KernelKind kind, const std::string& what) {
  const Tolerance t = tolerance(kind, DType::kF32);
  if (kind == KernelKind::kExact) {
    EXPECT_EQ(got, want) << what;
    return;
  }
  cpu::testing::expect_close(got, want, t.rtol, t.atol, what);
}

}  // namespace planner::kernels::cuda::testing
