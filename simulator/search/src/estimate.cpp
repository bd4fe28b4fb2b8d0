#include "planner/search/estimate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

#include "planner/core/flops.hpp"
#include "planner/core/lowering.hpp"
#include "planner/core/model_partition.hpp"
#include "planner/core/rank_grid.hpp"
#include "planner/core/schedule.hpp"
#include "planner/sim/compute_model.hpp"
#include "planner/sim/simulate.hpp"

namespace planner::search {
namespace {

// The groups a plan's communication runs on.
enum class GroupKind : std::uint8_t { kTp, kCp, kEp, kPp, kDp, kEdp, kEmbedding, kNorm };
constexpr std::size_t kGroupKinds = 8;
// all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, send/recv
constexpr std::size_t kKinds = 6;

std::size_t kind_slot(OpKind k) {
  switch (k) {
    case OpKind::kAllReduce:
      return 0;
    case OpKind::kAllGather:
      return 1;
    case OpKind::kReduceScatter:
      return 2;
    case OpKind::kAllToAll:
      return 3;
    case OpKind::kBroadcast:
      return 4;
    default:
      return 5;
  }
}

double secs(Time t) {
  return to_seconds(t);
}

Time from_secs(double s) {
  return Time(std::llround(s * 1e12));
}

// Phases of a micro-batch's work on a stage.
enum class Part : std::uint8_t { kForward, kBackward, kWeight, kRecompute };

Part part_of(Phase ph) {
  switch (ph) {
    case Phase::kForward:
      return Part::kForward;
    case Phase::kBackwardWeight:
      return Part::kWeight;
    case Phase::kRecompute:
      return Part::kRecompute;
    default:
      return Part::kBackward;
  }
}

// One op of a probe block: a compute op with its time, or a communication op to be timed on the
// plan's groups. Dependencies are indices of earlier ops of the block.
struct MiniOp {
  Stream stream = Stream::kCompute;
  Part part = Part::kForward;
  bool compute = true;
  Time compute_time;
  Time host;  // the issuing thread's cost (host_model.hpp)
  GroupKind group = GroupKind::kTp;
  OpKind kind = OpKind::kGemm;
  Bytes bytes;
  std::uint32_t tag = 0;
  std::vector<int> deps;
};

// The ops of one layer (or one model end) of a micro-batch, in program order.
struct Block {
  std::vector<MiniOp> ops;
  bool present = false;
};

// Which parts a schedule of a block covers.
enum class Span : std::uint8_t { kForward, kBackwardAll, kBackwardInput, kWeight };
constexpr std::size_t kSpans = 4;

bool in_span(Part p, Span s) {
  switch (s) {
    case Span::kForward:
      return p == Part::kForward;
    case Span::kBackwardAll:
      return p != Part::kForward;
    case Span::kBackwardInput:
      return p == Part::kBackward || p == Part::kRecompute;
    case Span::kWeight:
      return p == Part::kWeight;
  }
  return false;
}

// A block's time on one rank under the program runner's semantics: streams run their ops in
// program order, an op starts when its stream is free and its dependencies have ended.
struct SpanCost {
  double time = 0;     // makespan of the span, compute slowed while communication overlaps it
  double compute = 0;  // compute alone
  std::array<double, sim::kNumTimeBuckets> buckets{};  // compute, exposed comm per axis, idle
};

}  // namespace

std::size_t Estimator::KeyHash::operator()(const Key& k) const noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::int64_t x : k.v) {
    h ^= static_cast<std::uint64_t>(x) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return static_cast<std::size_t>(h);
}

namespace {

Estimator::Key probe_key(const ParallelConfig& p) {
  return {{p.tp, p.cp, p.ep, p.expert_tp(), p.sequence_parallel ? 1 : 0,
           static_cast<int>(p.recompute), p.recompute_modules, p.micro_batch_size,
           std::llround(p.moe_capacity_factor * 1e6), p.moe_pad_to_capacity ? 1 : 0,
           std::llround(p.moe_imbalance * 1e6)}};
}

Estimator::Key partition_key(const ParallelConfig& p) {
  // The layout's layers, hashed FNV-1a style per entry (0: none); the key holds pp and the
  // virtual stages beside it.
  std::uint64_t hash = 14695981039346656037ULL;
  for (int n : p.layout)
    hash = (hash ^ static_cast<std::uint64_t>(n)) * 1099511628211ULL;
  const auto layout = p.layout.empty() ? std::int64_t{0} : static_cast<std::int64_t>(hash);
  return {{p.tp, p.ep, p.expert_tp(), p.pp, p.virtual_stages, default_bucket_elements(p.dp),
           p.first_stage_layers, p.last_stage_layers, layout}};
}

std::string groups_key(const ParallelConfig& p) {
  return std::to_string(p.tp) + "," + std::to_string(p.cp) + "," + std::to_string(p.ep) + "," +
         std::to_string(p.expert_tp()) + "," + std::to_string(p.dp) + "," + std::to_string(p.pp) +
         "," + std::to_string(p.zero_stage >= 1) + "," + p.order + "," +
         std::string(to_string(p.moe_a2a));
}

}  // namespace

struct Estimator::Probe {
  std::array<Block, 2> layer;  // one dense and one MoE layer
  Block embedding;             // stage 0 ends: token broadcast, embedding and its reduction
  Block head;                  // last stage ends: final norm, LM head, loss
  // The multi-token-prediction modules after the head (DeepSeek-V3 §2.2): each one's embedding,
  // norms, projection, transformer layer, LM head and loss, on the LM head's stage.
  Block mtp;
  Bytes pp_message;  // one pipeline activation (or gradient) message
  double optimizer_bytes_per_param = 0;
  Time kernel_overhead;
};

struct Estimator::Groups {
  // Lines per group kind and collective kind; nullptr when the plan has no such group.
  std::array<std::array<const std::vector<sim::CostLine>*, kKinds>, kGroupKinds> lines{};
  std::array<std::vector<int>, kGroupKinds> gpus;
  std::array<std::vector<std::vector<int>>, kGroupKinds> images;
  const std::vector<sim::CostLine>* get(GroupKind g, OpKind k) const {
    return lines[static_cast<std::size_t>(g)][kind_slot(k)];
  }
};

struct Estimator::Partition {
  struct Stage {
    RankParams params;
    int dense_layers = 0;
    int moe_layers = 0;
    std::int64_t dense_layer_elements = 0;   // one dense layer's parameters (ZeRO-3 gathers)
    std::int64_t expert_layer_elements = 0;  // one MoE layer's expert parameters
    std::int64_t dense_layer_tensors = 0;    // the parameter tensors of those (ZeRO-3 host cost)
    std::int64_t expert_layer_tensors = 0;
    std::vector<std::int64_t> dense_buckets;
    std::vector<std::int64_t> expert_buckets;
    int bucket_class = 0;  // stages with equal bucket lists share a class
  };
  std::vector<Stage> stages;
  std::int64_t embedding_rows = 0;  // vocab / tp × hidden (tied-embedding gradient all-reduce)
};

namespace {

double line_s(const std::vector<sim::CostLine>* lines, double bytes) {
  if (lines == nullptr || lines->empty() || bytes <= 0) return 0;
  return secs(sim::CostLine::time(*lines, Bytes(std::llround(bytes))));
}

}  // namespace

Estimator::Estimator(EstimatorInput input)
    : input_(std::move(input)), model_flops_(model_flops_per_step(input_.model, input_.training)) {
  for (const Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    hardware_flops_[static_cast<std::size_t>(r)] =
        hardware_flops_per_step(input_.model, input_.training, r);
  }
}

Result<std::shared_ptr<Estimator>> Estimator::create(EstimatorInput input) {
  if (!input.cluster || !input.profile) {
    return Status::invalid_input("estimator: a cluster and a hardware profile are required");
  }
  PLANNER_RETURN_IF_ERROR(
      sim::ComputeModel(*input.profile).check_precision(input.training.precision));
  if (!input.fabric) {
    input.fabric =
        std::make_shared<const sim::Fabric>(sim::Fabric::build(*input.cluster, *input.profile));
  }
  return std::shared_ptr<Estimator>(new Estimator(std::move(input)));
}

Estimator::Session Estimator::session() const {
  return Session(*this);
}

Estimator::Session::Session(const Estimator& e)
    : e_(&e), memory_(e.input_.model, e.input_.training, e.input_.gpu, [&] {
        MemoryOptions o = sim::memory_with(e.input_.memory, e.input_.attention);
        o.fp32_grads = e.input_.fp32_grads;
        return o;
      }()) {}

Result<MemoryPeak> Estimator::Session::memory(const ParallelConfig& p) {
  return memory_.peak(p);
}

// ---- probe: the plan's layer and ends, lowered small and timed by the compute model

