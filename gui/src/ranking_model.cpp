#include "ranking_model.hpp"

#include <QBrush>
#include <QColor>
#include <array>
#include <utility>

#include "planner/core/enums.hpp"

namespace planner::gui {

namespace {

constexpr double kSecondsPerDay = 86400;
constexpr double kMillion = 1e6;
constexpr double kThousand = 1e3;
// Background of a cell that changed in a what-if comparison (a light amber).
const QColor kChangedCell(255, 224, 130);

QString qs(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<int>(s.size()));
}

double headroom_gib(const search::RankedPlan& p) {
  const search::PlanMetrics& m = p.metrics();
  return to_GiB(m.capacity) - to_GiB(m.peak_memory);
}

}  // namespace

QString format_time_s(double seconds) {
  if (seconds >= kSecondsPerDay) return QString::number(seconds / kSecondsPerDay, 'f', 1) + " days";
  if (seconds >= 1) return QString::number(seconds, 'f', 2) + " s";
  return QString::number(seconds * 1e3, 'f', 1) + " ms";
}

QString format_usd(double usd) {
  if (usd >= kMillion) return "$" + QString::number(usd / kMillion, 'f', 2) + " M";
  if (usd >= kThousand) return "$" + QString::number(usd / kThousand, 'f', 1) + " k";
  return "$" + QString::number(usd, 'f', 2);
}

RankingModel::RankingModel(QObject* parent) : QAbstractTableModel(parent) {}

void RankingModel::set_plans(std::vector<search::RankedPlan> plans) {
  beginResetModel();
  plans_ = std::move(plans);
  differences_.clear();
  endResetModel();
}

void RankingModel::set_differences(std::set<std::pair<int, int>> cells) {
  differences_ = std::move(cells);
  if (!plans_.empty()) {
    emit dataChanged(index(0, 0), index(rowCount() - 1, kColumnCount - 1), {Qt::BackgroundRole});
  }
}

int RankingModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(plans_.size());
}

int RankingModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QString RankingModel::text(int row, int column) const {
  const search::RankedPlan& p = plans_[static_cast<std::size_t>(row)];
  const ParallelConfig& c = p.parallel;
  const search::PlanMetrics& m = p.metrics();
  switch (column) {
    case kPosition:
      return QString::number(p.position);
    case kPlan:
      return QString::fromStdString(short_label(c));
    case kGpus:
      return QString::number(c.world_size());
    case kPeakMemory:
      return QString::number(to_GiB(m.peak_memory), 'f', 1) + " GiB";
    case kTp:
      return QString::number(c.tp);
    case kPp:
      return QString::number(c.pp);
    case kDp:
      return QString::number(c.dp);
    case kCp:
      return QString::number(c.cp);
    case kEp:
      return QString::number(c.ep);
    case kMicroBatch:
      return QString::number(c.micro_batch_size);
    case kSchedule:
      return qs(to_string(c.schedule)) +
             (c.virtual_stages > 1 ? QString(" v%1").arg(c.virtual_stages) : QString());
    case kRecompute:
      return qs(to_string(c.recompute));
    case kZero:
      return QString::number(c.zero_stage);
    case kOrder:
      return QString::fromStdString(c.order);
    case kOverlap:
      return c.overlap_grad_reduce ? QString("on") : QString("off");
    case kTier:
      return qs(to_string(p.tier));
    case kStepTime:
      return format_time_s(to_seconds(m.step_time));
    case kTokensPerSecond:
      return QString::number(m.tokens_per_second, 'f', 0);
    case kMfu:
      return QString::number(m.mfu * 100, 'f', 1) + " %";
    case kHeadroom:
      return QString::number(headroom_gib(p), 'f', 1) + " GiB";
    case kTokensPerUsd:
      return QString::number(p.economics.tokens_per_usd, 'f', 0);
    case kTimeToTrain:
      return format_time_s(p.economics.time_to_train_s);
    case kCost:
      return format_usd(p.economics.total_cost.raw());
    case kNote:
      return QString::fromStdString(p.note);
    default:
      return {};
  }
}

QVariant RankingModel::sort_value(const search::RankedPlan& p, int column) const {
  const search::PlanMetrics& m = p.metrics();
  switch (column) {
    case kPosition:
      return p.position;
    case kGpus:
      return static_cast<qlonglong>(p.parallel.world_size());
    case kPeakMemory:
      return to_GiB(m.peak_memory);
    case kTp:
      return p.parallel.tp;
    case kPp:
      return p.parallel.pp;
    case kDp:
      return p.parallel.dp;
    case kCp:
      return p.parallel.cp;
    case kEp:
      return p.parallel.ep;
    case kMicroBatch:
      return static_cast<qlonglong>(p.parallel.micro_batch_size);
    case kZero:
      return p.parallel.zero_stage;
    case kStepTime:
      return to_seconds(m.step_time);
    case kTokensPerSecond:
      return m.tokens_per_second;
    case kMfu:
      return m.mfu;
    case kHeadroom:
      return headroom_gib(p);
    case kTokensPerUsd:
      return p.economics.tokens_per_usd;
    case kTimeToTrain:
      return p.economics.time_to_train_s;
    case kCost:
      return p.economics.total_cost.raw();
    default:
      return {};
  }
}

QVariant RankingModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  if (role == Qt::DisplayRole) return text(index.row(), index.column());
  if (role == Qt::UserRole) {
    QVariant v = sort_value(plans_[static_cast<std::size_t>(index.row())], index.column());
    return v.isValid() ? v : QVariant(text(index.row(), index.column()));
  }
  if (role == Qt::BackgroundRole && differences_.count({index.row(), index.column()}) != 0) {
    return QBrush(kChangedCell);
  }
  if (role == Qt::TextAlignmentRole && index.column() != kPlan && index.column() != kNote) {
    return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

QVariant RankingModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return {};
  static const std::array<std::pair<int, const char*>, kColumnCount> kHeaders{
      {{kPosition, "#"},
       {kPlan, "plan"},
       {kGpus, "GPUs"},
       {kTokensPerUsd, "tokens/$"},
       {kCost, "cost"},
       {kTimeToTrain, "time to train"},
       {kStepTime, "step time"},
       {kMfu, "MFU"},
       {kPeakMemory, "memory"},
       {kHeadroom, "headroom"},
       {kTokensPerSecond, "tokens/s"},
       {kTp, "tp"},
       {kPp, "pp"},
       {kDp, "dp"},
       {kCp, "cp"},
       {kEp, "ep"},
       {kMicroBatch, "mbs"},
       {kSchedule, "schedule"},
       {kRecompute, "recompute"},
       {kZero, "ZeRO"},
       {kOrder, "rank order"},
       {kOverlap, "dp overlap"},
       {kTier, "tier"},
       {kNote, "note"}}};
  for (const auto& [column, header] : kHeaders) {
    if (column == section) return QString(header);
  }
  return QString();
}

std::set<std::pair<int, int>> ranking_differences(const RankingModel& base,
                                                  const RankingModel& next) {
  std::set<std::pair<int, int>> out;
  for (int r = 0; r < next.rowCount(); ++r) {
    for (int c = 0; c < RankingModel::kColumnCount; ++c) {
      if (r >= base.rowCount() || base.text(r, c) != next.text(r, c)) out.insert({r, c});
    }
  }
  return out;
}

}  // namespace planner::gui
