// The cpu backend's communicators under mpiexec (2 ranks): every collective and point-to-point
// call moves the right data, and every wait is bounded: a call nobody answers fails with a timeout
// naming the call, its group and its purpose, and still completes once the peer takes part.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "planner/exec/backend.hpp"
#include "planner/exec/bounded_wait.hpp"
#include "planner/exec/mpi_world.hpp"

namespace planner::exec {
namespace {

class Comm : public ::testing::Test {
 protected:
  void SetUp() override {
    auto w = MpiWorld::init(nullptr, nullptr);
    ASSERT_TRUE(w) << w.status().message();
    world_ = std::move(w).value();
    ASSERT_EQ(world_->size(), 2) << "run with 2 ranks";
    auto b = make_backend("cpu", *world_, {});
    ASSERT_TRUE(b) << b.status().message();
    backend_ = std::move(b).value();
    auto c = backend_->create_communicator({"tp", {0, 1}});
    ASSERT_TRUE(c) << c.status().message();
    comm_ = std::move(c).value();
  }
  Status wait(Ticket t, double seconds = 30) { return backend_->wait(t, Deadline::after(seconds)); }
  int rank() const { return world_->rank(); }

  std::unique_ptr<MpiWorld> world_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> comm_;
};

TEST_F(Comm, CollectivesMoveTheRightData) {
  const float r = static_cast<float>(rank());
  std::vector<float> v = {r + 1, 10 * r};
  auto t = comm_->all_reduce(v.data(), 2, DType::kFloat32, ReduceOp::kSum, "sum");
  ASSERT_TRUE(t);
  ASSERT_TRUE(wait(*t).is_ok());
  EXPECT_EQ(v, (std::vector<float>{3, 10}));
  v = {r, -r};
  t = comm_->all_reduce(v.data(), 2, DType::kFloat32, ReduceOp::kMax, "max");
  ASSERT_TRUE(t && wait(*t).is_ok());
  EXPECT_EQ(v, (std::vector<float>{1, 0}));

  // All-gather, out of place and in place (this member's block already in place).
  std::vector<float> mine = {r, r + 0.5f}, all(4, -1);
  t = comm_->all_gather(mine.data(), all.data(), 2, DType::kFloat32, "gather");
  ASSERT_TRUE(t && wait(*t).is_ok());
  EXPECT_EQ(all, (std::vector<float>{0, 0.5f, 1, 1.5f}));
  std::vector<float> inplace(4, -1);
  inplace[static_cast<std::size_t>(2 * rank())] = r;
  inplace[static_cast<std::size_t>(2 * rank() + 1)] = r + 0.5f;
  t = comm_->all_gather(inplace.data() + 2 * rank(), inplace.data(), 2, DType::kFloat32, "gather");
  ASSERT_TRUE(t && wait(*t).is_ok());
  EXPECT_EQ(inplace, all);

  // Reduce-scatter, out of place and in place (the result lands on this member's block).
  std::vector<float> full = {1 + r, 2 + r, 3 + r, 4 + r}, part(2);
  t = comm_->reduce_scatter(full.data(), part.data(), 2, DType::kFloat32, ReduceOp::kSum, "rs");
  ASSERT_TRUE(t && wait(*t).is_ok());
  EXPECT_EQ(part, rank() == 0 ? (std::vector<float>{3, 5}) : (std::vector<float>{7, 9}));
  t = comm_->reduce_scatter(full.data(), full.data() + 2 * rank(), 2, DType::kFloat32,
                            ReduceOp::kSum, "rs in place");
  ASSERT_TRUE(t && wait(*t).is_ok());
  EXPECT_EQ(full[static_cast<std::size_t>(2 * rank())], part[0]);
  EXPECT_EQ(full[static_cast<std::size_t>(2 * rank() + 1)], part[1]);

  std::vector<std::int64_t> send = {10 * rank(), 10 * rank() + 1}, recv(2);
  t = comm_->all_to_all(send.data(), recv.data(), 1, DType::kInt64, "a2a");
  ASSERT_TRUE(t && wait(*t).is_ok());
  EXPECT_EQ(recv,
            rank() == 0 ? (std::vector<std::int64_t>{0, 10}) : (std::vector<std::int64_t>{1, 11}));

  std::vector<std::int64_t> data = {rank() == 1 ? 42 : 0};
  t = comm_->broadcast(data.data(), 1, DType::kInt64, 1, "bcast");
  ASSERT_TRUE(t && wait(*t).is_ok());
  EXPECT_EQ(data[0], 42);
}

TEST_F(Comm, MessagesMatchByTag) {
  Communicator& p2p = backend_->world_communicator();
  const int peer = 1 - rank();
  std::vector<float> a = {1.0f + rank()}, b = {2.0f + rank()}, ra(1), rb(1);
  // Receives posted in the opposite order of the sends: tags, not order, match them.
  auto r2 = p2p.recv(rb.data(), 1, DType::kFloat32, peer, 2, "recv b");
  auto r1 = p2p.recv(ra.data(), 1, DType::kFloat32, peer, 1, "recv a");
  auto s1 = p2p.send(a.data(), 1, DType::kFloat32, peer, 1, "send a");
  auto s2 = p2p.send(b.data(), 1, DType::kFloat32, peer, 2, "send b");
  ASSERT_TRUE(r1 && r2 && s1 && s2);
  ASSERT_TRUE(backend_->wait_all(Deadline::after(30)).is_ok());
  EXPECT_EQ(ra[0], 1.0f + peer);
  EXPECT_EQ(rb[0], 2.0f + peer);
  const auto [start, end] = backend_->events(*r1);
  EXPECT_LE(backend_->device().seconds(start), backend_->device().seconds(end));
  EXPECT_TRUE(backend_->release_tickets().is_ok());
}

TEST_F(Comm, WaitsAreBoundedAndNameTheCall) {
  Communicator& p2p = backend_->world_communicator();
  std::vector<float> buf(4, 0);
  if (rank() == 0) {
    // Nobody sends yet: the wait gives up at its deadline.
    auto r = p2p.recv(buf.data(), 4, DType::kFloat32, 1, 7, "L1.mb0.fwd.pp_recv_act");
    ASSERT_TRUE(r);
    const Status st = wait(*r, 0.2);
    EXPECT_EQ(st.code(), StatusCode::kTimeout);
    EXPECT_NE(st.message().find("MPI_Irecv on world [0,1] for L1.mb0.fwd.pp_recv_act"),
              std::string::npos)
        << st.message();
    // A collective the other member has not started yet times out the same way.
    auto ar = comm_->all_reduce(buf.data(), 4, DType::kFloat32, ReduceOp::kSum, "grad_norm");
    ASSERT_TRUE(ar);
    const Status st2 = wait(*ar, 0.2);
    EXPECT_EQ(st2.code(), StatusCode::kTimeout);
    EXPECT_NE(st2.message().find("MPI_Iallreduce on tp [0,1] for grad_norm"), std::string::npos)
        << st2.message();
  }
  // Then rank 1 (which waits for rank 0's go) takes part, and both operations complete.
  auto go = world_->broadcast("go", Deadline::after(30));
  ASSERT_TRUE(go);
  if (rank() == 1) {
    auto s = p2p.send(buf.data(), 4, DType::kFloat32, 0, 7, "send");
    ASSERT_TRUE(s);
    auto ar = comm_->all_reduce(buf.data(), 4, DType::kFloat32, ReduceOp::kSum, "grad_norm");
    ASSERT_TRUE(ar);
  }
  EXPECT_TRUE(backend_->wait_all(Deadline::after(30)).is_ok());
  EXPECT_TRUE(backend_->release_tickets().is_ok());
}

// With more ranks than cores, a rank counts itself in its host's count of waiting ranks while it
// waits (the count decides whether waiting ranks yield-poll or sleep): the ranks' processes share
// it, and a wait that ends takes itself out.
TEST_F(Comm, WaitingRanksAreCountedOnTheHost) {
  const bool own_core = core_per_rank();
  set_core_per_rank(false);
  ASSERT_GE(host_waiting_ranks(), 0) << "the count is not shared";
  const auto count_becomes = [](int n) {
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (host_waiting_ranks() != n && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return host_waiting_ranks();
  };
  Communicator& p2p = backend_->world_communicator();
  std::vector<float> buf = {0};
  if (rank() == 1) {
    auto r = p2p.recv(buf.data(), 1, DType::kFloat32, 0, 9, "recv");
    ASSERT_TRUE(r);
    EXPECT_TRUE(wait(*r).is_ok());
    EXPECT_EQ(buf[0], 5.0f);
  } else {
    // Rank 1's wait, seen from this process.
    EXPECT_EQ(count_becomes(1), 1);
    buf[0] = 5.0f;
    auto s = p2p.send(buf.data(), 1, DType::kFloat32, 1, 9, "send");
    ASSERT_TRUE(s);
    EXPECT_TRUE(wait(*s).is_ok());
    EXPECT_EQ(count_becomes(0), 0);
  }
  EXPECT_TRUE(backend_->release_tickets().is_ok());
  set_core_per_rank(own_core);
  ASSERT_TRUE(world_->broadcast("done", Deadline::after(30)));
}

TEST_F(Comm, WorldGathersAndBroadcasts) {
  auto all = world_->gather("rank " + std::to_string(rank()), Deadline::after(30));
  ASSERT_TRUE(all);
  if (rank() == 0) {
    EXPECT_EQ(*all, (std::vector<std::optional<std::string>>{"rank 0", "rank 1"}));
  } else {
    EXPECT_TRUE(all->empty());
  }
  auto got = world_->broadcast(rank() == 0 ? "go" : "", Deadline::after(30));
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, "go");
  EXPECT_EQ(world_->local_size(), 2);
  EXPECT_FALSE(world_->host().empty());
}

}  // namespace
}  // namespace planner::exec
