#include "planner/exec/model_state.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "planner/kernels/cpu/convert.hpp"
#include "planner/kernels/cpu/rng.hpp"

namespace planner::exec {
namespace {

namespace cpu = kernels::cpu;

// ZeRO-3 gather/reduce slots (program.hpp, OpRole::kDpParamGather).
constexpr int kSlotLayer = 0;
constexpr int kSlotEmbedding = 2;
constexpr int kSlotHead = 3;
constexpr std::int64_t kFloatBytes = sizeof(float);

std::uint32_t key(int layer, OpRole role) {
  return (static_cast<std::uint32_t>(layer + 1) << 8) | static_cast<std::uint32_t>(role);
}

std::string layer_name(int layer, const char* what) {
  return "layers." + std::to_string(layer) + "." + what;
}

// Appends `rows` x `cols` values of the logical matrix `name` (full_cols columns) starting at
// (row0, col0), drawn as kernels::cpu::fill_normal_block draws them.
void normal_block(std::vector<float>& out, const std::string& name, std::uint64_t seed,
                  std::int64_t full_cols, std::int64_t row0, std::int64_t col0, std::int64_t rows,
                  std::int64_t cols, float stddev) {
  const std::size_t at = out.size();
  out.resize(at + static_cast<std::size_t>(rows * cols));
  cpu::fill_normal_block(seed, cpu::tensor_stream_id(name), full_cols, row0, col0, rows, cols, 0.0f,
                         stddev, out.data() + at);
}

void constant(std::vector<float>& out, std::int64_t n, float value) {
  out.insert(out.end(), static_cast<std::size_t>(n), value);
}

// The initial values of one tensor held by tensor-parallel rank `r` and expert-parallel rank
// `ep_rank` (see model_state.hpp).
std::vector<float> initial_values(const ModelSpec& m, int tp, int r, int ep, int ep_rank,
                                  const ParamTensor& pt, std::uint64_t seed) {
  const std::int64_t h = m.hidden;
  const std::int64_t q_l = m.q_dim() / tp;
  const std::int64_t kv_l = m.kv_dim() / tp;
  const std::int64_t f_l = m.ffn_hidden / tp;
  const std::int64_t v_l = m.vocab / tp;
  const float out_std = kInitStd / std::sqrt(2.0f * static_cast<float>(m.num_layers));
  const bool layer_norm = m.norm == NormKind::kLayerNorm;
  std::vector<float> v;
  v.reserve(static_cast<std::size_t>(pt.elements));
  const int l = pt.layer;
  switch (pt.role) {
    case OpRole::kEmbedding:
      normal_block(v, "embedding.word", seed, h, r * v_l, 0, v_l, h, kInitStd);
      if (m.position_embedding == PositionEmbedding::kLearned) {
        normal_block(v, "embedding.position", seed, h, 0, 0, m.max_seq_len, h, kInitStd);
      }
      break;
    case OpRole::kAttnNorm:
    case OpRole::kMlpNorm:
    case OpRole::kFinalNorm:
      constant(v, h, 1.0f);
      if (layer_norm) constant(v, h, 0.0f);
      break;
    case OpRole::kAttnQkv:
      normal_block(v, layer_name(l, "attn.q.weight"), seed, h, r * q_l, 0, q_l, h, kInitStd);
      normal_block(v, layer_name(l, "attn.k.weight"), seed, h, r * kv_l, 0, kv_l, h, kInitStd);
      normal_block(v, layer_name(l, "attn.v.weight"), seed, h, r * kv_l, 0, kv_l, h, kInitStd);
      if (m.bias) constant(v, q_l + 2 * kv_l, 0.0f);
      break;
    case OpRole::kAttnOut:
      normal_block(v, layer_name(l, "attn.out.weight"), seed, m.q_dim(), 0, r * q_l, h, q_l,
                   out_std);
      if (m.bias) constant(v, h, 0.0f);
      break;
    case OpRole::kMlpGate:
    case OpRole::kMlpUp:
      normal_block(v,
                   layer_name(l, pt.role == OpRole::kMlpGate ? "mlp.gate.weight" : "mlp.up.weight"),
                   seed, h, r * f_l, 0, f_l, h, kInitStd);
      if (m.bias) constant(v, f_l, 0.0f);
      break;
    case OpRole::kMlpDown:
      normal_block(v, layer_name(l, "mlp.down.weight"), seed, m.ffn_hidden, 0, r * f_l, h, f_l,
                   out_std);
      if (m.bias) constant(v, h, 0.0f);
      break;
    case OpRole::kRouter:
      normal_block(v, layer_name(l, "moe.router.weight"), seed, h, 0, 0, m.moe->num_experts, h,
                   kInitStd);
      break;
    case OpRole::kExpertGate:
    case OpRole::kExpertUp:
    case OpRole::kExpertDown: {
      // Every local expert's weights (expert tensor parallelism 1: whole experts), then biases.
      const std::int64_t fe = m.moe->expert_ffn_hidden;
      const std::int64_t local = m.moe->num_experts / ep;
      for (std::int64_t i = 0; i < local; ++i) {
        const std::string name = "moe.expert." + std::to_string(ep_rank * local + i) +
                                 (pt.role == OpRole::kExpertGate ? ".gate.weight"
                                  : pt.role == OpRole::kExpertUp ? ".up.weight"
                                                                 : ".down.weight");
        if (pt.role == OpRole::kExpertDown) {
          normal_block(v, layer_name(l, name.c_str()), seed, fe, 0, 0, h, fe, out_std);
        } else {
          normal_block(v, layer_name(l, name.c_str()), seed, h, 0, 0, fe, h, kInitStd);
        }
      }
      if (m.bias) constant(v, local * (pt.role == OpRole::kExpertDown ? h : fe), 0.0f);
      break;
    }
    case OpRole::kSharedGate:
    case OpRole::kSharedUp: {
      const std::int64_t fs = m.moe->shared_ffn() / tp;
      normal_block(v,
                   layer_name(l, pt.role == OpRole::kSharedGate ? "moe.shared.gate.weight"
                                                                : "moe.shared.up.weight"),
                   seed, h, r * fs, 0, fs, h, kInitStd);
      if (m.bias) constant(v, fs, 0.0f);
      break;
    }
    case OpRole::kSharedDown: {
      const std::int64_t fs = m.moe->shared_ffn() / tp;
      normal_block(v, layer_name(l, "moe.shared.down.weight"), seed, m.moe->shared_ffn(), 0, r * fs,
                   h, fs, out_std);
      if (m.bias) constant(v, h, 0.0f);
      break;
    }
    case OpRole::kLmHead:
      // A tied model's LM head (a copy on the last of several stages) starts as the embedding.
      normal_block(v, m.tied_embeddings ? "embedding.word" : "lm_head.weight", seed, h, r * v_l, 0,
                   v_l, h, kInitStd);
      break;
    default:
      break;
  }
  return v;
}

}  // namespace

Result<std::unique_ptr<ModelState>> ModelState::create(Device& device, const Config& c) {
  auto state = std::unique_ptr<ModelState>(new ModelState());
  PLANNER_ASSIGN_OR_RETURN(ModelPartition part, ModelPartition::create(c.model, c.parallel));
  state->params_ = part.stage_params(c.stage, std::max<std::int64_t>(1, c.bucket_elements));
  const std::vector<ParamTensor>& tensors = state->params_.tensors;
  state->zero3_ = c.parallel.zero_stage == 3;
  state->weight_type_ = c.weight_type;
  const bool mixed = state->mixed();
  state->places_.assign(tensors.size(), {});
  std::vector<ParamGroup>& groups = state->groups_;
  if (!state->zero3_) {
    for (const GradBucket& b : state->params_.buckets) {
      groups.emplace_back();
      groups.back().tensors = b.tensors;
      groups.back().expert = b.expert;
    }
  } else {
    state->layer_group_.assign(static_cast<std::size_t>(c.model.num_layers), -1);
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const ParamTensor& pt = tensors[t];
      int* slot = &state->head_group_;
      if (pt.layer != OpId::kNone) {
        slot = &state->layer_group_[static_cast<std::size_t>(pt.layer)];
      } else if (pt.role == OpRole::kEmbedding) {
        slot = &state->embedding_group_;
      }
      if (*slot < 0) {
        *slot = static_cast<int>(groups.size());
        groups.emplace_back();
      }
      groups[static_cast<std::size_t>(*slot)].tensors.push_back(static_cast<int>(t));
    }
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    ParamGroup& grp = groups[g];
    // Dense weights reduce over data parallelism, expert weights over expert data parallelism.
    Communicator* group_comm = grp.expert ? c.edp : c.dp;
    const bool have_dp = group_comm != nullptr && group_comm->size() > 1;
    const std::int64_t members = have_dp ? group_comm->size() : 1;
    const std::int64_t index = have_dp ? group_comm->rank() : 0;
    for (int t : grp.tensors) {
      state->places_[static_cast<std::size_t>(t)] = {static_cast<int>(g), grp.elements};
      grp.elements += tensors[static_cast<std::size_t>(t)].elements;
    }
    grp.comm = have_dp ? group_comm : nullptr;
    grp.sharded = have_dp && c.parallel.zero_stage >= 1;
    if (grp.sharded) {
      const std::int64_t shard = (grp.elements + members - 1) / members;
      grp.padded = shard * members;
      grp.shard_begin = std::min(grp.elements, index * shard);
      grp.shard_end = std::min(grp.elements, (index + 1) * shard);
    } else {
      grp.padded = grp.elements;
      grp.shard_begin = 0;
      grp.shard_end = grp.elements;
    }
    if (mixed) {
      PLANNER_ASSIGN_OR_RETURN(
          grp.param,
          DeviceBuffer::floats(device, std::max<std::int64_t>(1, grp.shard()), "master weights"));
      PLANNER_ASSIGN_OR_RETURN(
          grp.model,
          DeviceBuffer::allocate(device, grp.padded * dtype_bytes(c.weight_type), "parameters"));
      device.zero(grp.model.data(), grp.model.bytes());
    } else {
      PLANNER_ASSIGN_OR_RETURN(grp.param, DeviceBuffer::floats(device, grp.padded, "parameters"));
    }
    PLANNER_ASSIGN_OR_RETURN(grp.grad, DeviceBuffer::floats(device, grp.padded, "gradients"));
    PLANNER_ASSIGN_OR_RETURN(
        grp.exp_avg,
        DeviceBuffer::floats(device, std::max<std::int64_t>(1, grp.shard()), "optimizer state"));
    device.zero(grp.param.data(), grp.param.bytes());
    device.zero(grp.grad.data(), grp.grad.bytes());
    device.zero(grp.exp_avg.data(), grp.exp_avg.bytes());
    if (c.adam) {
      PLANNER_ASSIGN_OR_RETURN(
          grp.exp_avg_sq,
          DeviceBuffer::floats(device, std::max<std::int64_t>(1, grp.shard()), "optimizer state"));
      device.zero(grp.exp_avg_sq.data(), grp.exp_avg_sq.bytes());
    }
  }
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const ParamTensor& pt = tensors[t];
    const std::vector<float> values =
        initial_values(c.model, c.parallel.tp, c.tp_rank, c.parallel.ep, c.ep_rank, pt, c.seed);
    if (static_cast<std::int64_t>(values.size()) != pt.elements) {
      return Status::internal("parameter " + std::string(to_string(pt.role)) + " of layer " +
                              std::to_string(pt.layer) + ": initialised " +
                              std::to_string(values.size()) + " values for " +
                              std::to_string(pt.elements) + " elements");
    }
    PLANNER_RETURN_IF_ERROR(state->upload(device, static_cast<int>(t), values));
    state->index_.emplace_back(key(pt.layer, pt.role), static_cast<int>(t));
    if (pt.role == OpRole::kEmbedding && c.model.tied_embeddings && part.ends_on_one_stage()) {
      state->tied_single_stage_ = static_cast<int>(t);
    }
  }
  std::sort(state->index_.begin(), state->index_.end());
  return state;
}

