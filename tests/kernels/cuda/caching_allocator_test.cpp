#include "planner/kernels/cuda/caching_allocator.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

namespace planner::kernels::cuda {
namespace {

// Hands out fake, distinct addresses and counts bytes; can be told to fail above a byte limit.
class FakeSource final : public MemorySource {
 public:
  Result<void*> allocate(std::size_t bytes) override {
    if (held_bytes_ + bytes > limit_bytes_) return Status::runtime("fake source: out of memory");
    held_bytes_ += bytes;
    next_ += bytes + kGap;
    auto* ptr = reinterpret_cast<void*>(next_);
    sizes_[ptr] = bytes;
    ++allocations_;
    return ptr;
  }
  Status release(void* ptr) override {
    const auto it = sizes_.find(ptr);
    if (it == sizes_.end()) return Status::internal("fake source: unknown pointer");
    held_bytes_ -= it->second;
    sizes_.erase(it);
    ++releases_;
    return Status::ok();
  }
  std::size_t held_bytes_ = 0;
  std::size_t limit_bytes_ = SIZE_MAX;
  int allocations_ = 0;
  int releases_ = 0;

 private:
  static constexpr std::uintptr_t kGap = 4096;
  std::uintptr_t next_ = 1 << 20;
  std::map<void*, std::size_t> sizes_;
};

constexpr StreamKey kStreamA = 0;
constexpr StreamKey kStreamB = 0x1234;
constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(CachingAllocator, SizeClassesRoundSmallTo512BytesAndLargeTo2MiB) {
  EXPECT_EQ(CachingAllocator::size_class(0), 512u);
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(kMiB), kMiB);
  EXPECT_EQ(CachingAllocator::size_class(kMiB + 1), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::size_class(2 * kMiB + 1), 4 * kMiB);
  EXPECT_EQ(CachingAllocator::size_class(100 * kMiB), 100 * kMiB);
  EXPECT_EQ(CachingAllocator::size_class(101 * kMiB), 102 * kMiB);
}

TEST(CachingAllocator, ReusesAFreedBlockOfTheSameClassOnTheSameStream) {
  FakeSource source;
  CachingAllocator allocator(source);
  void* a = *allocator.allocate(1000, kStreamA);
  ASSERT_TRUE(allocator.deallocate(a).is_ok());
  // 1000 and 1024 bytes share the 1024-byte class: the block comes back without a new allocation.
  void* b = *allocator.allocate(1024, kStreamA);
  EXPECT_EQ(a, b);
  EXPECT_EQ(source.allocations_, 1);
  EXPECT_EQ(allocator.stats().cache_hits, 1);
  // Another class or another stream gets fresh memory.
  void* c = *allocator.allocate(2000, kStreamA);
  ASSERT_TRUE(allocator.deallocate(b).is_ok());
  void* d = *allocator.allocate(1024, kStreamB);
  EXPECT_NE(d, b);
  EXPECT_NE(c, b);
  EXPECT_EQ(source.allocations_, 3);
  ASSERT_TRUE(allocator.deallocate(c).is_ok());
  ASSERT_TRUE(allocator.deallocate(d).is_ok());
}

TEST(CachingAllocator, ReportsCurrentReservedAndPeakBytes) {
  FakeSource source;
  CachingAllocator allocator(source);
  void* a = *allocator.allocate(3 * kMiB, kStreamA);  // class 4 MiB
  void* b = *allocator.allocate(100, kStreamA);       // class 512 B
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.in_use_bytes, 4 * kMiB + 512);
  EXPECT_EQ(s.requested_bytes, 3 * kMiB + 100);
  EXPECT_EQ(s.reserved_bytes, 4 * kMiB + 512);
  EXPECT_EQ(s.cached_bytes, 0u);
  ASSERT_TRUE(allocator.deallocate(a).is_ok());
  s = allocator.stats();
  EXPECT_EQ(s.in_use_bytes, 512u);
  EXPECT_EQ(s.requested_bytes, 100u);
  EXPECT_EQ(s.cached_bytes, 4 * kMiB);
  EXPECT_EQ(s.reserved_bytes, 4 * kMiB + 512);
  EXPECT_EQ(s.peak_in_use_bytes, 4 * kMiB + 512);
  EXPECT_EQ(s.peak_reserved_bytes, 4 * kMiB + 512);
  EXPECT_EQ(source.held_bytes_, s.reserved_bytes);

  allocator.reset_peak();
  EXPECT_EQ(allocator.stats().peak_in_use_bytes, 512u);
  void* c = *allocator.allocate(kMiB, kStreamA);
  EXPECT_EQ(allocator.stats().peak_in_use_bytes, kMiB + 512);
  EXPECT_EQ(allocator.stats().peak_reserved_bytes, 5 * kMiB + 512);

  ASSERT_TRUE(allocator.release_cached().is_ok());
  s = allocator.stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, kMiB + 512);
  EXPECT_EQ(source.held_bytes_, kMiB + 512);
  ASSERT_TRUE(allocator.deallocate(b).is_ok());
  ASSERT_TRUE(allocator.deallocate(c).is_ok());
}

TEST(CachingAllocator, FlushesTheCacheAndRetriesWhenTheSourceRunsOut) {
  FakeSource source;
  source.limit_bytes_ = 8 * kMiB;
  CachingAllocator allocator(source);
  void* a = *allocator.allocate(6 * kMiB, kStreamA);
  ASSERT_TRUE(allocator.deallocate(a).is_ok());  // cached: 6 MiB of the 8 MiB
  auto b = allocator.allocate(4 * kMiB, kStreamA);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(allocator.stats().cache_flushes, 1);
  EXPECT_EQ(allocator.stats().cached_bytes, 0u);
  EXPECT_EQ(source.releases_, 1);
  // Nothing cached to give back: the failure comes through, with what is in use.
  auto c = allocator.allocate(6 * kMiB, kStreamA);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kRuntime);
  EXPECT_NE(c.status().message().find("out of memory"), std::string::npos);
  EXPECT_NE(c.status().message().find("4194304 bytes in use"), std::string::npos);
  ASSERT_TRUE(allocator.deallocate(*b).is_ok());
}

TEST(CachingAllocator, RejectsPointersItDidNotHandOut) {
  FakeSource source;
  CachingAllocator allocator(source);
  int local = 0;
  EXPECT_EQ(allocator.deallocate(&local).code(), StatusCode::kInternal);
  void* a = *allocator.allocate(64, kStreamA);
  ASSERT_TRUE(allocator.deallocate(a).is_ok());
  EXPECT_EQ(allocator.deallocate(a).code(), StatusCode::kInternal);  // twice
}

TEST(CachingAllocator, ReturnsCachedBlocksToTheSourceOnDestruction) {
  FakeSource source;
  {
    CachingAllocator allocator(source);
    std::vector<void*> blocks;
    for (std::size_t bytes : {100u, 5000u, 3000000u})
      blocks.push_back(*allocator.allocate(bytes, kStreamB));
    for (void* p : blocks)
      ASSERT_TRUE(allocator.deallocate(p).is_ok());
    EXPECT_EQ(source.held_bytes_, allocator.stats().reserved_bytes);
  }
  EXPECT_EQ(source.held_bytes_, 0u);
  EXPECT_EQ(source.releases_, 3);
}

}  // namespace
}  // namespace planner::kernels::cuda