Result<const Estimator::Probe*> Estimator::probe(const ParallelConfig& p) const {
  const Key key = probe_key(p);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = probes_.find(key);
    if (it != probes_.end()) return it->second.get();
  }
  const ModelSpec& m = input_.model;
  const int period = m.is_moe() ? std::max(1, m.moe->layer_freq) : 1;
  ModelSpec small = m;
  small.num_layers = 2 * period;
  // Local attention in all layers but every full_attention_every-th (GPT-OSS: every other): the
  // probe spans the pattern, and each kind's layer takes its kind's mean op times over it.
  if (m.sliding_window > 0 && m.full_attention_every > 1) {
    small.num_layers = std::lcm(small.num_layers, m.full_attention_every);
  }
  // A hybrid model's probe has one layer of each character of its pattern, twice (Nemotron-H:
  // "ME*ME*"): its non-MoE layers are Mamba mixers and attention, and the block of that kind
  // chains one of each (see `share` below).
  if (m.is_hybrid()) {
    std::string kinds;
    for (int l = 0; l < m.num_layers && static_cast<std::size_t>(l) < m.layer_pattern.size(); ++l) {
      const char c = m.layer_pattern[static_cast<std::size_t>(l)];
      if (kinds.find(c) == std::string::npos) kinds += c;
    }
    small.layer_pattern = kinds + kinds;
    small.num_layers = static_cast<int>(small.layer_pattern.size());
  }
  // The probe needs one layer of each kind: with DeepSeek's first k layers dense, only its first
  // layer stays dense (layers 0 and 1 of a 2-layer probe would otherwise both be dense, and the
  // MoE layers would cost nothing).
  if (small.moe) small.moe->first_dense_layers = std::min(small.moe->first_dense_layers, 1);
  ParallelConfig q;
  q.tp = p.tp;
  q.cp = p.cp;
  q.ep = p.ep;
  q.etp = p.etp;
  q.moe_capacity_factor = p.moe_capacity_factor;
  q.moe_pad_to_capacity = p.moe_pad_to_capacity;
  q.moe_imbalance = p.moe_imbalance;
  // Expert parallelism is carved out of tp x cp x dp as etp x ep x expert dp: the fewest
  // data-parallel ranks that hold one expert group.
  q.dp = p.ep * p.expert_tp() / std::gcd(p.tp * p.cp, p.expert_tp());
  q.pp = 2;
  q.sequence_parallel = p.sequence_parallel;
  q.micro_batch_size = p.micro_batch_size;
  q.recompute = p.recompute;
  q.recompute_modules = p.recompute_modules;
  q.schedule = Schedule::k1F1B;
  TrainingSpec t = input_.training;
  t.global_batch_size = q.micro_batch_size * q.dp;
  LowerOptions lo;
  lo.fp32_grads = input_.fp32_grads;
  lo.ranks = representative_ranks(q, RankSubset::kOnePerStage);
  PLANNER_ASSIGN_OR_RETURN(StepProgram prog, lower(small, t, q, lo));

  const sim::ComputeModel cm(*input_.profile, input_.attention);
  auto probe = std::make_unique<Probe>();
  probe->kernel_overhead = input_.profile->compute.kernel_overhead;
  // A kind's layers by their mixer (attention, Mamba-2, none): one mixer except in hybrid models.
  // Each kind's block chains one layer of each of its mixers; a mixer's ops count for its share of
  // the kind's layers in the whole model (Nemotron 3 Nano's non-MoE layers: 23 Mamba, 6
  // attention).
  auto mixer_of = [](const ModelSpec& spec, int layer) {
    return static_cast<std::size_t>(spec.layer_kind(layer).mixer);
  };
  constexpr std::size_t kMixers = static_cast<std::size_t>(Mixer::kNone) + 1;  // the last
  std::array<std::array<double, kMixers>, 2> share{};  // layers of the model, then shares
  for (int l = 0; l < m.num_layers; ++l)
    share[m.is_moe_layer(l) ? 1 : 0][mixer_of(m, l)] += 1;
  // The layer each (kind, mixer) is built from: of the probe's layers of the kind and mixer, the
  // one with the most ops (GPT-OSS with context parallelism: a full-attention layer runs the K/V
  // ring its local-attention layers do not), and how many layers of them the probe has.
  std::array<std::array<int, kMixers>, 2> chosen;
  for (auto& c : chosen)
    c.fill(OpId::kNone);
  std::array<std::array<std::int64_t, kMixers>, 2> layers_of{};
  {
    std::vector<int> ops_of(static_cast<std::size_t>(small.num_layers), 0);
    for (const RankProgram& rp : prog.ranks()) {
      for (std::size_t i = 0; i < rp.size(); ++i) {
        const int layer = rp.op(i).id.layer();
        if (layer != OpId::kNone && layer < small.num_layers)
          ++ops_of[static_cast<std::size_t>(layer)];
      }
    }
    for (int layer = 0; layer < small.num_layers; ++layer) {
      const auto kind = static_cast<std::size_t>(small.is_moe_layer(layer) ? 1 : 0);
      const std::size_t x = mixer_of(small, layer);
      ++layers_of[kind][x];
      int& c = chosen[kind][x];
      if (c == OpId::kNone ||
          ops_of[static_cast<std::size_t>(layer)] > ops_of[static_cast<std::size_t>(c)]) {
        c = layer;
      }
    }
    // The shares of the mixers the probe has, summing to 1 (equal where the model itself has none
    // of the kind: its stages run no such block).
    for (std::size_t kind = 0; kind < 2; ++kind) {
      double sum = 0;
      int present = 0;
      for (std::size_t x = 0; x < kMixers; ++x) {
        if (chosen[kind][x] == OpId::kNone) continue;
        sum += share[kind][x];
        ++present;
      }
      for (std::size_t x = 0; x < kMixers; ++x) {
        if (chosen[kind][x] == OpId::kNone) {
          share[kind][x] = 0;
        } else {
          share[kind][x] = sum > 0 ? share[kind][x] / sum : 1.0 / present;
        }
      }
    }
  }
  // An op's place in its layer: the layer's kind, its phase and role, and which of the layer's ops
  // of that phase and role it is. Over the layers of a kind: the compute times summed by place,
  // and how many layers have each communication op. The block takes the mean per layer of the
  // kind (an op only some layers run counts for their share: its time, or its bytes).
  using Place = std::tuple<int, std::size_t, Phase, OpRole, int>;   // kind, mixer, ...
  std::map<Place, std::pair<std::int64_t, std::int64_t>> kind_ops;  // picoseconds, layers
  std::array<std::vector<std::pair<std::size_t, Place>>, 2> block_places;
  // Per block and part, the layer and index of its last op: a mixer's layer chained after another
  // mixer's waits for it (their real dependency is through the MoE layer between them).
  std::map<std::pair<int, Part>, std::pair<int, int>> last_of;
  for (const RankProgram& rp : prog.ranks()) {
    std::map<std::tuple<int, Phase, OpRole>, int> seen;  // (layer, phase, role) -> ops so far
    std::vector<int> block_index(rp.size(), -1);         // op -> index in its block
    std::vector<signed char> block_of(rp.size(), -1);    // op -> its block (0-4)
    for (std::size_t i = 0; i < rp.size(); ++i) {
      const Op& op = rp.op(i);
      const OpDesc& d = prog.desc(op);
      const Phase ph = op.id.phase();
      const OpRole role = op.id.role();
      if (role == OpRole::kPpSendActivation) probe->pp_message = d.comm_bytes;
      if (ph == Phase::kOptimizer) {
        if (role == OpRole::kOptimizerStep && d.n > 0) {
          probe->optimizer_bytes_per_param =
              static_cast<double>((d.bytes_read + d.bytes_written).raw()) /
              static_cast<double>(d.n);
        }
        continue;
      }
      if (role == OpRole::kDpGradReduce || role == OpRole::kDpParamGather ||
          role == OpRole::kPpSendActivation || role == OpRole::kPpRecvActivation ||
          role == OpRole::kPpSendGrad || role == OpRole::kPpRecvGrad ||
          role == OpRole::kOffloadGrad || role == OpRole::kOffloadParam ||
          role == OpRole::kMoeTokenCounts) {
        continue;
      }
      const int layer = op.id.layer();
      const bool backward = ph == Phase::kBackwardInput || ph == Phase::kBackwardWeight;
      Block* blk = nullptr;
      signed char id = 0;
      if (layer != OpId::kNone && layer >= small.num_layers) {
        blk = &probe->mtp;  // every MTP module (layers num_layers and up)
        id = 4;
      } else if (layer != OpId::kNone) {
        const int kind = small.is_moe_layer(layer) ? 1 : 0;
        const std::size_t x = mixer_of(small, layer);
        const Place place{kind, x, ph, role, seen[{layer, ph, role}]++};
        auto& [sum, n] = kind_ops[place];
        if (is_compute(d.kind)) sum += cm.op_time(d, backward).raw();
        ++n;
        if (layer != chosen[static_cast<std::size_t>(kind)][x]) continue;
        blk = &probe->layer[static_cast<std::size_t>(kind)];
        id = static_cast<signed char>(kind);
        block_places[static_cast<std::size_t>(kind)].emplace_back(blk->ops.size(), place);
      } else {
        blk = rp.stage() == 0 ? &probe->embedding : &probe->head;
        id = rp.stage() == 0 ? 2 : 3;
      }
      MiniOp mo;
      mo.stream = d.stream;
      mo.part = part_of(ph);
      mo.compute = is_compute(d.kind);
      mo.host = host_cost(input_.host, d, ph, 1, cm.extra_host_kernels(d, backward));
      if (mo.compute) {
        mo.compute_time = cm.op_time(d, backward);
      } else {
        mo.kind = d.kind;
        mo.bytes = d.comm_bytes;
        mo.tag = op.tag;
        if (is_p2p(d.kind)) {
          mo.group = GroupKind::kCp;
        } else {
          mo.group = prog.group(op.group).axes == "ep" ? GroupKind::kEp : GroupKind::kTp;
        }
      }
      for (std::uint32_t dep : rp.deps(i)) {
        // A dependency in another block was met before this block started.
        if (block_of[dep] == id) mo.deps.push_back(block_index[dep]);
      }
      if (id < 2) {
        auto [it, first] = last_of.try_emplace({id, mo.part}, layer, 0);
        if (!first && it->second.first != layer && mo.deps.empty()) {
          mo.deps.push_back(it->second.second);
        }
        it->second = {layer, static_cast<int>(blk->ops.size())};
      }
      block_of[i] = id;
      block_index[i] = static_cast<int>(blk->ops.size());
      blk->ops.push_back(std::move(mo));
    }
  }
  // Each kind's block runs the mean layer of its kind (one layer's ops where every layer of the
  // kind runs the same), each mixer's ops for its share.
  for (std::size_t kind = 0; kind < 2; ++kind) {
    probe->layer[kind].present = false;
    for (std::size_t x = 0; x < kMixers; ++x)
      probe->layer[kind].present |= chosen[kind][x] != OpId::kNone;
    for (const auto& [index, place] : block_places[kind]) {
      MiniOp& mo = probe->layer[kind].ops[index];
      const std::size_t x = std::get<1>(place);
      const double layers = static_cast<double>(layers_of[kind][x]);
      const double w = share[kind][x];
      const auto& [sum, n] = kind_ops.at(place);
      mo.host = Time(std::llround(static_cast<double>(mo.host.raw()) * w));
      if (mo.compute) {
        mo.compute_time = Time(std::llround(static_cast<double>(sum) / layers * w));
      } else if (n != layers_of[kind][x] || w != 1.0) {
        mo.bytes = Bytes(std::llround(static_cast<double>(mo.bytes.raw()) * n / layers * w));
      }
    }
  }
  probe->embedding.present = !probe->embedding.ops.empty();
  probe->head.present = !probe->head.ops.empty();
  probe->mtp.present = !probe->mtp.ops.empty();
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = probes_.emplace(key, std::move(probe));
  return it->second.get();
}