int ModelState::find(int layer, OpRole role) const {
  const std::uint32_t k = key(layer, role);
  const auto it = std::lower_bound(index_.begin(), index_.end(), std::make_pair(k, -1));
  if (it != index_.end() && it->first == k) return it->second;
  if (role == OpRole::kLmHead && layer == OpId::kNone) return tied_single_stage_;
  return -1;
}

Status ModelState::upload(Device& device, int tensor, const std::vector<float>& values) {
  const TensorPlace& p = place(tensor);
  const ParamGroup& grp = groups_[static_cast<std::size_t>(p.group)];
  const auto n = static_cast<std::int64_t>(values.size());
  if (!mixed()) {
    return device.copy_from_host(param(tensor), values.data(), n * kFloatBytes);
  }
  // The 16-bit weights, rounded on the host as the device rounds (kernels/cpu/convert.hpp)...
  std::vector<std::uint16_t> bits(values.size());
  if (weight_type_ == DType::kBFloat16) {
    cpu::float_to_bf16(values.data(), n, bits.data());
  } else {
    cpu::float_to_fp16(values.data(), n, bits.data());
  }
  PLANNER_RETURN_IF_ERROR(device.copy_from_host(weight(tensor), bits.data(), n * 2));
  // ... and the fp32 masters of the part inside this rank's shard.
  const std::int64_t lo = std::max(p.offset, grp.shard_begin);
  const std::int64_t hi = std::min(p.offset + n, grp.shard_end);
  if (hi <= lo) return Status::ok();
  return device.copy_from_host(grp.param.f32() + (lo - grp.shard_begin),
                               values.data() + (lo - p.offset), (hi - lo) * kFloatBytes);
}

