// ModelState: one rank's parameters, gradients and optimizer state, laid out as the step program
// synchronises them.
//
// Tensors are ModelPartition's (model_partition.hpp), in registration order. Each lives in a flat
// group buffer:
//   ZeRO 0-2  a group per gradient bucket (ModelPartition::stage_params, the buckets the lowering
//             reduces: op role dp_grad_reduce, slot = bucket);
//   ZeRO 3    a group per layer (gather/reduce slot 0), one for the embedding (slot 2) and one for
//             the final norm and LM head (slot 3), tensors in registration order.
// A group's buffer is padded to a multiple of the data-parallel size; rank d of the group's
// communicator owns elements [d·shard, (d+1)·shard) with shard = ceil(elements / size): with ZeRO
// >= 1 its optimizer state covers only that range (ZeRO 0: the whole group).
//
// Within a tensor the elements split over tensor parallelism come first and its tp-replicated
// elements last (ParamTensor::tp_replicated):
//   embedding   word rows [vocab/tp x hidden] | learned positions [max_seq_len x hidden]
//   norms       gamma [hidden] (| beta [hidden], LayerNorm)             (all replicated)
//   attn_qkv    weight rows [q heads | k heads | v heads of this rank] x hidden | bias
//   attn_out    weight [hidden x q_dim/tp] | bias [hidden]
//   mlp_gate/up weight [ffn/tp x hidden] | bias [ffn/tp]
//   mlp_down    weight [hidden x ffn/tp] | bias [hidden]
//   moe_router  weight [experts x hidden]                                   (replicated)
//   expert_gate/up    weights [local experts][expert ffn x hidden] | biases [local][expert ffn]
//   expert_down       weights [local experts][hidden x expert ffn] | biases [local][hidden]
//   shared_gate/up/down   as mlp_gate/up/down over the shared experts' ffn
//   lm_head     weight [vocab/tp x hidden]
// Local expert i of expert-parallel rank e is global expert e·(experts / ep) + i. Expert weights
// live in the expert buckets, reduced (and ZeRO-sharded) over the expert data parallel group.
//
// Precision (Config::weight_type): with fp32 weights `param` is the padded group of fp32 weights
// the kernels read. With 16-bit (bf16/fp16) weights it is mixed precision: `model` holds the padded
// group of 16-bit weights the kernels read, and `param` the fp32 master weights of this rank's
// shard only (elements [shard_begin, shard_end), the whole group without ZeRO), from which the
// optimizer refreshes `model`. Gradients are fp32 in both cases (main grads).
//
// Initialisation is Megatron-LM's (init_method_std 0.02; output projections scaled by
// 1/sqrt(2·layers); biases and LayerNorm beta 0, gamma 1), drawn with the counter-based generator
// from the position of each element in the full, unsharded logical tensor (kernels/cpu/rng.hpp), so
// every parallel layout holds exactly the single-process model's values.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "planner/core/model_partition.hpp"
#include "planner/core/model_spec.hpp"
#include "planner/core/parallel_config.hpp"
#include "planner/exec/communicator.hpp"
#include "planner/exec/device_buffer.hpp"

