// main() for GoogleTest suites run under mpiexec (planner_add_test ... MPI_RANKS n): initialises
// MPI, runs the tests on every rank, prints the full report on rank 0 and only failures (tagged
// with the rank) elsewhere, and exits non-zero on every rank when any rank failed, so ctest sees
// one result for the job. Tests must run the same collective calls on every rank (use EXPECT_*
// rather than an early ASSERT_* return before a collective).
#include <mpi.h>

#include <gtest/gtest.h>

#include <iostream>

namespace {

// Prints failed assertions of a non-root rank, prefixed with the rank.
class RankFailurePrinter final : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::cerr << "[rank " << rank_ << "] " << (result.file_name() ? result.file_name() : "?") << ":"
              << result.line_number() << ": " << result.summary() << std::endl;
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int local = RUN_ALL_TESTS();
  int failed = 0;
  MPI_Allreduce(&local, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && failed != 0 && local == 0) {
    std::cerr << "another rank failed (see its [rank N] lines)" << std::endl;
  }
  MPI_Finalize();
  return failed != 0 ? 1 : 0;
}
