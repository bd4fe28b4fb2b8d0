#include "sweep_runner.hpp"

#include <QCoreApplication>
#include <QMetaObject>

namespace planner::gui {

namespace {

// Forwards progress to the runner's thread; calls arrive from the sweep's workers one at a time.
class QueuedSink final : public sim::ProgressSink {
 public:
  explicit QueuedSink(SweepRunner* runner) : runner_(runner) {}
  void on_progress(const sim::SweepProgress& p) override {
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

SweepOutcome run_sweep_steps(const sim::SweepRequest& request, sim::ProgressSink* sink,
                             std::stop_token stop) {
  SweepOutcome out;
  auto run = [&]() -> Status {
    if (sink != nullptr) sink->on_progress({});
    PLANNER_ASSIGN_OR_RETURN(out.setup, sim::SweepSetup::prepare(request));
    PLANNER_ASSIGN_OR_RETURN(sim::AnalyticPartial merged,
                             sim::run_analytic(*out.setup, {}, sink, stop));
    PLANNER_ASSIGN_OR_RETURN(
        std::vector<sim::RankedPlan> simulated,
        sim::simulate_candidates(*out.setup, sim::simulation_candidates(*out.setup, merged), sink,
                                 stop));
    PLANNER_ASSIGN_OR_RETURN(sim::SweepResult result,
                             sim::finish(*out.setup, merged, std::move(simulated)));
    out.result = std::move(result);
    if (sink != nullptr) {
      sim::SweepProgress p;
      p.phase = sim::SweepPhase::kDone;
      sink->on_progress(p);
    }
    return Status::ok();
  };
  out.status = run();
  return out;
}

SweepRunner::SweepRunner(QObject* parent) : QObject(parent) {
  qRegisterMetaType<std::shared_ptr<planner::gui::SweepOutcome>>();
}

SweepRunner::~SweepRunner() {
  cancel();
  if (thread_ != nullptr) thread_->wait();
}

void SweepRunner::start(sim::SweepRequest request) {
  if (thread_ != nullptr) return;
  stop_ = std::stop_source();
  auto outcome = std::make_shared<SweepOutcome>();
  std::stop_token token = stop_.get_token();
  thread_ = QThread::create([this, outcome, token, request = std::move(request)] {
    QueuedSink sink(this);
    *outcome = run_sweep_steps(request, &sink, token);
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