// ---- groups: the plan's communication groups on its GPUs, with their images

namespace {

// The content of a group and its images as a cache key.
std::string content_key(OpKind kind, const std::vector<int>& gpus,
                        const std::vector<std::vector<int>>& images) {
  std::string key;
  std::size_t n = gpus.size();
  for (const auto& img : images)
    n += img.size() + 1;
  key.reserve(4 * (n + 1));
  auto put = [&](int v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(static_cast<int>(kind_slot(kind)));
  for (int g : gpus)
    put(g);
  for (const auto& img : images) {
    put(-1);
    for (int g : img)
      put(g);
  }
  return key;
}

}  // namespace

const std::vector<sim::CostLine>* Estimator::lines(const std::string& key,
                                                   const std::vector<int>& gpus,
                                                   const std::vector<std::vector<int>>& images,
                                                   OpKind kind, sim::CollectivePlanner& planner,
                                                   const sim::TokenRouting* routing) const {
  if (gpus.size() < 2) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lines_.find(key);
    if (it != lines_.end()) return it->second.get();
  }
  std::vector<sim::CostLine> out;
  if (is_p2p(kind)) {
    std::vector<std::pair<int, int>> pairs;
    for (const auto& img : images)
      pairs.emplace_back(img[0], img[1]);
    out = planner.p2p_cost_lines(gpus[0], gpus[1], pairs);
  } else {
    out = planner.cost_lines(kind, gpus, images, routing);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] =
      lines_.emplace(std::move(key), std::make_unique<std::vector<sim::CostLine>>(std::move(out)));
  return it->second.get();
}

