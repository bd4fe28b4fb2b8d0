// Runs a sweep on a background thread (app::run_sweep(), keeping the SweepSetup so the app can
// rebuild any ranked plan), records it in the database like the CLI does (app::record_sweep()),
// and reports progress and the outcome as Qt signals on the thread that owns the runner.
// cancel() stops the sweep between work units.
#pragma once

#include <QObject>
#include <QThread>
#include <memory>
#include <optional>
#include <stop_token>

#include "planner/app/database.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/status.hpp"
#include "planner/search/sweep.hpp"

namespace planner::gui {

struct SweepOutcome {
  std::shared_ptr<const search::SweepSetup> setup;
  std::optional<search::SweepResult> result;
  Status status;                         // not ok: the sweep failed or was cancelled
  std::optional<std::int64_t> recorded;  // the run recorded in the database
  Status recording;                      // not ok: the sweep ran but recording it failed
};

// Where a finished sweep is recorded: the database (disabled: nowhere) and who asked, merged into
// the run's inputs (app::sweep_inputs()).
struct Recording {
  app::DatabaseRef db;
  Json origin = Json::object();
};

// A sweep and its recording, in this thread.
SweepOutcome run_and_record(const search::SweepRequest& request, const Recording& recording,
                            search::ProgressSink* sink, std::stop_token stop);

class SweepRunner : public QObject {
  Q_OBJECT
 public:
  explicit SweepRunner(QObject* parent = nullptr);
  ~SweepRunner() override;

  bool running() const { return thread_ != nullptr; }
  // Starts a sweep; ignored while one runs.
  void start(search::SweepRequest request, Recording recording);
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
