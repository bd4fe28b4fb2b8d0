#include "charts.hpp"

#include <QtCharts/QBarCategoryAxis>
#include <QtCharts/QBarSet>
#include <QtCharts/QHorizontalBarSeries>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QLineSeries>
#include <QtCharts/QLogValueAxis>
#include <QtCharts/QStackedBarSeries>
#include <QtCharts/QValueAxis>
#include <algorithm>

#include "planner/core/enums.hpp"
#include "planner/sim/program_runner.hpp"

namespace planner::gui {

namespace {

constexpr double kSecondsPerDay = 86400;
constexpr double kUsdPerThousand = 1e3;

QChart* new_chart(const QString& title) {
  auto* chart = new QChart;
  chart->setTitle(title);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setAnimationOptions(QChart::NoAnimation);
  return chart;
}

}  // namespace

QChart* make_memory_chart(const MemoryReport& report) {
  QChart* chart = new_chart("Memory per pipeline stage (GiB per GPU) vs HBM");
  chart->legend()->setAlignment(Qt::AlignRight);
  auto* series = new QStackedBarSeries;
  struct Part {
    const char* name;
    Bytes StageMemory::*member;
  };
  const Part parts[] = {
      {"weights", &StageMemory::weights},           {"gradients", &StageMemory::gradients},
      {"optimizer", &StageMemory::optimizer},       {"activations", &StageMemory::activations},
      {"comm buffers", &StageMemory::comm_buffers}, {"overhead", &StageMemory::overhead}};
  QStringList stages;
  double top = to_GiB(report.capacity);
  for (const StageMemory& s : report.stages) {
    stages << QString("stage %1").arg(s.stage);
    top = std::max(top, to_GiB(s.total()));
  }
  for (const Part& part : parts) {
    auto* set = new QBarSet(part.name);
    for (const StageMemory& s : report.stages)
      *set << to_GiB(s.*(part.member));
    series->append(set);
  }
  chart->addSeries(series);
  auto* x = new QBarCategoryAxis;
  x->append(stages);
  auto* y = new QValueAxis;
  y->setRange(0, top * 1.1);
  y->setTitleText("GiB");
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  if (report.capacity > Bytes()) {
    // The HBM line spans the categories on a hidden value axis of the same extent.
    auto* hbm = new QLineSeries;
    hbm->setName(QString("HBM %1 GiB").arg(to_GiB(report.capacity), 0, 'f', 0));
    const double n = static_cast<double>(report.stages.size());
    hbm->append(-0.5, to_GiB(report.capacity));
    hbm->append(n - 0.5, to_GiB(report.capacity));
    QPen pen(Qt::red);
    pen.setWidth(2);
    pen.setStyle(Qt::DashLine);
    hbm->setPen(pen);
    chart->addSeries(hbm);
    auto* hx = new QValueAxis;
    hx->setRange(-0.5, n - 0.5);
    hx->setVisible(false);
    chart->addAxis(hx, Qt::AlignTop);
    hbm->attachAxis(hx);
    hbm->attachAxis(y);
  }
  return chart;
}

QChart* make_time_chart(const sim::SimResult& simulated, const search::PlanMetrics& estimate) {
  QChart* chart = new_chart("Step time by bucket: compute vs exposed communication per axis (ms)");
  auto* series = new QHorizontalBarSeries;
  auto* sim_set = new QBarSet("simulated (mean per worker)");
  auto* est_set = new QBarSet("analytic estimate (stage 0)");
  QStringList names;
  double top = 0;
  for (std::size_t b = 0; b < sim::kNumTimeBuckets; ++b) {
    const auto bucket = static_cast<sim::TimeBucket>(b);
    names << QString::fromUtf8(to_string(bucket).data());
    const double s = simulated.simulated ? to_milliseconds(simulated.mean_buckets[b]) : 0.0;
    const double e = to_milliseconds(estimate.buckets[b]);
    *sim_set << s;
    *est_set << e;
    top = std::max({top, s, e});
  }
  series->append(sim_set);
  series->append(est_set);
  chart->addSeries(series);
  auto* y = new QBarCategoryAxis;
  y->append(names);
  auto* x = new QValueAxis;
  x->setRange(0, top > 0 ? top * 1.1 : 1);
  x->setTitleText("ms per step");
  chart->addAxis(y, Qt::AlignLeft);
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  series->attachAxis(y);
  return chart;
}

QPointF pareto_point(const search::RankedPlan& plan) {
  return {plan.economics.time_to_train_s / kSecondsPerDay,
          plan.economics.total_cost.raw() / kUsdPerThousand};
}

ParetoChart make_pareto_chart(const std::vector<search::RankedPlan>& ranking,
                              const std::vector<search::RankedPlan>& pareto) {
  ParetoChart out;
  out.chart = new_chart("Cost vs time to train: ranked plans and the Pareto frontier");
  out.plans = new QScatterSeries;
  out.plans->setName("ranked plans");
  out.plans->setMarkerSize(8);
  out.frontier = new QScatterSeries;
  out.frontier->setName("Pareto frontier");
  out.frontier->setMarkerSize(11);
  out.frontier->setColor(QColor(220, 80, 20));
  auto* line = new QLineSeries;
  line->setName("frontier");
  line->setColor(QColor(220, 80, 20));
  out.selected = new QScatterSeries;
  out.selected->setName("selected");
  out.selected->setMarkerSize(16);
  out.selected->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  out.selected->setColor(QColor(30, 30, 30, 140));
  double x0 = 1e300, x1 = 0, y0 = 1e300, y1 = 0;
  auto extend = [&](QPointF p) {
    x0 = std::min(x0, p.x());
    x1 = std::max(x1, p.x());
    y0 = std::min(y0, p.y());
    y1 = std::max(y1, p.y());
  };
  for (const search::RankedPlan& p : ranking) {
    out.plans->append(pareto_point(p));
    extend(pareto_point(p));
  }
  for (const search::RankedPlan& p : pareto) {
    out.frontier->append(pareto_point(p));
    line->append(pareto_point(p));
    extend(pareto_point(p));
  }
  for (QAbstractSeries* s :
       std::initializer_list<QAbstractSeries*>{out.plans, line, out.frontier, out.selected}) {
    out.chart->addSeries(s);
  }
  auto* x = new QValueAxis;
  auto* y = new QValueAxis;
  if (x1 < x0) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  const double dx = std::max((x1 - x0) * 0.08, 1e-3), dy = std::max((y1 - y0) * 0.08, 1e-3);
  x->setRange(std::max(0.0, x0 - dx), x1 + dx);
  y->setRange(std::max(0.0, y0 - dy), y1 + dy);
  x->setTitleText("time to train (days)");
  y->setTitleText("total cost (thousand USD)");
  out.chart->addAxis(x, Qt::AlignBottom);
  out.chart->addAxis(y, Qt::AlignLeft);
  for (QLegendMarker* m : out.chart->legend()->markers(line))
    m->setVisible(false);
  for (QAbstractSeries* s : out.chart->series()) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  return out;
}

QChart* make_accuracy_chart(const store::RunComparison& comparison) {
  QChart* chart = new_chart(QString("Run %1: predicted vs measured per op kind (ms per step)")
                                .arg(comparison.measured_run.value));
  auto* points = new QScatterSeries;
  points->setName("op kinds");
  points->setMarkerSize(10);
  double top = 0;
  for (const store::OpKindComparison& k : comparison.by_op_kind) {
    const double m = to_milliseconds(k.measured), p = to_milliseconds(k.predicted);
    points->append(m, p);
    top = std::max({top, m, p});
  }
  if (comparison.measured_step_time && comparison.predicted_step_time) {
    auto* step = new QScatterSeries;
    step->setName("step time");
    step->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    step->setMarkerSize(12);
    const double m = to_milliseconds(*comparison.measured_step_time);
    const double p = to_milliseconds(*comparison.predicted_step_time);
    step->append(m, p);
    top = std::max({top, m, p});
    chart->addSeries(step);
  }
  top = top > 0 ? top * 1.1 : 1;
  auto* diagonal = new QLineSeries;
  diagonal->setName("y = x");
  diagonal->append(0, 0);
  diagonal->append(top, top);
  QPen pen(Qt::gray);
  pen.setStyle(Qt::DashLine);
  diagonal->setPen(pen);
  chart->addSeries(points);
  chart->addSeries(diagonal);
  auto* x = new QValueAxis;
  auto* y = new QValueAxis;
  x->setRange(0, top);
  y->setRange(0, top);
  x->setTitleText("measured (ms)");
  y->setTitleText("predicted (ms)");
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QAbstractSeries* s : chart->series()) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  return chart;
}

}  // namespace planner::gui
