#include "planner/kernels/cuda/caching_allocator.hpp"

#include <algorithm>
#include <string>

namespace planner::kernels::cuda {

CachingAllocator::~CachingAllocator() {
  const std::lock_guard<std::mutex> lock(mutex_);
  (void)release_cached_locked();
}

std::size_t CachingAllocator::size_class(std::size_t bytes) {
  const std::size_t round = bytes <= kSmallLimitBytes ? kMinBlockBytes : kLargeRoundBytes;
  const std::size_t rounded = (bytes + round - 1) / round * round;
  return std::max(rounded, kMinBlockBytes);
}

Result<void*> CachingAllocator::allocate(std::size_t bytes, StreamKey stream) {
  const std::size_t size = size_class(bytes);
  const std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  auto list = free_.find(FreeListKey{stream, size});
  if (list != free_.end() && !list->second.empty()) {
    ptr = list->second.back();
    list->second.pop_back();
    stats_.cached_bytes -= size;
    ++stats_.cache_hits;
  } else {
    Result<void*> fresh = source_.allocate(size);
    if (!fresh.is_ok() && stats_.cached_bytes > 0) {
      // Out of memory, perhaps because the cache holds blocks of other sizes or streams.
      PLANNER_RETURN_IF_ERROR(release_cached_locked());
      ++stats_.cache_flushes;
      fresh = source_.allocate(size);
    }
    if (!fresh.is_ok()) {
      return fresh.status().with_context("caching allocator: " + std::to_string(size) +
                                         " bytes requested with " +
                                         std::to_string(stats_.in_use_bytes) + " bytes in use");
    }
    ptr = *fresh;
    ++stats_.source_allocations;
    stats_.reserved_bytes += size;
  }
  live_.emplace(ptr, Block{size, bytes, stream});
  stats_.in_use_bytes += size;
  stats_.requested_bytes += bytes;
  note_peaks_locked();
  return ptr;
}

Status CachingAllocator::deallocate(void* ptr) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = live_.find(ptr);
  if (it == live_.end()) {
    return Status::internal("caching allocator: deallocate of a pointer it did not hand out");
  }
  const Block block = it->second;
  live_.erase(it);
  free_[FreeListKey{block.stream, block.size}].push_back(ptr);
  stats_.in_use_bytes -= block.size;
  stats_.requested_bytes -= block.requested;
  stats_.cached_bytes += block.size;
  return Status::ok();
}

Status CachingAllocator::release_cached() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return release_cached_locked();
}

Status CachingAllocator::release_cached_locked() {
  Status first = Status::ok();
  for (auto& [key, blocks] : free_) {
    for (void* ptr : blocks) {
      Status released = source_.release(ptr);
      if (!released.is_ok() && first.is_ok()) first = std::move(released);
      stats_.cached_bytes -= key.second;
      stats_.reserved_bytes -= key.second;
    }
  }
  free_.clear();
  return first;
}

AllocatorStats CachingAllocator::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  const std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use_bytes = stats_.in_use_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void CachingAllocator::note_peaks_locked() {
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
}

}  // namespace planner::kernels::cuda
