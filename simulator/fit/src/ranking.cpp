#include "planner/fit/ranking.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

namespace planner::fit {
namespace {

// Ranks 1..n, tied values sharing their mean rank.
std::vector<double> ranks(std::span<const double> v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]])
      ++j;
    const double mean_rank = 0.5 * static_cast<double>(i + j) + 1.0;
    for (std::size_t k = i; k <= j; ++k)
      out[order[k]] = mean_rank;
    i = j + 1;
  }
  return out;
}

std::string model_key(const PublishedRun& r) {
  auto opt = [](const auto& v) { return v ? std::to_string(*v) : std::string("?"); };
  return "L" + opt(r.model.layers) + " h" + opt(r.model.hidden) + " a" + opt(r.model.heads) +
         (r.model.kv_heads ? " kv" + std::to_string(*r.model.kv_heads) : std::string()) + " f" +
         opt(r.model.ffn_hidden) + " s" + opt(r.model.seq_len) + " V" + opt(r.model.vocab);
}

}  // namespace

std::optional<double> spearman(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size() || a.size() < 2) return std::nullopt;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa <= 0 || sbb <= 0) return std::nullopt;
  return sab / std::sqrt(saa * sbb);
}

std::optional<double> top1_regret(std::span<const double> predicted,
                                  std::span<const double> measured) {
  if (predicted.size() != measured.size() || predicted.size() < 2) return std::nullopt;
  const double best = *std::min_element(measured.begin(), measured.end());
  const double pick = *std::min_element(predicted.begin(), predicted.end());
  double sum = 0;
  int picks = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i) {
    if (predicted[i] != pick) continue;
    sum += measured[i] / best - 1.0;
    ++picks;
  }
  return sum / picks;
}

RankingReport rank_accuracy(std::span<const PublishedRun> runs, AccuracyReport accuracy) {
  RankingReport out;
  std::map<std::string, PublishedRun const*> by_id;
  for (const PublishedRun& r : runs)
    by_id.emplace(r.id, &r);
  std::map<std::tuple<std::string, std::string, std::int64_t>, std::size_t> group_of;
  for (std::size_t i = 0; i < accuracy.runs.size(); ++i) {
    const RunAccuracy& a = accuracy.runs[i];
    if (!a.modelled) continue;
    const auto it = by_id.find(a.id);
    if (it == by_id.end()) continue;
    const PublishedRun& r = *it->second;
    const std::string model = (r.model.name.empty() ? std::string() : r.model.name + " (") +
                              model_key(r) + (r.model.name.empty() ? "" : ")");
    const std::string cluster =
        std::to_string(a.plan.parallel.world_size()) + " x " + r.hardware.gpu;
    const std::int64_t gbs = a.plan.training.global_batch_size;
    auto [g, fresh] = group_of.emplace(std::tuple{model_key(r), cluster, gbs}, out.groups.size());
    if (fresh) out.groups.push_back({model, cluster, gbs, {}, {}, {}, 0, {}, {}});
    out.groups[g->second].runs.push_back(i);
  }
  double spearman_sum = 0, regret_sum = 0;
  int spearman_n = 0;
  for (RankingGroup& g : out.groups) {
    std::vector<double> predicted, measured;
    double abs_error = 0;
    for (std::size_t i : g.runs) {
      const RunAccuracy& a = accuracy.runs[i];
      predicted.push_back(a.predicted);
      measured.push_back(a.published);
      abs_error += std::abs(a.error_percent);
    }
    g.mape_percent = abs_error / static_cast<double>(g.runs.size());
    const auto pick = std::min_element(predicted.begin(), predicted.end()) - predicted.begin();
    const auto best = std::min_element(measured.begin(), measured.end()) - measured.begin();
    g.picked = accuracy.runs[g.runs[static_cast<std::size_t>(pick)]].id;
    g.best = accuracy.runs[g.runs[static_cast<std::size_t>(best)]].id;
    g.spearman = spearman(predicted, measured);
    g.top1_regret = top1_regret(predicted, measured);
    if (g.spearman) {
      spearman_sum += *g.spearman;
      ++spearman_n;
    }
    if (g.top1_regret) {
      ++out.ranked_groups;
      regret_sum += *g.top1_regret;
      if (out.worst_group.empty() || *g.top1_regret > out.worst_top1_regret) {
        out.worst_top1_regret = *g.top1_regret;
        out.worst_group =
            g.model + ", " + g.cluster + ", global batch " + std::to_string(g.global_batch);
      }
    }
  }
  if (spearman_n > 0) out.mean_spearman = spearman_sum / spearman_n;
  if (out.ranked_groups > 0) out.mean_top1_regret = regret_sum / out.ranked_groups;
  out.accuracy = std::move(accuracy);
  return out;
}

}  // namespace planner::fit
