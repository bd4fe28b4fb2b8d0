// A caching device-memory allocator: size-class free lists per stream, current and peak use.
//
// cudaMalloc and cudaFree are slow and cudaFree synchronises the device, so the executor allocates
// through this cache: a freed block goes onto a free list and serves the next request of its size
// class on the same stream. This class is the host-side bookkeeping only; the memory comes from a
// MemorySource (CudaMemorySource in device_buffer.hpp, plain cudaMalloc; a fake in the unit tests).
//
// Size classes, after PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp:
// kMinBlockSize, kSmallSize, kRoundLarge): a request rounds up to a multiple of 512 bytes up to
// 1 MiB, and to a multiple of 2 MiB above. A cached block serves only requests of the same class
// on the same stream. Kernels on one stream run in order, so a block freed on the host while a
// kernel still uses it is safe to hand to the next allocation on that stream, whose kernels run
// later; on another stream they could race. A block used on several streams must be freed only
// after those streams have synchronised with the freeing one.
//
// When the source fails (out of memory) the allocator returns every cached block to the source and
// tries once more. All members are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/core/status.hpp"

namespace planner::kernels::cuda {

// Identifies a stream in the free lists: the value of its cudaStream_t (0 is the legacy default
// stream). stream_key() in device_buffer.hpp converts.
using StreamKey = std::uintptr_t;

// Where the allocator's memory comes from.
class MemorySource {
 public:
  virtual ~MemorySource() = default;
  // A new block of exactly `bytes` bytes, or the failure (out of memory, no device).
  virtual Result<void*> allocate(std::size_t bytes) = 0;
  // Returns a block obtained from allocate().
  virtual Status release(void* ptr) = 0;
};

// Byte counts are of rounded (size-class) sizes unless named "requested".
struct AllocatorStats {
  std::size_t in_use_bytes = 0;         // live blocks (handed out and not yet deallocated)
  std::size_t requested_bytes = 0;      // the sizes callers asked for, of the live blocks
  std::size_t cached_bytes = 0;         // free blocks kept for reuse
  std::size_t reserved_bytes = 0;       // in_use_bytes + cached_bytes: what the source handed out
  std::size_t peak_in_use_bytes = 0;    // highest in_use_bytes since construction or reset_peak()
  std::size_t peak_reserved_bytes = 0;  // highest reserved_bytes since then
  std::int64_t source_allocations = 0;  // successful MemorySource::allocate calls
  std::int64_t cache_hits = 0;          // requests served from a free list
  std::int64_t cache_flushes = 0;       // times the cache was emptied to retry a failed request
};

class CachingAllocator {
 public:
  static constexpr std::size_t kMinBlockBytes = 512;
  static constexpr std::size_t kSmallLimitBytes = std::size_t{1} << 20;  // 1 MiB
  static constexpr std::size_t kLargeRoundBytes = std::size_t{2} << 20;  // 2 MiB

  explicit CachingAllocator(MemorySource& source) : source_(source) {}
  // Returns the cached blocks to the source. Blocks still live are not freed: deallocate them
  // before the allocator goes away.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The size class of a request: at least kMinBlockBytes (also for 0), rounded as above.
  static std::size_t size_class(std::size_t bytes);

  // A block of at least `bytes` bytes for use on `stream`.
  Result<void*> allocate(std::size_t bytes, StreamKey stream);

  // Puts a block from allocate() back on its free list; kInternal for any other pointer.
  Status deallocate(void* ptr);

  // Returns every cached block to the source (the first failure is reported, the rest still tried).
  Status release_cached();

  AllocatorStats stats() const;

  // Starts the peaks afresh from the current values (e.g. before a training step).
  void reset_peak();

 private:
  struct Block {
    std::size_t size = 0;
    std::size_t requested = 0;
    StreamKey stream = 0;
  };
  using FreeListKey = std::pair<StreamKey, std::size_t>;

  Status release_cached_locked();
  void note_peaks_locked();

  MemorySource& source_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
  std::map<FreeListKey, std::vector<void*>> free_;
  AllocatorStats stats_;
};

}  // namespace planner::kernels::cuda