Result<const Estimator::Groups*> Estimator::groups(const ParallelConfig& p,
                                                   sim::CollectivePlanner& planner) const {
  const std::string key = groups_key(p);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = groups_.find(key);
    if (it != groups_.end()) return it->second.get();
  }
  const topo::Cluster& cluster = *input_.cluster;
  PLANNER_ASSIGN_OR_RETURN(std::vector<int> gpu_of, sim::default_gpu_of_rank(p, cluster));
  PLANNER_ASSIGN_OR_RETURN(RankGrid dense, RankGrid::dense(p));
  PLANNER_ASSIGN_OR_RETURN(RankGrid expert, RankGrid::expert(p));
  auto g = std::make_unique<Groups>();
  // The ranks of pipeline stage `stage` in ascending order, without visiting the other stages':
  // runs of `stride` ranks (the pp axis' stride: the second member of rank 0's pp group) every
  // pp x stride, the first at stage x stride.
  auto stage_of = [](const RankGrid& grid, int stage) -> Result<std::vector<int>> {
    std::vector<int> out;
    const int pp = grid.size(Axis::kPp);
    int stride = grid.world_size();
    if (pp > 1) {
      PLANNER_ASSIGN_OR_RETURN(std::vector<int> pipe, grid.group_of(0, "pp"));
      stride = pipe[1];
    }
    out.reserve(static_cast<std::size_t>(grid.world_size() / pp));
    for (int base = stage * stride; base < grid.world_size(); base += stride * pp) {
      for (int r = base; r < base + stride; ++r)
        out.push_back(r);
    }
    return out;
  };
  PLANNER_ASSIGN_OR_RETURN(const std::vector<int> dense_stage0, stage_of(dense, 0));
  // The stage whose groups are costed: the one whose GPUs span the most islands. Every stage
  // spans as many where stages and islands align (stage 0 then); where they do not, the stages
  // that straddle islands run their collectives partly over the slower links and set the pace (a
  // 16-node stage on NVL72 racks of 18 nodes: the second stage's groups leave its rack).
  int costed = 0;
  if (p.pp > 1) {
    std::vector<char> seen(static_cast<std::size_t>(cluster.num_islands()));
    int most = 0;
    for (int stage = 0; stage < p.pp; ++stage) {
      PLANNER_ASSIGN_OR_RETURN(const std::vector<int> ranks, stage_of(dense, stage));
      std::fill(seen.begin(), seen.end(), 0);
      int islands = 0;
      for (int r : ranks) {
        char& c =
            seen[static_cast<std::size_t>(cluster.island_of(gpu_of[static_cast<std::size_t>(r)]))];
        islands += c == 0 ? 1 : 0;
        c = 1;
      }
      if (islands > most) {
        most = islands;
        costed = stage;
      }
    }
  }
  PLANNER_ASSIGN_OR_RETURN(const std::vector<int> dense_costed, stage_of(dense, costed));
  const int first_rank = dense_costed.front();  // its smallest rank (the same in the expert grid)
  auto gpus_of = [&](const std::vector<int>& ranks) {
    std::vector<int> out;
    out.reserve(ranks.size());
    for (int r : ranks)
      out.push_back(gpu_of[static_cast<std::size_t>(r)]);
    return out;
  };
  auto islands_of = [&](const std::vector<int>& ranks) {
    std::vector<int> islands;
    islands.reserve(ranks.size());
    for (int r : ranks)
      islands.push_back(cluster.island_of(gpu_of[static_cast<std::size_t>(r)]));
    std::sort(islands.begin(), islands.end());
    return static_cast<int>(std::unique(islands.begin(), islands.end()) - islands.begin());
  };
  // The groups along `axes` of the costed stage, as rank lists in the order grid.groups() lists
  // them (by smallest member), without listing every stage's: a group's smallest member has index
  // 0 on each axis it spans.
  auto stage_groups = [&](const RankGrid& grid,
                          std::string_view axes) -> Result<std::vector<std::vector<int>>> {
    PLANNER_ASSIGN_OR_RETURN(const std::vector<int> first, grid.group_of(first_rank, axes));
    std::array<bool, kNumAxes> spans{};
    for (int r : first) {
      for (int a = 0; a < kNumAxes; ++a) {
        const auto axis = static_cast<Axis>(a);
        spans[static_cast<std::size_t>(a)] |=
            grid.coordinate(r, axis) != grid.coordinate(first_rank, axis);
      }
    }
    PLANNER_ASSIGN_OR_RETURN(const std::vector<int> stage, stage_of(grid, costed));
    std::vector<std::vector<int>> out;
    for (int r : stage) {
      bool smallest = true;
      for (int a = 0; a < kNumAxes && smallest; ++a) {
        smallest =
            !spans[static_cast<std::size_t>(a)] || grid.coordinate(r, static_cast<Axis>(a)) == 0;
      }
      if (!smallest) continue;
      PLANNER_ASSIGN_OR_RETURN(std::vector<int> group, grid.group_of(r, axes));
      out.push_back(std::move(group));
    }
    return out;
  };
  // A group kind's costed group: of the costed stage's groups, the one spanning the most islands
  // (a step waits for its slowest group: a group straddling two NVL72 racks paces the groups
  // inside one), the first where they span as many. Its images: the stage's other groups, minus
  // those confined to an island holding none of its GPUs (they share no link with it).
  auto set = [&](GroupKind kind, const RankGrid& grid, std::string_view axes,
                 bool with_images) -> Status {
    const auto k = static_cast<std::size_t>(kind);
    if (!with_images) {
      PLANNER_ASSIGN_OR_RETURN(std::vector<int> ranks, grid.group_of(first_rank, axes));
      if (ranks.size() >= 2) g->gpus[k] = gpus_of(ranks);
      return Status::ok();
    }
    PLANNER_ASSIGN_OR_RETURN(const std::vector<std::vector<int>> groups, stage_groups(grid, axes));
    if (groups.empty() || groups.front().size() < 2) return Status::ok();
    std::size_t main = 0;
    int most = islands_of(groups.front());
    for (std::size_t i = 1; i < groups.size(); ++i) {
      const int islands = islands_of(groups[i]);
      if (islands > most) {
        most = islands;
        main = i;
      }
    }
    g->gpus[k] = gpus_of(groups[main]);
    std::vector<char> island_used(static_cast<std::size_t>(cluster.num_islands()), 0);
    for (int x : g->gpus[k])
      island_used[static_cast<std::size_t>(cluster.island_of(x))] = 1;
    for (std::size_t i = 0; i < groups.size(); ++i) {
      if (i == main) continue;
      std::vector<int> gg = gpus_of(groups[i]);
      const int first = cluster.island_of(gg.front());
      bool keep = false;
      for (int x : gg) {
        const int island = cluster.island_of(x);
        if (island != first || island_used[static_cast<std::size_t>(island)]) keep = true;
      }
      if (keep) g->images[k].push_back(std::move(gg));
    }
    return Status::ok();
  };
  PLANNER_RETURN_IF_ERROR(set(GroupKind::kTp, dense, "tp", true));
  PLANNER_RETURN_IF_ERROR(set(GroupKind::kDp, dense, p.cp > 1 ? "dp-cp" : "dp", true));
  if (input_.model.is_moe()) {
    PLANNER_RETURN_IF_ERROR(set(GroupKind::kEp, expert, "ep", true));
    PLANNER_RETURN_IF_ERROR(set(GroupKind::kEdp, expert, "dp", true));
  }
  // The gradient norm's all-reduce moves 4 bytes: latency only, no images needed.
  PLANNER_RETURN_IF_ERROR(
      set(GroupKind::kNorm, dense, p.zero_stage >= 1 ? "tp-cp-dp-pp" : "tp-cp-pp", false));
  // Point-to-point pairs: the rank at `from` on the axis and its neighbour at `target`, images
  // over the other ranks of `stage` at `from`: the cp ring's over the costed stage, the pipeline's
  // from stage 0 to stage 1; the tied-embedding pair joins the first and last stage.
  auto pair_with = [&](int r, Axis axis, int target) {
    AxisSizes c;
    for (int a = 0; a < kNumAxes; ++a)
      c[static_cast<Axis>(a)] = dense.coordinate(r, static_cast<Axis>(a));
    c[axis] = target;
    return std::vector<int>{gpu_of[static_cast<std::size_t>(r)],
                            gpu_of[static_cast<std::size_t>(dense.rank_at(c))]};
  };
  // `main` is the rank whose pair is costed (the first at `from` when -1).
  auto pair_images = [&](GroupKind kind, const std::vector<int>& stage, Axis axis, int from,
                         int target, int main) {
    const auto k = static_cast<std::size_t>(kind);
    if (main < 0) {
      for (int r : stage) {
        if (dense.coordinate(r, axis) == from) {
          main = r;
          break;
        }
      }
    }
    g->gpus[k] = pair_with(main, axis, target);
    for (int r : stage) {
      if (r == main || dense.coordinate(r, axis) != from) continue;
      const std::vector<int> pair = pair_with(r, axis, target);
      if (cluster.island_of(pair[0]) != cluster.island_of(pair[1]) ||
          cluster.island_of(pair[0]) == cluster.island_of(g->gpus[k][0])) {
        g->images[k].push_back(pair);
      }
    }
  };
  if (p.cp > 1) {
    // Every step of a ring waits for its slowest hop, and every ring for the slowest ring: the
    // first hop that leaves its island (tp x cp beyond a node puts some of the ring's hops on the
    // network) of the first ring of the costed stage that has one, else the first ring's first.
    PLANNER_ASSIGN_OR_RETURN(const std::vector<std::vector<int>> rings, stage_groups(dense, "cp"));
    int hop = 0, main = rings.front().front();
    bool found = false;
    for (std::size_t i = 0; i < rings.size() && !found; ++i) {
      const std::vector<int>& ring = rings[i];
      for (int c = 0; c < p.cp && !found; ++c) {
        const int at = gpu_of[static_cast<std::size_t>(ring[static_cast<std::size_t>(c)])];
        const int next =
            gpu_of[static_cast<std::size_t>(ring[static_cast<std::size_t>((c + 1) % p.cp)])];
        if (cluster.island_of(at) != cluster.island_of(next)) {
          hop = c;
          main = ring[static_cast<std::size_t>(c)];
          found = true;
        }
      }
    }
    pair_images(GroupKind::kCp, dense_costed, Axis::kCp, hop, (hop + 1) % p.cp, main);
  }
  if (p.pp > 1) pair_images(GroupKind::kPp, dense_stage0, Axis::kPp, 0, 1, -1);
  if (p.pp > 1 && input_.model.tied_embeddings) {
    pair_images(GroupKind::kEmbedding, dense_stage0, Axis::kPp, 0, p.pp - 1, -1);
  }
  // The collectives each group runs.
  auto kinds_of = [](GroupKind gk) -> std::vector<OpKind> {
    switch (gk) {
      case GroupKind::kTp:
        return {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kReduceScatter, OpKind::kBroadcast};
      case GroupKind::kCp:
      case GroupKind::kPp:
        return {OpKind::kSend};
      case GroupKind::kEp:
        return {OpKind::kAllToAll};
      case GroupKind::kDp:
      case GroupKind::kEdp:
        return {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kReduceScatter};
      case GroupKind::kEmbedding:
      case GroupKind::kNorm:
        return {OpKind::kAllReduce};
    }
    return {};
  };
  for (std::size_t k = 0; k < kGroupKinds; ++k) {
    const std::vector<int>& gpus = g->gpus[k];
    if (gpus.size() < 2) continue;
    for (OpKind kind : kinds_of(static_cast<GroupKind>(k))) {
      std::string line_key;
      if (static_cast<GroupKind>(k) == GroupKind::kNorm) {
        // The gradient norm's 4 bytes are latency-bound, and its latency depends on the group's
        // size and island layout, not on which GPUs: groups alike share lines.
        std::vector<int> per_island(static_cast<std::size_t>(cluster.num_islands()), 0);
        for (int x : gpus)
          ++per_island[static_cast<std::size_t>(cluster.island_of(x))];
        int islands = 0, most = 0, least = 1 << 30;
        for (int c : per_island) {
          if (c == 0) continue;
          ++islands;
          most = std::max(most, c);
          least = std::min(least, c);
        }
        line_key = "norm " + std::to_string(gpus.size()) + " " + std::to_string(islands) + " " +
                   std::to_string(most) + " " + std::to_string(least);
      } else {
        line_key = content_key(kind, gpus, g->images[k]);
      }
      // The dispatch and combine of a plan that sends them hierarchically.
      std::optional<sim::TokenRouting> routing;
      if (static_cast<GroupKind>(k) == GroupKind::kEp && p.moe_a2a == MoeA2a::kHierarchical &&
          input_.model.is_moe()) {
        routing = sim::token_routing(*input_.model.moe);
        line_key += "routed";
      }
      g->lines[k][kind_slot(kind)] =
          lines(line_key, gpus, g->images[k], kind, planner, routing ? &*routing : nullptr);
    }
  }
  // The images are only needed to build the lines.
  for (auto& v : g->images)
    v.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = groups_.emplace(key, std::move(g));
  return it->second.get();
}

// ---- partition: parameters and gradient buckets per stage

Result<const Estimator::Partition*> Estimator::partition(const ParallelConfig& p) const {
  const std::int64_t bucket = default_bucket_elements(p.dp);
  const Key key = partition_key(p);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = partitions_.find(key);
    if (it != partitions_.end()) return it->second.get();
  }
  const ModelSpec& m = input_.model;
  PLANNER_ASSIGN_OR_RETURN(ModelPartition part, ModelPartition::create(m, p));
  auto out = std::make_unique<Partition>();
  out->embedding_rows = m.vocab / p.tp * m.hidden;
  for (int s = 0; s < p.pp; ++s) {
    Partition::Stage st;
    st.params = part.rank_params(s);
    const StageParams sp = part.stage_params(s, bucket);
    std::int64_t dense_layer_total = 0, expert_total = 0;
    std::int64_t dense_tensors = 0, expert_tensors = 0;
    for (const ParamTensor& t : sp.tensors) {
      if (t.layer == OpId::kNone) continue;
      (t.expert ? expert_total : dense_layer_total) += t.elements;
      (t.expert ? expert_tensors : dense_tensors) += 1;
    }
    for (int c = 0; c < part.chunks(); ++c) {
      const int first = part.first_layer(s, c);
      for (int l = first; l < first + part.layers_per_chunk(s, c); ++l)
        (m.is_moe_layer(l) ? st.moe_layers : st.dense_layers) += 1;
    }
    const int layers = st.dense_layers + st.moe_layers;
    st.dense_layer_elements = layers > 0 ? dense_layer_total / layers : 0;
    st.expert_layer_elements = st.moe_layers > 0 ? expert_total / st.moe_layers : 0;
    st.dense_layer_tensors = layers > 0 ? dense_tensors / layers : 0;
    st.expert_layer_tensors = st.moe_layers > 0 ? expert_tensors / st.moe_layers : 0;
    for (const GradBucket& b : sp.buckets)
      (b.expert ? st.expert_buckets : st.dense_buckets).push_back(b.elements);
    st.bucket_class = static_cast<int>(out->stages.size());
    for (const Partition::Stage& other : out->stages) {
      if (other.dense_buckets == st.dense_buckets && other.expert_buckets == st.expert_buckets) {
        st.bucket_class = other.bucket_class;
        break;
      }
    }
    out->stages.push_back(std::move(st));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = partitions_.emplace(key, std::move(out));
  return it->second.get();
}

