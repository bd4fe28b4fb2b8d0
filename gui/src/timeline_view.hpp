// One simulated training step as a pipeline timeline: a row per simulated rank (one per pipeline
// stage) with a compute lane (forward, backward, weight-gradient, recompute, optimizer blocks,
// colour by phase) and a communication lane (colour by axis); gaps on the compute lane are the
// pipeline bubbles. The mouse wheel (or zoom_by()) zooms the time axis.
#pragma once

#include <QGraphicsView>
#include <vector>

#include "planner/sim/simulate.hpp"

namespace planner::gui {

class TimelineView : public QGraphicsView {
  Q_OBJECT
 public:
  explicit TimelineView(QWidget* parent = nullptr);
  void set_run(const sim::SimResult& result);
  void clear_run(const QString& why);
  // Multiplies the horizontal zoom by `factor` (> 1 zooms in).
  void zoom_by(double factor);
  double zoom() const { return zoom_; }
  int blocks() const { return blocks_; }  // op blocks drawn

 protected:
  void wheelEvent(QWheelEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  // Fits the step to the viewport's width, times zoom().
  void apply_zoom();
  double zoom_ = 1.0;
  // Row labels: unscaled text, kept left of the time axis at every zoom.
  std::vector<QGraphicsItem*> labels_;
  int blocks_ = 0;
};

}  // namespace planner::gui
