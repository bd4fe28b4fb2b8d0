#include "planner/core/parallel_config.hpp"

namespace planner {

std::string short_label(const ParallelConfig& p) {
  std::string s =
      "tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp) + " dp" + std::to_string(p.dp);
  if (p.cp > 1) s += " cp" + std::to_string(p.cp);
  if (p.ep > 1) s += " ep" + std::to_string(p.ep);
  if (p.etp > 0 && p.etp != p.tp) s += " etp" + std::to_string(p.etp);
  if (p.sequence_parallel) s += " sp";
  s += " mb" + std::to_string(p.micro_batch_size);
  if (p.pp > 1) {
    s += " " + std::string(to_string(p.schedule));
    if (p.schedule == Schedule::kInterleaved) s += "/v" + std::to_string(p.virtual_stages);
  }
  if (p.recompute != Recompute::kNone) s += " rc-" + std::string(to_string(p.recompute));
  if (p.zero_stage > 0) s += " zero" + std::to_string(p.zero_stage);
  if (p.offload != Offload::kNone) s += " offload-" + std::string(to_string(p.offload));
  if (p.dp_sync == DpSync::kParameterServer) s += " ps" + std::to_string(p.param_servers);
  return s;
}

}  // namespace planner
