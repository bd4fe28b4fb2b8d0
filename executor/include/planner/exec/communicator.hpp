// Communicator: the collectives and point-to-point messages of one rank-grid group (tp, dp-cp,
// embedding, ...; program.hpp's CommGroup), over MPI for the cpu backend, NCCL for a cuda backend.
//
// Every call only starts the operation and returns a Ticket; the Backend (backend.hpp) tests,
// waits for and times tickets, always against a deadline, so no wait can hang. Buffers are device
// memory and must stay untouched (and allocated) until the ticket completes. Counts are elements of
// `type`. Collectives on one communicator must be started in the same order on every member (the
// step program guarantees it: members issue identical collective sequences).
//
// Buffer conventions (nccl-tests "size" in brackets, as OpDesc::comm_bytes counts it):
//   all_reduce      buf[count] in place                                        [count]
//   all_gather      send[count] -> recv[size() x count], block i from member i  [size() x count];
//                   in place when send == recv + rank() x count
//   reduce_scatter  send[size() x count] -> recv[count], member i gets block i  [size() x count];
//                   in place when recv == send + rank() x count
//   all_to_all      send[size() x count] -> recv[size() x count], block j of member i lands as
//                   block i on member j                                         [size() x count]
//   all_to_all_v    the same with blocks of different sizes: send_counts[j] elements to member
//                   j (blocks laid out in member order), recv_counts[i] from member i (the
//                   counts must agree pairwise: MoE token dispatch after a count exchange)
//   broadcast       buf[count] from member `root`                               [count]
//   send / recv     count elements to / from member `peer`, matched by tag (FIFO per peer and tag)
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "planner/core/status.hpp"

namespace planner::exec {

// Element types of device buffers and messages. kBFloat16 / kFloat16: the bf16 / fp16 storage of
// mixed-precision activations (device.hpp); their sums and maxima are computed in fp32 and rounded.
enum class DType : std::uint8_t { kFloat32, kFloat64, kInt32, kInt64, kByte, kBFloat16, kFloat16 };
enum class ReduceOp : std::uint8_t { kSum, kMax };

constexpr std::int64_t dtype_bytes(DType type) {
  switch (type) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kByte:
      return 1;
    case DType::kBFloat16:
    case DType::kFloat16:
      return 2;
  }
  return 1;
}

using Clock = std::chrono::steady_clock;

// The instant a bounded wait gives up.
struct Deadline {
  Clock::time_point at;
  static Deadline after(double seconds) {
    return {Clock::now() +
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))};
  }
  bool passed() const { return Clock::now() >= at; }
};

// A started communication operation; valid until the Backend releases tickets (once per step).
struct Ticket {
  static constexpr std::uint32_t kNone = 0xffffffffu;
  std::uint32_t id = kNone;
  bool valid() const { return id != kNone; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  // The group's axes ("tp", "dp-cp", "world", ...) and its members' global ranks; member i of the
  // communicator is ranks()[i].
  virtual const std::string& axes() const = 0;
  virtual const std::vector<int>& ranks() const = 0;
  virtual int rank() const = 0;  // this process's index in ranks()
  int size() const { return static_cast<int>(ranks().size()); }

  // `what` names the operation in errors and timeouts (usually the op id,
  // "L3.mb0.fwd.tp_reduce_attn").
  virtual Result<Ticket> all_reduce(void* buf, std::int64_t count, DType type, ReduceOp op,
                                    std::string_view what) = 0;
  virtual Result<Ticket> all_gather(const void* send, void* recv, std::int64_t count, DType type,
                                    std::string_view what) = 0;
  virtual Result<Ticket> reduce_scatter(const void* send, void* recv, std::int64_t count,
                                        DType type, ReduceOp op, std::string_view what) = 0;
  virtual Result<Ticket> all_to_all(const void* send, void* recv, std::int64_t count, DType type,
                                    std::string_view what) = 0;
  virtual Result<Ticket> all_to_all_v(const void* send,
                                      const std::vector<std::int64_t>& send_counts, void* recv,
                                      const std::vector<std::int64_t>& recv_counts, DType type,
                                      std::string_view what) = 0;
  virtual Result<Ticket> broadcast(void* buf, std::int64_t count, DType type, int root,
                                   std::string_view what) = 0;
  virtual Result<Ticket> send(const void* buf, std::int64_t count, DType type, int peer,
                              std::uint32_t tag, std::string_view what) = 0;
  virtual Result<Ticket> recv(void* buf, std::int64_t count, DType type, int peer,
                              std::uint32_t tag, std::string_view what) = 0;
};

}  // namespace planner::exec
