#include "planner/core/memory.hpp"

#include <gtest/gtest.h>

namespace planner {
namespace {}  // namespace
}  // namespace planner
