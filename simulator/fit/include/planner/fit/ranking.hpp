// Ranking accuracy: how well planner orders configurations it has measurements for. A planner
// exists to pick the fastest configuration before anyone spends the GPU-hours, so beside the
// step-time error this measures, per group of measured configurations of one job, whether the
// predicted order is the measured one and what the predicted-fastest pick costs.
//
// Groups: records with the same model (layers, hidden, heads, kv_heads, ffn_hidden, sequence,
// vocabulary), the same cluster (the record's GPU text and GPU count) and the same global batch,
// in order of first appearance. Only modelled records (accuracy.hpp) take part.
//   spearman      Spearman's rank correlation of predicted and measured step times: the Pearson
//                 correlation of their ranks, tied values sharing their mean rank; undefined for
//                 a group of fewer than two configurations or when either side is constant.
//   top-1 regret  measured time of planner's pick / measured best − 1, planner's pick being the
//                 configuration with the least predicted time; when several tie for it, the mean
//                 regret over them (the expected regret of picking one of them at random).
//                 Defined for groups of at least two configurations.
//   MAPE          mean |predicted − measured| / measured over the group's configurations.
// Means: of spearman over the groups where it is defined, of top-1 regret over the groups with at
// least two configurations; the worst regret; the overall MAPE over every modelled record.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "planner/core/published_run.hpp"
#include "planner/fit/accuracy.hpp"

namespace planner::fit {

// Spearman's rank correlation (ties share their mean rank); nullopt when a.size() != b.size(),
// fewer than 2 values, or either side has no variance.
std::optional<double> spearman(std::span<const double> a, std::span<const double> b);

// Top-1 regret of picking the least `predicted` among configurations whose measured times are
// `measured` (see the header); nullopt for fewer than 2 configurations or mismatched sizes.
std::optional<double> top1_regret(std::span<const double> predicted,
                                  std::span<const double> measured);

struct RankingGroup {
  std::string model;    // "GPT L20 h2048 (L20 h2048 a16 s1024 V50257)"
  std::string cluster;  // "8 x A100-SXM4-40GB"
  std::int64_t global_batch = 0;
  std::vector<std::size_t> runs;  // indices into the accuracy report's runs
  std::optional<double> spearman;
  std::optional<double> top1_regret;
  double mape_percent = 0;
  std::string picked;  // id of the predicted-fastest configuration (the first on a tie)
  std::string best;    // id of the measured-fastest configuration
};

struct RankingReport {
  AccuracyReport accuracy;
  std::vector<RankingGroup> groups;
  int ranked_groups = 0;  // groups with at least two configurations
  std::optional<double> mean_spearman;
  std::optional<double> mean_top1_regret;
  double worst_top1_regret = 0;
  std::string worst_group;  // "model, cluster, global batch" of the worst regret
};

// Groups the modelled records of `accuracy` (which evaluated `runs`, in that order) and scores
// each group.
RankingReport rank_accuracy(std::span<const PublishedRun> runs, AccuracyReport accuracy);

}  // namespace planner::fit
