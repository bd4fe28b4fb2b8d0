// The cluster of a plan: its nodes (boxes) and GPUs (squares) coloured by the pipeline stage of the
// rank placed there (default placement: the plan's rank order over the cluster), with the tensor-
// parallel group of rank 0 outlined in red and its data-parallel group in blue.
#pragma once

#include <QGraphicsView>
#include <vector>

#include "planner/core/parallel_config.hpp"
#include "planner/topo/cluster.hpp"

namespace planner::gui {

class TopologyView : public QGraphicsView {
  Q_OBJECT
 public:
  explicit TopologyView(QWidget* parent = nullptr);
  void set_plan(const topo::Cluster& cluster, const ParallelConfig& parallel,
                const std::vector<int>& gpu_of_rank);
  int highlighted_gpus() const { return highlighted_; }

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  int highlighted_ = 0;
};

}  // namespace planner::gui
