// The app's charts (Qt Charts), each built from library results:
//   memory      per pipeline stage, stacked weights / gradients / optimizer / activations /
//               communication buffers / overhead (GiB), against the GPU's HBM line
//   time        one step's time per bucket (compute, exposed communication per axis, idle), the
//               simulation beside the analytic estimate, milliseconds per worker
//   pareto      cost vs time to train of the ranked plans and the Pareto frontier
//   accuracy    predicted vs measured time per op kind of an executed run, against y = x
#pragma once

#include <QtCharts/QChart>
#include <QtCharts/QScatterSeries>
#include <vector>

#include "planner/core/memory.hpp"
#include "planner/search/sweep.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/store/comparison.hpp"

namespace planner::gui {

QChart* make_memory_chart(const MemoryReport& report);
QChart* make_time_chart(const sim::SimResult& simulated, const search::PlanMetrics& estimate);

// Points are (time to train in days, total cost in thousands of USD).
QPointF pareto_point(const search::RankedPlan& plan);
struct ParetoChart {
  QChart* chart = nullptr;
  QScatterSeries* plans = nullptr;     // every ranked plan (clickable)
  QScatterSeries* frontier = nullptr;  // the frontier's plans (clickable)
  QScatterSeries* selected = nullptr;  // the selected plan
};
ParetoChart make_pareto_chart(const std::vector<search::RankedPlan>& ranking,
                              const std::vector<search::RankedPlan>& pareto);

QChart* make_accuracy_chart(const store::RunComparison& comparison);

}  // namespace planner::gui
