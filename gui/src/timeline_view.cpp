#include "timeline_view.hpp"

#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QResizeEvent>
#include <QScrollBar>
#include <QWheelEvent>
#include <algorithm>

#include "planner/core/program.hpp"

namespace planner::gui {

namespace {

// Scene geometry: the step spans kSceneWidth units at zoom 1; each rank has two lanes.
constexpr double kSceneWidth = 1600;
constexpr double kLabelWidth = 130;
constexpr double kLaneHeight = 16;
constexpr double kRowGap = 10;
constexpr double kWheelZoom = 1.25;
constexpr double kMargin = 10;
// The narrowest fit: a step never shrinks below a twentieth of its scene width.
constexpr double kMinFit = 0.05;

QColor phase_color(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return {66, 133, 244};
    case Phase::kBackwardInput:
      return {52, 168, 83};
    case Phase::kBackwardWeight:
      return {20, 110, 50};
    case Phase::kRecompute:
      return {251, 188, 4};
    case Phase::kOptimizer:
      return {120, 120, 120};
  }
  return Qt::black;
}

QColor comm_color(sim::TimeBucket bucket) {
  switch (bucket) {
    case sim::TimeBucket::kTp:
      return {234, 67, 53};
    case sim::TimeBucket::kCp:
      return {255, 112, 67};
    case sim::TimeBucket::kEp:
      return {171, 71, 188};
    case sim::TimeBucket::kPp:
      return {0, 172, 193};
    case sim::TimeBucket::kDp:
      return {121, 85, 72};
    default:
      return {158, 158, 158};
  }
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QGraphicsView(parent) {
  setScene(new QGraphicsScene(this));
  setDragMode(QGraphicsView::ScrollHandDrag);
  setAlignment(Qt::AlignLeft | Qt::AlignTop);
  setRenderHint(QPainter::Antialiasing, false);
}

void TimelineView::clear_run(const QString& why) {
  scene()->clear();
  labels_.clear();
  blocks_ = 0;
  scene()->addSimpleText(why);
}

void TimelineView::set_run(const sim::SimResult& result) {
  scene()->clear();
  labels_.clear();
  blocks_ = 0;
  zoom_ = 1.0;
  if (!result.simulated || result.step_time <= Time()) {
    clear_run(result.out_of_memory ? "does not fit in memory: not simulated" : "not simulated");
    return;
  }
  const double scale = kSceneWidth / static_cast<double>(result.step_time.raw());
  double y = 0;
  QPen no_pen(Qt::NoPen);
  for (const sim::RankRun& rank : result.ranks) {
    auto* label = scene()->addSimpleText(
        QString("rank %1 · stage %2\ncompute / comm").arg(rank.rank).arg(rank.stage));
    label->setFlag(QGraphicsItem::ItemIgnoresTransformations);
    label->setPos(-kLabelWidth, y);
    labels_.push_back(label);
    scene()->addRect(0, y, kSceneWidth, kLaneHeight, QPen(QColor(220, 220, 220)),
                     QBrush(QColor(250, 250, 250)));
    scene()->addRect(0, y + kLaneHeight, kSceneWidth, kLaneHeight, QPen(QColor(220, 220, 220)),
                     QBrush(QColor(245, 245, 250)));
    for (const sim::OpTiming& op : rank.ops) {
      const double x0 = static_cast<double>(op.start.raw()) * scale;
      const double w = std::max(static_cast<double>((op.end - op.start).raw()) * scale, 0.2);
      const bool compute = op.stream == Stream::kCompute;
      const QColor color =
          compute ? phase_color(op.id.phase()) : comm_color(sim::bucket_of(op.stream));
      auto* item = scene()->addRect(x0, compute ? y : y + kLaneHeight, w, kLaneHeight, no_pen,
                                    QBrush(color));
      item->setToolTip(QString::fromStdString(to_string(op.id)) +
                       QString(" · %1 µs").arg(to_microseconds(op.end - op.start), 0, 'f', 1));
      ++blocks_;
    }
    y += 2 * kLaneHeight + kRowGap;
  }
  auto* axis = scene()->addSimpleText(
      QString("0 … %1 ms (one step)").arg(to_milliseconds(result.step_time), 0, 'f', 2));
  axis->setFlag(QGraphicsItem::ItemIgnoresTransformations);
  axis->setPos(0, y);
  scene()->setSceneRect(scene()->itemsBoundingRect().adjusted(-10, -10, 10, 10));
  apply_zoom();
  horizontalScrollBar()->setValue(horizontalScrollBar()->minimum());
}

void TimelineView::apply_zoom() {
  resetTransform();
  const double fit =
      std::max(kMinFit, (viewport()->width() - kLabelWidth - 2 * kMargin) / kSceneWidth);
  scale(fit * zoom_, 1.0);
  for (QGraphicsItem* label : labels_)
    label->setX(-kLabelWidth / (fit * zoom_));
  if (!labels_.empty()) {
    QRectF r = scene()->sceneRect();
    r.setLeft(-(kLabelWidth + kMargin) / (fit * zoom_));
    scene()->setSceneRect(r);
  }
}

void TimelineView::resizeEvent(QResizeEvent* event) {
  QGraphicsView::resizeEvent(event);
  apply_zoom();
}

void TimelineView::zoom_by(double factor) {
  zoom_ *= factor;
  apply_zoom();
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  zoom_by(event->angleDelta().y() > 0 ? kWheelZoom : 1.0 / kWheelZoom);
  event->accept();
}

}  // namespace planner::gui
