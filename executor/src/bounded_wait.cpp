#include "planner/exec/bounded_wait.hpp"

#include <string>

namespace planner::exec {

Status wait_bounded(AsyncWork& work, Deadline deadline, std::string_view what, double timeout_s) {
  Poller poller;
  for (;;) {
    Result<bool> done = work.done();
    Status failure = done.is_ok() ? work.health() : done.status();
    if (failure.is_ok() && *done) return Status::ok();
    if (failure.is_ok() && deadline.passed()) {
      failure = Status::timeout(std::string(what) + " did not complete within " +
                                std::to_string(static_cast<long long>(timeout_s + 0.5)) + " s");
    } else if (!failure.is_ok()) {
      failure = failure.with_context(std::string(what));
    }
    if (!failure.is_ok()) {
      work.abort();
      return failure;
    }
    poller.pause();
  }
}

}  // namespace planner::exec
