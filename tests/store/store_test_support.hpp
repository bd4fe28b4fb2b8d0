// Shared by the store tests: unwrapping Results, a database in a temporary directory, sample rows.
#pragma once

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "planner/store/store.hpp"
#include "support/command.hpp"

#define PLANNER_EXPECT_OK(expr)                                                  \
  do {                                                                           \
    const ::planner::Status planner_test_status_ = (expr);                       \
    EXPECT_TRUE(planner_test_status_.is_ok()) << planner_test_status_.message(); \
  } while (false)

#define PLANNER_ASSERT_OK(expr)                                                  \
  do {                                                                           \
    const ::planner::Status planner_test_status_ = (expr);                       \
    ASSERT_TRUE(planner_test_status_.is_ok()) << planner_test_status_.message(); \
  } while (false)

namespace planner::store::testing {

// The value of a Result; a failed Result throws, which GoogleTest reports as a test failure with
// the message.
template <class T>
T take(Result<T> result) {
  if (!result) throw std::runtime_error(result.status().message());
  return std::move(result).value();
}

// A small plan document, distinct per `tp`.
inline std::string plan_text(int tp) {
  return R"({"schema_version": 1, "kind": "plan", "model": "gpt-tiny",
             "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": "H100"},
             "training": {"global_batch_size": 64, "seq_length": 1024},
             "parallel": {"tp": )" +
         std::to_string(tp) + R"(, "pp": 2, "micro_batch_size": 1}})";
}

// `per_rank` ops on each of `ranks` ranks: op ids "op<i>", kinds cycling gemm / all_reduce / send,
// back to back from t = 0, durations (i + 1) microseconds.
inline std::vector<OpPrediction> sample_predictions(int ranks, int per_rank) {
  static const char* kKinds[] = {"gemm", "all_reduce", "send"};
  std::vector<OpPrediction> ops;
  ops.reserve(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(per_rank));
  for (int r = 0; r < ranks; ++r) {
    Time t;
    for (int i = 0; i < per_rank; ++i) {
      OpPrediction op;
      op.op_id = "op" + std::to_string(i);
      op.op_kind = kKinds[i % 3];
      op.rank = r;
      if (i % 2 == 0) op.micro_batch = i / 2;
      op.start = t;
      op.duration = microseconds(i + 1);
      op.bytes = Bytes(1024 * (i + 1));
      t += op.duration;
      ops.push_back(op);
    }
  }
  return ops;
}

}  // namespace planner::store::testing