namespace planner::exec {

// Megatron-LM's init_method_std default.
inline constexpr float kInitStd = 0.02f;

struct ParamGroup {
  std::int64_t elements = 0;
  std::int64_t padded = 0;  // a multiple of the communicator's size
  std::int64_t shard_begin = 0;
  std::int64_t shard_end = 0;    // this rank's range (the whole group unless sharded)
  bool sharded = false;          // ZeRO >= 1 over a group of >= 2 ranks
  bool expert = false;           // expert weights (their group: expert data parallel)
  Communicator* comm = nullptr;  // data-parallel group (null without data parallelism)
  std::vector<int> tensors;      // in buffer order
  DeviceBuffer param;            // fp32: padded weights; 16-bit: the shard's fp32 master weights
  DeviceBuffer model;            // 16-bit weights only: padded, of the weight type
  DeviceBuffer grad;             // padded floats
  DeviceBuffer exp_avg;          // shard floats (first moment, or SGD momentum)
  DeviceBuffer exp_avg_sq;       // shard floats (Adam only)
  std::int64_t shard() const { return shard_end - shard_begin; }
};

struct TensorPlace {
  int group = -1;
  std::int64_t offset = 0;  // in the group buffer
};

class ModelState {
 public:
  struct Config {
    ModelSpec model;
    ParallelConfig parallel;
    int stage = 0;
    int tp_rank = 0;
    std::int64_t bucket_elements = 0;  // the lowering's bucket size
    std::uint64_t seed = 0;
    Communicator* dp = nullptr;   // the data-parallel (dp or dp-cp) group, or null
    Communicator* edp = nullptr;  // the expert data parallel group, or null
    int ep_rank = 0;              // this rank's index in its expert-parallel group
    bool adam = true;             // allocate the second moment
    // The model weights' type: kFloat32, or kBFloat16 / kFloat16 for mixed precision (the
    // device's activation_type()).
    DType weight_type = DType::kFloat32;
  };

  // Allocates and initialises the state (see the header).
  static Result<std::unique_ptr<ModelState>> create(Device& device, const Config& config);

  const std::vector<ParamTensor>& tensors() const { return params_.tensors; }
  const TensorPlace& place(int tensor) const { return places_[static_cast<std::size_t>(tensor)]; }
  std::vector<ParamGroup>& groups() { return groups_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }
  // The tensor of (layer, role) on this rank, or -1; the LM head of a single-stage model with tied
  // embeddings is the embedding.
  int find(int layer, OpRole role) const;
  // True for 16-bit model weights with fp32 masters (see the header).
  bool mixed() const { return weight_type_ != DType::kFloat32; }
  DType weight_type() const { return weight_type_; }
  // The weights the kernels read (of weight_type()): `model` when mixed, else `param`.
  void* weight(int tensor) const;
  // The fp32 weights of a tensor when the model is fp32 (not mixed); nullptr when mixed (its
  // masters cover a shard, see master()).
  float* param(int tensor) const;
  float* grad(int tensor) const;
  // The fp32 value of group element `shard_begin`: the start of this rank's shard of weights
  // (fp32) or master weights (mixed).
  float* master(const ParamGroup& group) const;
  int group_of(int tensor) const { return place(tensor).group; }
  // The group an op with role dp_grad_reduce / dp_param_gather reduces or gathers: a bucket index
  // (ZeRO 0-2) or a ZeRO-3 slot (0 layer `layer`, 2 embedding, 3 final norm and LM head). -1 when
  // there is no such group.
  int group_for(int layer, int slot) const;
  // Optimizer steps taken (Adam's step counter; checkpoints keep it).
  std::int64_t steps() const { return steps_; }
  void count_step() { ++steps_; }
  void set_steps(std::int64_t steps) { steps_ = steps; }  // resuming from a checkpoint

 private:
  // Writes a tensor's initial fp32 values: the weights (fp32), or the rounded 16-bit weights and
  // the fp32 masters of this rank's shard (mixed).
  Status upload(Device& device, int tensor, const std::vector<float>& values);

  StageParams params_;
  std::vector<TensorPlace> places_;
  std::vector<ParamGroup> groups_;
  std::vector<int> layer_group_;  // ZeRO-3: group of each global layer (-1 elsewhere)
  int embedding_group_ = -1;
  int head_group_ = -1;
  bool zero3_ = false;
  int tied_single_stage_ = -1;                        // the embedding tensor doubling as LM head
  std::vector<std::pair<std::uint32_t, int>> index_;  // ((layer + 1) << 8 | role, tensor), sorted
  std::int64_t steps_ = 0;
  DType weight_type_ = DType::kFloat32;
};

}  // namespace planner::exec