void* ModelState::weight(int tensor) const {
  const TensorPlace& p = place(tensor);
  const ParamGroup& grp = groups_[static_cast<std::size_t>(p.group)];
  if (!mixed()) return grp.param.f32() + p.offset;
  return static_cast<std::byte*>(grp.model.data()) + p.offset * dtype_bytes(weight_type_);
}

float* ModelState::param(int tensor) const {
  if (mixed()) return nullptr;
  const TensorPlace& p = place(tensor);
  return groups_[static_cast<std::size_t>(p.group)].param.f32() + p.offset;
}

float* ModelState::master(const ParamGroup& group) const {
  return mixed() ? group.param.f32() : group.param.f32() + group.shard_begin;
}

float* ModelState::grad(int tensor) const {
  const TensorPlace& p = place(tensor);
  return groups_[static_cast<std::size_t>(p.group)].grad.f32() + p.offset;
}

int ModelState::group_for(int layer, int slot) const {
  if (!zero3_) {
    if (layer != OpId::kNone || slot < 0 || slot >= static_cast<int>(groups_.size())) return -1;
    return slot;
  }
  if (slot == kSlotLayer && layer >= 0 && layer < static_cast<int>(layer_group_.size())) {
    return layer_group_[static_cast<std::size_t>(layer)];
  }
  if (layer == OpId::kNone && slot == kSlotEmbedding) return embedding_group_;
  if (layer == OpId::kNone && slot == kSlotHead) return head_group_;
  return -1;
}

}  // namespace planner::exec
