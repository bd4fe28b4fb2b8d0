#include "topology_view.hpp"

#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QResizeEvent>
#include <algorithm>

#include "planner/core/rank_grid.hpp"

namespace planner::gui {

namespace {

constexpr double kGpuSize = 22;
constexpr double kGpuGap = 4;
constexpr double kNodePad = 8;
constexpr double kNodeGap = 14;
constexpr int kNodesPerRow = 8;
// Nodes drawn at most; a larger cluster is summarised below the drawing.
constexpr int kMaxNodesDrawn = 64;

}  // namespace

TopologyView::TopologyView(QWidget* parent) : QGraphicsView(parent) {
  setScene(new QGraphicsScene(this));
  setRenderHint(QPainter::Antialiasing);
  setDragMode(QGraphicsView::ScrollHandDrag);
}

void TopologyView::set_plan(const topo::Cluster& cluster, const ParallelConfig& parallel,
                            const std::vector<int>& gpu_of_rank) {
  scene()->clear();
  highlighted_ = 0;
  const int per_node = cluster.gpus_per_node();
  std::vector<int> stage_of_gpu(static_cast<std::size_t>(cluster.num_gpus()), -1);
  std::vector<int> mark(static_cast<std::size_t>(cluster.num_gpus()), 0);  // 1 tp, 2 dp, 3 both
  auto grid = RankGrid::dense(parallel);
  if (grid) {
    for (int r = 0; r < grid->world_size() && r < static_cast<int>(gpu_of_rank.size()); ++r) {
      stage_of_gpu[static_cast<std::size_t>(gpu_of_rank[static_cast<std::size_t>(r)])] =
          grid->coordinate(r, Axis::kPp);
    }
    for (auto [axes, bit] : {std::pair{"tp", 1}, std::pair{"dp", 2}}) {
      auto group = grid->group_of(0, axes);
      if (!group) continue;
      for (int r : *group)
        mark[static_cast<std::size_t>(gpu_of_rank[static_cast<std::size_t>(r)])] |= bit;
    }
  }
  const int nodes = std::min(cluster.num_nodes(), kMaxNodesDrawn);
  const int cols = std::min(per_node, 8);
  const int rows = (per_node + cols - 1) / cols;
  const double node_w = 2 * kNodePad + cols * (kGpuSize + kGpuGap);
  const double node_h = 2 * kNodePad + 14 + rows * (kGpuSize + kGpuGap);
  for (int n = 0; n < nodes; ++n) {
    const double nx = (n % kNodesPerRow) * (node_w + kNodeGap);
    const double ny = (n / kNodesPerRow) * (node_h + kNodeGap);
    scene()->addRect(nx, ny, node_w, node_h, QPen(Qt::darkGray), QBrush(QColor(245, 245, 245)));
    scene()->addSimpleText(QString("node %1").arg(n))->setPos(nx + kNodePad, ny + 2);
    for (int g = 0; g < per_node; ++g) {
      const int gpu = n * per_node + g;
      const int stage = stage_of_gpu[static_cast<std::size_t>(gpu)];
      const QColor fill =
          stage < 0 ? QColor(255, 255, 255) : QColor::fromHsv((stage * 47) % 360, 120, 235);
      QPen pen(Qt::gray);
      const int m = mark[static_cast<std::size_t>(gpu)];
      if (m != 0) {
        pen = QPen(m == 2 ? QColor(30, 90, 220) : QColor(220, 30, 30), 3);
        ++highlighted_;
      }
      const double gx = nx + kNodePad + (g % cols) * (kGpuSize + kGpuGap);
      const double gy = ny + kNodePad + 14 + (g / cols) * (kGpuSize + kGpuGap);
      auto* item = scene()->addRect(gx, gy, kGpuSize, kGpuSize, pen, QBrush(fill));
      item->setToolTip(
          QString("GPU %1%2")
              .arg(gpu)
              .arg(stage < 0 ? QString(" (idle)") : QString(" · pipeline stage %1").arg(stage)));
    }
  }
  const double bottom = ((nodes + kNodesPerRow - 1) / kNodesPerRow) * (node_h + kNodeGap);
  QString caption =
      QString::fromStdString(cluster.spec().name + " · " + cluster.spec().fabric_summary()) +
      QString(" · %1 nodes × %2 GPUs").arg(cluster.num_nodes()).arg(per_node);
  if (cluster.num_nodes() > nodes) caption += QString(" (first %1 drawn)").arg(nodes);
  caption += "\nfill: pipeline stage · red outline: tp group of rank 0 · blue: its dp group";
  scene()->addSimpleText(caption)->setPos(0, bottom);
  scene()->setSceneRect(scene()->itemsBoundingRect().adjusted(-10, -10, 10, 10));
  fitInView(sceneRect(), Qt::KeepAspectRatio);
}

void TopologyView::resizeEvent(QResizeEvent* event) {
  QGraphicsView::resizeEvent(event);
  if (!scene()->items().isEmpty()) fitInView(sceneRect(), Qt::KeepAspectRatio);
}

}  // namespace planner::gui