// ---- closed forms

namespace {

// DualPipeV's schedules over p stages at m = 2p and 2p + 1 (its fewest micro-batches), built
// once per pipeline depth and thread: the sweep estimates many plans of each depth.
const std::pair<PipelineSchedule, PipelineSchedule>& dualpipe_v_schedules(int p) {
  thread_local std::map<int, std::pair<PipelineSchedule, PipelineSchedule>> cache;
  auto it = cache.find(p);
  if (it == cache.end()) {
    auto make = [&](int m) {
      auto sched = PipelineSchedule::create(Schedule::kDualPipeV, p, m, 2);
      return sched ? *std::move(sched) : PipelineSchedule{};
    };
    it = cache.emplace(p, std::pair{make(2 * p), make(2 * p + 1)}).first;
  }
  return it->second;
}

// The merged pairs stage `s` runs under the EP all-to-all overlap (PipelineSchedule::fused: the
// steady state's, none where merging them would make the stages wait forever), per schedule
// shape; the schedule is built once per shape and thread.
int a2a_overlap_pairs(Schedule kind, int p, int m, int v, int s) {
  thread_local std::map<std::array<int, 4>, std::vector<int>> cache;
  const std::array<int, 4> key{static_cast<int>(kind), p, m, v};
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::vector<int> pairs(static_cast<std::size_t>(p), 0);
    if (auto sched = PipelineSchedule::create(kind, p, m, v, 1); sched) {
      for (int k = 0; k < p; ++k)
        pairs[static_cast<std::size_t>(k)] = sched->fused_pairs(k);
    }
    it = cache.emplace(key, std::move(pairs)).first;
  }
  return it->second[static_cast<std::size_t>(s)];
}

// DualPipeV has no closed form for unequal stages: run its schedule with each chunk taking half
// the stage's times at m = 2p, and add each micro-batch beyond by the larger of what one more adds
// to that run and the busiest stage's work per micro-batch (where the busiest stage sets the
// pace, as the LM head's stage 0 does, the run at 2p has not reached that steady state yet). The
// merged chunks hide their pipeline messages, so only the fill's are added.
double dualpipe_v_makespan(int m, const std::vector<double>& f, const std::vector<double>& b,
                           const std::vector<double>& w) {
  const int p = static_cast<int>(f.size());
  std::vector<PassTimes> times;
  for (std::size_t s = 0; s < f.size(); ++s)
    times.push_back({f[s] / 2, b[s] / 2, w[s] / 2});
  const auto& [at_2p, at_2p1] = dualpipe_v_schedules(p);
  auto run = [&](const PipelineSchedule& sched) {
    auto r = run_schedule(sched, times);
    return r ? r->makespan : 0.0;
  };
  // Plans that differ where the stages' times do not (dp, ZeRO, rank order) share the runs: by
  // the stage times, per thread (cleared when it grows large).
  thread_local std::map<std::vector<double>, std::pair<double, std::optional<double>>> runs;
  std::vector<double> key;
  key.reserve(3 * f.size());
  for (std::size_t s = 0; s < f.size(); ++s)
    key.insert(key.end(), {f[s], b[s], w[s]});
  auto it = runs.find(key);
  if (it == runs.end()) {
    if (runs.size() >= 100000) runs.clear();
    it = runs.emplace(std::move(key), std::pair{run(at_2p), std::optional<double>()}).first;
  }
  const double at_base = it->second.first;
  if (m <= 2 * p) return at_base;
  if (!it->second.second) it->second.second = run(at_2p1);
  double busiest = 0;
  for (std::size_t s = 0; s < f.size(); ++s)
    busiest = std::max(busiest, f[s] + b[s] + w[s]);
  return at_base + (m - 2 * p) * std::max(*it->second.second - at_base, busiest);
}

}  // namespace

double pipeline_makespan(Schedule schedule, int m, int v, const std::vector<double>& f,
                         const std::vector<double>& b, const std::vector<double>& w, double p2p) {
  const std::size_t p = f.size();
  double max_fbw = 0, sum_fbw = 0, max_zb = 0;
  for (std::size_t s = 0; s < p; ++s) {
    max_fbw = std::max(max_fbw, f[s] + b[s] + w[s]);
    sum_fbw += f[s] + b[s] + w[s];
    max_zb = std::max(max_zb, f[s] + b[s] - w[s]);
  }
  const double fill = 2.0 * static_cast<double>(p - 1) * p2p;
  // Each micro-batch's activation and gradient messages sit on the steady state's critical path.
  const double period = p > 1 ? 2.0 * p2p : 0.0;
  switch (schedule) {
    case Schedule::kGpipe:
    case Schedule::k1F1B:
      return (m - 1) * (max_fbw + period) + sum_fbw + fill;
    case Schedule::kInterleaved:
      return m * (max_fbw + period) + (sum_fbw - max_fbw) / v + fill;
    case Schedule::kZeroBubbleH1:
      return m * (max_fbw + period) + static_cast<double>(p - 1) * std::max(0.0, max_zb) + fill;
    case Schedule::kDualPipeV:
      return dualpipe_v_makespan(m, f, b, w) + fill;
  }
  return 0;
}

// ---- a block on one rank

