#include "sweep_runner.hpp"

#include <QCoreApplication>
#include <QMetaObject>

#include "planner/app/record.hpp"
#include "planner/app/sweep.hpp"

namespace planner::gui {

namespace {

// Forwards progress to the runner's thread; calls arrive from the sweep's workers one at a time.
class QueuedSink final : public search::ProgressSink {
 public:
  explicit QueuedSink(SweepRunner* runner) : runner_(runner) {}
  void on_progress(const search::SweepProgress& p) override {
    const int phase = static_cast<int>(p.phase);
    const qint64 done = p.done;
    const qint64 total = p.total;
    QMetaObject::invokeMethod(
        runner_, [r = runner_, phase, done, total] { emit r->progress(phase, done, total); },
        Qt::QueuedConnection);
  }

 private:
  SweepRunner* runner_;
};

}  // namespace

SweepOutcome run_and_record(const search::SweepRequest& request, const Recording& recording,
                            search::ProgressSink* sink, std::stop_token stop) {
  SweepOutcome out;
  app::SweepRunOptions options;
  options.stop = stop;
  auto run = app::run_sweep(request, sink, options);
  if (!run) {
    out.status = run.status();
    return out;
  }
  out.setup = run->setup;
  out.result = std::move(run->result);
  auto recorded = [&]() -> Result<std::optional<std::int64_t>> {
    PLANNER_ASSIGN_OR_RETURN(auto db, app::open_recording_db(recording.db));
    if (!db) return std::optional<std::int64_t>();
    const Json inputs = app::sweep_inputs(out.setup->request(), recording.origin);
    PLANNER_ASSIGN_OR_RETURN(store::RunId id,
                             app::record_sweep(*db, *out.setup, *out.result, inputs));
    return std::optional<std::int64_t>(id.value);
  }();
  if (recorded) {
    out.recorded = *recorded;
  } else {
    out.recording = recorded.status();
  }
  return out;
}

SweepRunner::SweepRunner(QObject* parent) : QObject(parent) {
  qRegisterMetaType<std::shared_ptr<planner::gui::SweepOutcome>>();
}

SweepRunner::~SweepRunner() {
  cancel();
  if (thread_ != nullptr) thread_->wait();
}

void SweepRunner::start(search::SweepRequest request, Recording recording) {
  if (thread_ != nullptr) return;
  stop_ = std::stop_source();
  auto outcome = std::make_shared<SweepOutcome>();
  std::stop_token token = stop_.get_token();
  thread_ = QThread::create(
      [this, outcome, token, request = std::move(request), recording = std::move(recording)] {
        QueuedSink sink(this);
        *outcome = run_and_record(request, recording, &sink, token);
      });
  connect(thread_, &QThread::finished, this, [this, outcome] {
    thread_->deleteLater();
    thread_ = nullptr;
    emit finished(outcome);
  });
  thread_->start();
}

void SweepRunner::cancel() {
  if (thread_ != nullptr) stop_.request_stop();
}

void SweepRunner::wait() {
  while (thread_ != nullptr) {
    thread_->wait(10);
    QCoreApplication::processEvents();
  }
}

}  // namespace planner::gui
