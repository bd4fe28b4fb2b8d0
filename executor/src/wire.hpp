// Plain values to and from byte strings, for the executor's control messages and checkpoint
// shards (private to executor/). Native layout: messages stay within one build on one kind of
// machine, and a shard's header records what it was written with.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

namespace planner::exec {

template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Reads values in the order put() appended them. Reading past the end yields zero values and makes
// ok() false, so a truncated message is detected once, after the reads.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  template <class T>
  T get() {
    T v{};
    if (at_ + sizeof(T) <= data_.size()) std::memcpy(&v, data_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string text(std::size_t n) {
    std::string s(data_.substr(std::min(at_, data_.size()), n));
    at_ += n;
    return s;
  }
  bool ok() const { return at_ <= data_.size(); }
  std::size_t offset() const { return at_; }

 private:
  std::string_view data_;
  std::size_t at_ = 0;
};

}  // namespace planner::exec