namespace {

struct Interval {
  double start = 0;
  double end = 0;
  std::size_t bucket = 0;  // sim::TimeBucket of the stream
};

// The span's ops as a list schedule on one rank. The host issues them from the span's start
// (host_model.hpp), or, with `host_ahead`, has issued earlier blocks' ops far enough ahead that
// only its total issue time bounds the span: a backward pass, where a host that never
// synchronises with the device keeps the lead it built (no token-count copy or receive to wait
// for), and where an MoE layer's expert GEMMs issued one by one would otherwise show as idle GPU
// time that the simulation hides.
SpanCost span_cost(const Block& blk, Span span, const std::vector<double>& comm_time,
                   double slowdown, bool host_ahead) {
  SpanCost c;
  const std::size_t n = blk.ops.size();
  std::vector<double> start(n, 0), end(n, 0);
  std::array<double, kNumStreams> free{};
  std::vector<Interval> compute, comm;
  double host = 0;  // the host clock: op i is issued at the sum of the costs up to it
  for (std::size_t i = 0; i < n; ++i) {
    const MiniOp& op = blk.ops[i];
    if (!in_span(op.part, span)) continue;
    const auto st = static_cast<std::size_t>(op.stream);
    host += secs(op.host);
    double ready = host_ahead ? free[st] : std::max(free[st], host);
    for (int d : op.deps) {
      if (in_span(blk.ops[static_cast<std::size_t>(d)].part, span)) {
        ready = std::max(ready, end[static_cast<std::size_t>(d)]);
      }
    }
    if (op.kind == OpKind::kRecv) {
      // The symmetric peer sends when this rank sends the same tag.
      for (std::size_t j = 0; j < i; ++j) {
        const MiniOp& o = blk.ops[j];
        if (o.kind == OpKind::kSend && o.tag == op.tag && in_span(o.part, span)) {
          ready = std::max(ready, start[j]);
          break;
        }
      }
    }
    const double d = op.compute ? secs(op.compute_time) : comm_time[i];
    start[i] = ready;
    end[i] = ready + d;
    free[st] = end[i];
    c.time = std::max(c.time, end[i]);
    if (op.compute) {
      c.compute += d;
      compute.push_back({start[i], end[i], 0});
    } else if (d > 0) {
      comm.push_back({start[i], end[i], static_cast<std::size_t>(sim::bucket_of(op.stream))});
    }
  }
  // Charge every instant: computing, else the first axis (kCommBuckets order) moving data, else
  // idle; and find how long compute ran while communication moved data. A sweep over the
  // intervals' ends: between two consecutive ends, what runs does not change.
  struct Edge {
    double at = 0;
    std::size_t bucket = 0;  // kCompute for computation
    int delta = 0;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * (compute.size() + comm.size()));
  for (const Interval& x : compute) {
    edges.push_back({x.start, x.bucket, 1});
    edges.push_back({x.end, x.bucket, -1});
  }
  for (const Interval& x : comm) {
    if (x.bucket == static_cast<std::size_t>(sim::TimeBucket::kCompute)) continue;  // no axis
    edges.push_back({x.start, x.bucket, 1});
    edges.push_back({x.end, x.bucket, -1});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
  std::array<int, sim::kNumTimeBuckets> running{};
  double overlapped = 0;
  auto charge = [&](double a, double b) {
    if (b <= a) return;
    const bool busy = running[static_cast<std::size_t>(sim::TimeBucket::kCompute)] > 0;
    std::size_t bucket = static_cast<std::size_t>(sim::TimeBucket::kIdle);
    bool moving = false;
    for (sim::TimeBucket axis : sim::kCommBuckets) {
      const auto ax = static_cast<std::size_t>(axis);
      if (running[ax] > 0) {
        bucket = ax;
        moving = true;
        break;
      }
    }
    if (busy) {
      bucket = static_cast<std::size_t>(sim::TimeBucket::kCompute);
      if (moving) overlapped += b - a;
    }
    c.buckets[bucket] += b - a;
  };
  double at = 0;
  for (std::size_t i = 0; i < edges.size();) {
    const double next = edges[i].at;
    charge(at, next);
    for (; i < edges.size() && edges[i].at == next; ++i)
      running[edges[i].bucket] += edges[i].delta;
    at = std::max(at, next);
  }
  charge(at, c.time);
  // A host ahead of the GPU still issues the span's ops no faster than their costs add up.
  if (host_ahead && host > c.time) {
    c.buckets[static_cast<std::size_t>(sim::TimeBucket::kIdle)] += host - c.time;
    c.time = host;
  }
  // Compute runs at (1 − slowdown) while communication moves data on the rank.
  const double stretch = overlapped * slowdown;
  c.time += stretch;
  c.buckets[static_cast<std::size_t>(sim::TimeBucket::kCompute)] += stretch;
  return c;
}

// What the EP all-to-all overlap saves in one merged pair: a forward chunk of `layers` MoE layers
// beside the backward chunk of another micro-batch, merged as lowering.cpp's
// merge_forward_backward merges them (each pass cut after every EP all-to-all; forward and
// backward segments alternating; a segment's first compute op waits for the tp and cp
// communication of the segment before it, its first tp collective and cp send for that segment's
// compute). The two passes' times one after the other minus their time merged, each a list
// schedule: an op starts when its stream is free, the host has issued it and its dependencies
// have ended.
double merged_pair_saving(const Block& moe, const std::vector<double>& comm_time, int layers) {
  struct Lean {
    std::size_t stream = 0;
    double duration = 0, host = 0;
    int slot = -1;  // merge_barrier_slot
    std::uint32_t deps_begin = 0, deps_end = 0;
  };
  thread_local std::vector<Lean> ops;
  thread_local std::vector<int> deps, index, segment_of, order;
  ops.clear();
  deps.clear();
  segment_of.clear();
  // The pass's ops, `layers` copies of the block's chained one after the other; each op's segment
  // (a new one after every EP all-to-all). Returns the number of segments.
  auto build = [&](bool forward) {
    index.assign(moe.ops.size(), -1);
    int last = -1, segment = 0;
    for (int l = 0; l < layers; ++l) {
      bool first = true;
      for (std::size_t i = 0; i < moe.ops.size(); ++i) {
        const MiniOp& op = moe.ops[i];
        if ((op.part == Part::kForward) != forward) continue;
        Lean x;
        x.stream = static_cast<std::size_t>(op.stream);
        x.duration = op.compute ? secs(op.compute_time) : comm_time[i];
        x.host = secs(op.host);
        x.slot = merge_barrier_slot(op.stream);
        x.deps_begin = static_cast<std::uint32_t>(deps.size());
        for (int d : op.deps) {
          if (index[static_cast<std::size_t>(d)] >= 0)
            deps.push_back(index[static_cast<std::size_t>(d)]);
        }
        if (first && last >= 0) deps.push_back(last);
        x.deps_end = static_cast<std::uint32_t>(deps.size());
        first = false;
        index[i] = last = static_cast<int>(ops.size());
        ops.push_back(x);
        segment_of.push_back(segment);
        if (op.kind == OpKind::kAllToAll && op.group == GroupKind::kEp) ++segment;
      }
    }
    return segment + 1;
  };
  const auto f_begin = ops.size();
  const int f_segments = build(true);
  const auto b_begin = ops.size();
  const int b_segments = build(false);
  const auto n = ops.size();
  // Runs the ops in `order`; `barrier` adds the segment barrier's waits.
  thread_local std::vector<double> end;
  auto makespan = [&](bool barrier) {
    end.assign(n, 0.0);
    std::array<double, kNumStreams> free{};
    std::array<double, 4> last{}, mine{};
    double host = 0, span = 0;
    int current = -1;
    std::array<bool, 4> seen{};
    for (std::size_t k = 0; k < n; ++k) {
      const auto i = static_cast<std::size_t>(order[k]);
      const Lean& op = ops[i];
      const int seg = segment_of[i] * 2 + (i >= b_begin ? 1 : 0);
      if (seg != current) {
        current = seg;
        last = mine;
        mine = {};
        seen = {};
      }
      host += op.host;
      double ready = std::max(free[op.stream], host);
      for (std::uint32_t d = op.deps_begin; d < op.deps_end; ++d)
        ready = std::max(ready, end[static_cast<std::size_t>(deps[d])]);
      if (barrier && op.slot >= 0 && !seen[static_cast<std::size_t>(op.slot)]) {
        seen[static_cast<std::size_t>(op.slot)] = true;
        if (op.slot == 0) {
          ready = std::max({ready, last[1], last[2], last[3]});
        } else if (op.slot != 3) {
          ready = std::max(ready, last[0]);
        }
      }
      end[i] = ready + op.duration;
      free[op.stream] = end[i];
      if (op.slot >= 0) mine[static_cast<std::size_t>(op.slot)] = end[i];
      span = std::max(span, end[i]);
    }
    return span;
  };
  order.resize(n);
  for (std::size_t k = 0; k < n; ++k)
    order[k] = static_cast<int>(k);
  const double apart = makespan(false);
  // Merged: forward segment 0, backward segment 0, forward segment 1, ...
  order.clear();
  for (int sgm = 0; sgm < std::max(f_segments, b_segments); ++sgm) {
    for (std::size_t i = f_begin; i < b_begin; ++i) {
      if (segment_of[i] == sgm) order.push_back(static_cast<int>(i));
    }
    for (std::size_t i = b_begin; i < n; ++i) {
      if (segment_of[i] == sgm) order.push_back(static_cast<int>(i));
    }
  }
  return std::max(0.0, apart - makespan(true));
}

}  // namespace

// A block's span costs by the block and its communication times.
struct Estimator::Session::SpanCosts {
  std::map<std::pair<const Block*, std::vector<double>>, std::array<SpanCost, kSpans>> by_comm;
};

struct Estimator::BlockCosts {
  // Per block (dense layer, MoE layer, embedding end, head end, MTP modules) and span.
  std::array<std::array<SpanCost, kSpans>, 5> cost{};
  // The MoE layer's ops and their communication times, and what merging a pair of chunks of so
  // many MoE layers saves (merged_pair_saving), by layers.
  const Block* moe = nullptr;
  std::vector<double> moe_comm;
  mutable std::unordered_map<int, double> merged_saving;
  double saving(int layers) const {
    if (moe == nullptr) return 0.0;
    auto exact = [&](int l) {
      auto it = merged_saving.find(l);
      if (it == merged_saving.end())
        it = merged_saving.emplace(l, merged_pair_saving(*moe, moe_comm, l)).first;
      return it->second;
    };
    if (layers <= 3) return exact(layers);
    // Beyond the first layers the merged chunks repeat one layer's pattern: each further layer
    // saves what the third did.
    return exact(3) + (layers - 3) * (exact(3) - exact(2));
  }
};

const Estimator::BlockCosts& Estimator::Session::block_costs(const Probe& probe,
                                                             const Groups& groups) {
  const Key key{
      {reinterpret_cast<std::intptr_t>(&probe), reinterpret_cast<std::intptr_t>(&groups)}};
  auto it = block_costs_.find(key);
  if (it != block_costs_.end()) return *it->second;
  const ComputeProfile& cp = e_->input_.profile->compute;
  const double slowdown = cp.comm_slowdown < 1 ? cp.comm_slowdown / (1.0 - cp.comm_slowdown) : 0;
  auto out = std::make_unique<BlockCosts>();
  const Block* blocks[] = {&probe.layer[0], &probe.layer[1], &probe.embedding, &probe.head,
                           &probe.mtp};
  for (std::size_t k = 0; k < std::size(blocks); ++k) {
    const Block& blk = *blocks[k];
    if (!blk.present) continue;
    // A receive takes as long as its send: it starts when the symmetric peer's send does
    // (span_cost) and delivers the block when that transfer ends.
    std::vector<double> comm(blk.ops.size(), 0.0);
    for (std::size_t i = 0; i < blk.ops.size(); ++i) {
      const MiniOp& op = blk.ops[i];
      if (op.compute) continue;
      comm[i] = line_s(groups.get(op.group, op.kind), static_cast<double>(op.bytes.raw()));
    }
    if (!span_costs_) span_costs_ = std::make_unique<SpanCosts>();
    auto [hit, added] = span_costs_->by_comm.try_emplace({&blk, comm});
    if (added) {
      const bool syncs = syncs_device(e_->input_.host);
      for (std::size_t sp = 0; sp < kSpans; ++sp) {
        const auto span = static_cast<Span>(sp);
        hit->second[sp] = span_cost(blk, span, comm, slowdown, span != Span::kForward && !syncs);
      }
    }
    out->cost[k] = hit->second;
    if (k == 1) {
      out->moe = &blk;
      out->moe_comm = std::move(comm);
    }
  }
  return *block_costs_.emplace(key, std::move(out)).first->second;
}

struct Estimator::DpTail {
  double reduce = 0;        // all gradient buckets reduced (all-reduce, or reduce-scatter)
  double last_bucket = 0;   // the bucket reduced last (the first registered)
  double gather = 0;        // ZeRO-1/2: all buckets' updated parameters gathered
  double first_gather = 0;  // the largest single gather
};

const Estimator::DpTail& Estimator::Session::dp_tail(const Partition& part, const Groups& groups,
                                                     int zero_stage, int stage, bool dp_on,
                                                     double grad_bytes, double param_bytes) {
  const Partition::Stage& st = part.stages[static_cast<std::size_t>(stage)];
  const Key key{{reinterpret_cast<std::intptr_t>(&part), reinterpret_cast<std::intptr_t>(&groups),
                 zero_stage, st.bucket_class, dp_on ? 1 : 0}};
  auto it = dp_tails_.find(key);
  if (it != dp_tails_.end()) return *it->second;
  auto out = std::make_unique<DpTail>();
  if (dp_on && zero_stage < 3) {
    bool first = true;
    auto add = [&](const std::vector<std::int64_t>& list, GroupKind g) {
      const auto* ar = groups.get(g, OpKind::kAllReduce);
      const auto* rs = groups.get(g, OpKind::kReduceScatter);
      const auto* ag = groups.get(g, OpKind::kAllGather);
      for (std::int64_t el : list) {
        const double r = line_s(zero_stage == 0 ? ar : rs, static_cast<double>(el) * grad_bytes);
        out->reduce += r;
        if (first) out->last_bucket = r;
        first = false;
        if (zero_stage >= 1) {
          const double gt = line_s(ag, static_cast<double>(el) * param_bytes);
          out->gather += gt;
          out->first_gather = std::max(out->first_gather, gt);
        }
      }
    };
    add(st.dense_buckets, GroupKind::kDp);
    add(st.expert_buckets, GroupKind::kEdp);
  }
  return *dp_tails_.emplace(key, std::move(out)).first->second;
}

Estimator::Session::~Session() = default;
Estimator::Session::Session(Session&&) noexcept = default;
Estimator::Session& Estimator::Session::operator=(Session&&) noexcept = default;

// ---- the estimate

Result<PlanEstimate> Estimator::Session::estimate(const ParallelConfig& p,
                                                  const MemoryPeak& memory) {
  const EstimatorInput& in = e_->input_;
  if (p.dp_sync != DpSync::kAllReduce || p.offload != Offload::kNone) {
    return Status::invalid_input(
        "the analytic estimate does not model parameter servers or offload; simulate the plan");
  }
  auto cached = [](auto& front, const auto& key, auto make) -> decltype(make()) {
    auto it = front.find(key);
    if (it != front.end()) return it->second;
    auto r = make();
    if (r) front.emplace(key, *r);
    return r;
  };
  PLANNER_ASSIGN_OR_RETURN(const Probe* probe,
                           cached(probes_, probe_key(p), [&] { return e_->probe(p); }));
  std::int64_t order = 0;
  while (order < static_cast<std::int64_t>(orders_.size()) &&
         orders_[static_cast<std::size_t>(order)] != p.order)
    ++order;
  if (order == static_cast<std::int64_t>(orders_.size())) orders_.push_back(p.order);
  const Key gkey{{p.tp, p.cp, p.ep, p.dp, p.pp, p.zero_stage >= 1 ? 1 : 0, order,
                  static_cast<std::int64_t>(p.moe_a2a), p.expert_tp()}};
  if (!planner_) {
    planner_ = std::make_unique<sim::CollectivePlanner>(*in.cluster, *in.profile, *in.fabric,
                                                        std::nullopt);
  }
  PLANNER_ASSIGN_OR_RETURN(const Groups* groups,
                           cached(groups_, gkey, [&] { return e_->groups(p, *planner_); }));
  PLANNER_ASSIGN_OR_RETURN(const Partition* part,
                           cached(partitions_, partition_key(p), [&] { return e_->partition(p); }));
  const BlockCosts& bc = block_costs(*probe, *groups);

  const ComputeProfile& cp = in.profile->compute;
  const double slow = cp.comm_slowdown < 1 ? cp.comm_slowdown / (1.0 - cp.comm_slowdown) : 0.0;
  const PrecisionBytes pb = precision_bytes(in.training, in.fp32_grads);
  const int pp = p.pp;
  const int v = p.virtual_stages;
  const int m = static_cast<int>(in.training.global_batch_size /
                                 (static_cast<std::int64_t>(p.dp) * p.micro_batch_size));
  const bool split = PipelineSchedule::splits_backward(p.schedule);
  constexpr auto kF = static_cast<std::size_t>(Span::kForward);
  constexpr auto kB = static_cast<std::size_t>(Span::kBackwardAll);
  constexpr auto kBi = static_cast<std::size_t>(Span::kBackwardInput);
  constexpr auto kW = static_cast<std::size_t>(Span::kWeight);
  const auto& dense = bc.cost[0];
  const auto& moe = bc.cost[1];
  const auto& emb = bc.cost[2];
  const auto& head = bc.cost[3];
  const auto& mtp = bc.cost[4];

  const auto* dp_ag = groups->get(GroupKind::kDp, OpKind::kAllGather);
  const auto* dp_rs = groups->get(GroupKind::kDp, OpKind::kReduceScatter);
  const auto* edp_ag = groups->get(GroupKind::kEdp, OpKind::kAllGather);
  const auto* edp_rs = groups->get(GroupKind::kEdp, OpKind::kReduceScatter);

  std::vector<double> f(static_cast<std::size_t>(pp)), b(f.size()), w(f.size());
  std::array<double, sim::kNumTimeBuckets> stage0{};  // per micro-batch
  auto add_buckets = [](std::array<double, sim::kNumTimeBuckets>& to, const SpanCost& c, double n) {
    for (std::size_t k = 0; k < sim::kNumTimeBuckets; ++k)
      to[k] += n * c.buckets[k];
  };
  for (int s = 0; s < pp; ++s) {
    const Partition::Stage& st = part->stages[static_cast<std::size_t>(s)];
    const double nd = st.dense_layers, nm = st.moe_layers;
    std::array<double, sim::kNumTimeBuckets> bk{};
    double fs = nd * dense[kF].time + nm * moe[kF].time;
    double bs =
        split ? nd * dense[kBi].time + nm * moe[kBi].time : nd * dense[kB].time + nm * moe[kB].time;
    double ws = split ? nd * dense[kW].time + nm * moe[kW].time : 0.0;
    add_buckets(bk, dense[kF], nd);
    add_buckets(bk, moe[kF], nm);
    add_buckets(bk, dense[kB], nd);
    add_buckets(bk, moe[kB], nm);
    const std::pair<bool, const std::array<SpanCost, kSpans>*> ends[] = {
        {s == 0, &emb}, {s == p.lm_head_stage(), &head}, {s == p.lm_head_stage(), &mtp}};
    for (const auto& [here, c] : ends) {
      if (!here) continue;
      fs += (*c)[kF].time;
      bs += split ? (*c)[kBi].time : (*c)[kB].time;
      ws += split ? (*c)[kW].time : 0.0;
      add_buckets(bk, (*c)[kF], 1);
      add_buckets(bk, (*c)[kB], 1);
    }
    if (p.zero_stage == 3) {
      // Per layer and micro-batch: gather before forward and before backward, reduce-scatter
      // after, all on the dp stream in program order (core/lowering.cpp). Forward, the gathers
      // run ahead one layer, exposed beyond the layer's compute. Backward, layer L − 1's gather
      // queues behind layer L's reduce-scatter, which waits for L's gradients: both are exposed
      // between the two layers' backward passes.
      const double de = static_cast<double>(st.dense_layer_elements);
      const double ee = static_cast<double>(st.expert_layer_elements);
      const double layers = nd + nm;
      if (layers > 0) {
        // The host issues a gather before it runs (tensor by tensor under some stacks,
        // host_model.hpp), so its cost delays the gather.
        const auto issue = [&](std::int64_t tensors, GroupKind g) {
          OpDesc d;
          d.kind = OpKind::kAllGather;
          d.aux = tensors;
          const auto members =
              static_cast<std::int64_t>(groups->gpus[static_cast<std::size_t>(g)].size());
          return secs(host_cost(in.host, d, Phase::kForward, members));
        };
        const double hf = issue(st.dense_layer_tensors, GroupKind::kDp) +
                          nm / layers * issue(st.expert_layer_tensors, GroupKind::kEdp);
        const double gf =
            hf + line_s(dp_ag, de * pb.param) + nm / layers * line_s(edp_ag, ee * pb.param);
        const double gb =
            gf + line_s(dp_rs, de * pb.grad) + nm / layers * line_s(edp_rs, ee * pb.grad);
        const double lf = (nd * dense[kF].compute + nm * moe[kF].compute) / layers;
        // A host that synchronises before each gather (host_model.hpp) neither prefetches nor
        // overlaps it in the forward pass either: the gathers add to the compute.
        const bool sync = host_syncs_before_gather(in.host);
        const double xf = layers * (sync ? gf : std::max(0.0, gf - lf));
        const double xb = layers * gb;
        fs += xf + (sync ? 0.0 : slow * layers * std::min(gf, lf));
        bs += xb;
        bk[static_cast<std::size_t>(sim::TimeBucket::kDp)] += xf + xb;
      }
    }
    const bool dualpipe = p.schedule == Schedule::kDualPipeV;
    if ((p.moe_a2a_overlap || dualpipe) && nm > 0) {
      // Merged forward and backward passes (lowering.cpp merge_forward_backward): the steady
      // state's passes hide all-to-all time under the other pass's compute, which runs slowed
      // meanwhile; the warm-up's and the drain's passes run alone. How much a merged pair of
      // chunks hides is timed on the MoE layer's ops (merged_pair_saving): each all-to-all
      // hides only under the other pass's segment placed after it, so chunks of one or two layers
      // hide less than their all-to-all time. DualPipeV merges the pairs its schedule marks, two
      // more per micro-batch beyond 2p.
      constexpr auto kEpBucket = static_cast<std::size_t>(sim::TimeBucket::kEp);
      const double xf = nm * moe[kF].buckets[kEpBucket];
      const double xb = nm * moe[kB].buckets[kEpBucket];
      const int passes = m * v;
      const int warmup =
          dualpipe ? passes - (dualpipe_v_schedules(pp).first.fused_pairs(s) + 2 * (m - 2 * pp))
                   : passes - a2a_overlap_pairs(p.schedule, pp, m, v, s);
      const double steady = std::max(0.0, static_cast<double>(passes - warmup) / passes);
      const int chunk_layers = std::max(1, static_cast<int>(std::lround(nm / v)));
      const double saved = std::min(xf + xb, (nm / chunk_layers) * bc.saving(chunk_layers));
      const double hf = xf + xb > 0 ? steady * saved * xf / (xf + xb) : 0.0;
      const double hb = xf + xb > 0 ? steady * saved * xb / (xf + xb) : 0.0;
      fs -= (1.0 - slow) * hf;
      bs -= (1.0 - slow) * hb;
      bk[kEpBucket] -= hf + hb;
      bk[static_cast<std::size_t>(sim::TimeBucket::kCompute)] += slow * (hf + hb);
    }
    f[static_cast<std::size_t>(s)] = fs;
    b[static_cast<std::size_t>(s)] = bs;
    w[static_cast<std::size_t>(s)] = ws;
    if (s == 0) stage0 = bk;
  }
  const double t_pp = pp > 1 ? line_s(groups->get(GroupKind::kPp, OpKind::kSend),
                                      static_cast<double>(probe->pp_message.raw()))
                             : 0.0;
  const double pipe = pipeline_makespan(p.schedule, m, v, f, b, w, t_pp);

  // Data-parallel tail per stage: gradient reduction, then the optimizer and parameter gathers.
  const bool dp_on = static_cast<std::int64_t>(p.dp) * p.cp > 1;
  // ZeRO-2's reduce-scatters share the NICs with the all-to-alls where both leave the NVLink
  // domain: the NICs carry the all-to-alls' time, hidden or not.
  const auto leaves_island = [&](GroupKind k) {
    const std::vector<int>& gpus = groups->gpus[static_cast<std::size_t>(k)];
    for (int x : gpus) {
      if (in.cluster->island_of(x) != in.cluster->island_of(gpus.front())) return true;
    }
    return false;
  };
  const bool dp_shares_nics = p.zero_stage == 2 && leaves_island(GroupKind::kEp) &&
                              (leaves_island(GroupKind::kDp) || leaves_island(GroupKind::kEdp));
  constexpr auto kEpBusy = static_cast<std::size_t>(sim::TimeBucket::kEp);
  const double ep_busy_per_layer = m * (moe[kF].buckets[kEpBusy] + moe[kB].buckets[kEpBusy]);
  double step_end = 0;
  double tail0 = 0, optimizer0 = 0;
  for (int s = 0; s < pp; ++s) {
    const Partition::Stage& st = part->stages[static_cast<std::size_t>(s)];
    const auto i = static_cast<std::size_t>(s);
    const DpTail& dt = dp_tail(*part, *groups, p.zero_stage, s, dp_on, pb.grad, pb.param);
    const double stage_b = b[i] + w[i];
    const double last_chunk_b = stage_b / v;
    double exposed_reduce = dt.reduce;
    double stretch = 0;
    if (p.zero_stage == 2 && dt.reduce > 0) {
      // Reduce-scatter after every micro-batch's backward: the dp stream carries m of them
      // alongside the stage's remaining work, on NICs the all-to-alls also use where both
      // leave the NVLink domain.
      const double total = m * dt.reduce;
      const double ep_busy = dp_shares_nics ? st.moe_layers * ep_busy_per_layer : 0.0;
      const double room = std::max(0.0, pipe - (f[i] + (s + 1) * f[0] / v) - ep_busy);
      exposed_reduce = std::max(dt.last_bucket, total - room);
      stretch = slow * std::min(total, room);
    } else if (p.overlap_grad_reduce && dt.reduce > 0) {
      exposed_reduce = std::max(dt.last_bucket, dt.reduce - last_chunk_b);
      stretch = slow * std::min(dt.reduce, last_chunk_b);
    }
    double exposed_gather = dt.gather;
    if (dt.gather > 0 && p.overlap_param_gather) {
      exposed_gather = std::max(dt.first_gather, dt.gather - f[i] / v);
      stretch += slow * std::min(dt.gather, f[i] / v);
    }
    const double norm = line_s(groups->get(GroupKind::kNorm, OpKind::kAllReduce), 4.0);
    double emb_ar = 0;
    if (pp > 1 && in.model.tied_embeddings && p.lm_head_stage() != 0 && (s == 0 || s == pp - 1)) {
      emb_ar = line_s(groups->get(GroupKind::kEmbedding, OpKind::kAllReduce),
                      static_cast<double>(part->embedding_rows) * pb.grad);
    }
    const std::int64_t shard = p.zero_stage >= 1 ? static_cast<std::int64_t>(p.dp) * p.cp : 1;
    const double updated = static_cast<double>(st.params.total()) / static_cast<double>(shard);
    const double optimizer = secs(Bytes(std::llround(updated * probe->optimizer_bytes_per_param)) /
                                  cp.memory_bandwidth) +
                             secs(probe->kernel_overhead);
    // Stage s finishes its last backward s backward chunks before stage 0 does (the drain).
    const double slack = s * (b[0] + w[0]) / v;
    const double tail = exposed_reduce + stretch + emb_ar + norm + exposed_gather;
    step_end = std::max(step_end, pipe - slack + tail + optimizer);
    if (s == 0) {
      tail0 = tail;
      optimizer0 = optimizer;
    }
  }

  PlanEstimate out;
  out.memory = memory;
  out.step_time = from_secs(step_end);
  const double seconds = step_end;
  const double tokens = static_cast<double>(in.training.tokens_per_step());
  const auto world = p.world_size();
  if (seconds > 0) {
    out.tokens_per_second = tokens / seconds;
    FlopRate peak = in.gpu.peak_for(in.training.precision);
    if (peak.raw() <= 0) peak = in.gpu.peak_for(Precision::kBf16);
    if (peak.raw() > 0) {
      out.mfu = flops_utilization(e_->model_flops_, seconds, world, peak);
      const Flops hardware = p.recompute_modules == kDefaultRecomputeModules
                                 ? e_->hardware_flops_[static_cast<std::size_t>(p.recompute)]
                                 : hardware_flops_per_step(in.model, in.training, p);
      out.hfu = flops_utilization(hardware, seconds, world, peak);
    }
  }
  // Stage 0's time by bucket: its micro-batches' work, the pipeline messages it waits for, the
  // data-parallel tail and the optimizer; the rest of the step is idle (bubbles).
  auto& bk = out.buckets;
  for (std::size_t k = 0; k < sim::kNumTimeBuckets; ++k)
    bk[k] = from_secs(m * stage0[k]);
  const auto kIdle = static_cast<std::size_t>(sim::TimeBucket::kIdle);
  const auto kPp = static_cast<std::size_t>(sim::TimeBucket::kPp);
  const auto kDp = static_cast<std::size_t>(sim::TimeBucket::kDp);
  const auto kCompute = static_cast<std::size_t>(sim::TimeBucket::kCompute);
  // DualPipeV's merged chunks hide the steady state's messages (dualpipe_v_makespan).
  const double steady_msgs = p.schedule == Schedule::kDualPipeV ? 0.0 : 2.0 * (m - 1);
  const double msgs = pp > 1 ? (steady_msgs + 2.0 * (pp - 1)) * t_pp : 0.0;
  bk[kPp] += from_secs(msgs);
  bk[kDp] += from_secs(tail0);
  bk[kCompute] += from_secs(optimizer0);
  Time used{0};
  for (std::size_t k = 0; k < sim::kNumTimeBuckets; ++k) {
    if (k != kIdle) used += bk[k];
  }
  bk[kIdle] = out.step_time > used ? out.step_time - used : Time(0);
  out.bubble_fraction = seconds > 0 ? to_seconds(bk[kIdle]) / seconds : 0.0;
  return out;
}

}  // namespace planner::search
