// The ranking table: one row per ranked plan of a sweep (GPUs, effective tokens per dollar, cost
// and time to train, step time, MFU, peak memory and headroom, tokens/s; then the axes, schedule,
// recompute, ZeRO, rank order and overlap).
// Qt::DisplayRole gives the text, Qt::UserRole the number to sort by. Cells marked different
// (a what-if comparison) get a highlighted background.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <set>
#include <utility>
#include <vector>

#include "planner/search/sweep.hpp"

namespace planner::gui {

QString format_time_s(double seconds);  // "12.3 ms", "4.5 s", "3.2 days"
QString format_usd(double usd);         // "$1.23 M", "$4.5 k", "$12.34"

class RankingModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  // The decision columns first (what the plan buys: GPUs, tokens per dollar, cost, time, step
  // time, MFU, memory), the configuration after.
  enum Column {
    kPosition,
    kPlan,
    kGpus,
    kTokensPerUsd,
    kCost,
    kTimeToTrain,
    kStepTime,
    kMfu,
    kPeakMemory,
    kHeadroom,
    kTokensPerSecond,
    kTp,
    kPp,
    kDp,
    kCp,
    kEp,
    kMicroBatch,
    kSchedule,
    kRecompute,
    kZero,
    kOrder,
    kOverlap,
    kTier,
    kNote,
    kColumnCount
  };

  explicit RankingModel(QObject* parent = nullptr);
  void set_plans(std::vector<search::RankedPlan> plans);
  const std::vector<search::RankedPlan>& plans() const { return plans_; }
  // Cells (row, column) drawn highlighted.
  void set_differences(std::set<std::pair<int, int>> cells);
  const std::set<std::pair<int, int>>& differences() const { return differences_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  // The text of a cell (DisplayRole).
  QString text(int row, int column) const;

 private:
  QVariant sort_value(const search::RankedPlan& p, int column) const;
  std::vector<search::RankedPlan> plans_;
  std::set<std::pair<int, int>> differences_;
};

// Cells of `next` whose text differs from the same position in `base` (rows beyond `base` differ
// everywhere).
std::set<std::pair<int, int>> ranking_differences(const RankingModel& base,
                                                  const RankingModel& next);

}  // namespace planner::gui
