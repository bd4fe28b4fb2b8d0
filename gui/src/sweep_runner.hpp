// Runs a sweep on a background thread (the library's run_sweep() steps, keeping the SweepSetup so
// the app can rebuild any ranked plan) and reports progress and the result as Qt signals on the
// thread that owns the runner. cancel() stops the sweep between work units.
#pragma once

#include <QObject>
#include <QThread>
#include <memory>
#include <optional>
#include <stop_token>

#include "planner/core/status.hpp"
#include "planner/sim/sweep.hpp"

namespace planner::gui {

struct SweepOutcome {
  std::shared_ptr<const sim::SweepSetup> setup;
  std::optional<sim::SweepResult> result;
  Status status;  // not ok: the sweep failed or was cancelled
};

// Every step of run_sweep() in order, with `setup` kept (sweep.hpp).
SweepOutcome run_sweep_steps(const sim::SweepRequest& request, sim::ProgressSink* sink,
                             std::stop_token stop);

class SweepRunner : public QObject {
  Q_OBJECT
 public:
  explicit SweepRunner(QObject* parent = nullptr);
  ~SweepRunner() override;

  bool running() const { return thread_ != nullptr; }
  // Starts a sweep; ignored while one runs.
  void start(sim::SweepRequest request);
  void cancel();
  // Blocks until the running sweep (if any) has ended and its signal was delivered.
  void wait();

 signals:
  // `done` of `total` in `phase` (sweep.hpp's SweepPhase names).
  void progress(int phase, qint64 done, qint64 total);
  void finished(std::shared_ptr<planner::gui::SweepOutcome> outcome);

 private:
  QThread* thread_ = nullptr;
  std::stop_source stop_;
};

}  // namespace planner::gui
