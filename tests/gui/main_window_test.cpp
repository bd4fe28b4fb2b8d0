// planner-gui under QT_QPA_PLATFORM=offscreen: the app starts; a preset scenario's sweep fills the
// ranking; selecting a plan draws its memory chart, timeline and topology; the trade-off chart
// selects plans; a what-if produces the comparison; a bad field shows the CLI's error next to it;
// an executed run's measurements appear in the history. Each main view is saved as a PNG under
// <build>/gui-screenshots/.
#include <QDir>
#include <QHeaderView>
#include <QProgressBar>
#include <QSortFilterProxyModel>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtCharts/QAbstractBarSeries>
#include <QtCharts/QBarSet>
#include <QtCharts/QChartView>
#include <QtCharts/QScatterSeries>
#include <QtTest/QtTest>

#include "charts.hpp"
#include "main_window.hpp"
#include "planner/app/defaults.hpp"
#include "planner/core/catalog.hpp"
#include "planner/core/loaders.hpp"
#include "planner/search/sweep_spec.hpp"
#include "planner/store/store.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "ranking_model.hpp"
#include "timeline_view.hpp"
#include "topology_view.hpp"

namespace planner::gui {

namespace {

QString screenshot_dir() {
  const QString dir = QString(PLANNER_BINARY_DIR) + "/gui-screenshots";
  QDir().mkpath(dir);
  return dir;
}

void screenshot(MainWindow& w, MainWindow::Tab tab, const QString& name) {
  w.tabs()->setCurrentIndex(tab);
  QCoreApplication::processEvents();
  QVERIFY(w.grab().save(screenshot_dir() + "/" + name + ".png"));
}

// The scenario the tests sweep: the default one (Llama 3 8B on 64 H100s, as planner sweep).
void run_default_sweep(MainWindow& w) {
  w.set_document(app::default_scenario_document());
  w.start_sweep();
  QVERIFY(w.runner().running());
  w.runner().wait();
  QVERIFY(w.outcome() != nullptr);
  QVERIFY2(w.outcome()->status.is_ok(), w.outcome()->status.message().c_str());
}

}  // namespace

class MainWindowTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    window_ = std::make_unique<MainWindow>();
    window_->resize(1500, 900);
    window_->show();
    // Sweeps started from the app are recorded in the history's database, as the CLI's are.
    QVERIFY(history_dir_.isValid());
    window_->set_database_path(history_dir_.filePath("planner.db"));
  }
  void cleanupTestCase() { window_.reset(); }

  void app_starts_with_a_valid_default_scenario() {
    QVERIFY(window_->isVisible());
    QCOMPARE(window_->tabs()->count(), 6);
    QVERIFY(window_->validate());
    const Json doc = window_->document();
    QCOMPARE(doc["kind"].get<std::string>(), std::string("sweep"));
    // The CLI's default scenario (planner sweep without arguments): 64 GPUs.
    QCOMPARE(doc["clusters"][0]["gpus"][0].get<int>(), app::default_scenario().gpus);
  }

  void bad_field_shows_the_cli_error_next_to_it() {
    window_->set_field("/training/seq_length", "0");
    window_->set_field("/training/global_batch_size", "many");
    QVERIFY(!window_->validate());
    const QString seq = window_->field_error("/training/seq_length");
    const QString gbs = window_->field_error("/training/global_batch_size");
    QVERIFY2(seq.startsWith("scenario.json: /training/seq_length: "), qPrintable(seq));
    QVERIFY2(gbs.startsWith("scenario.json: /training/global_batch_size: "), qPrintable(gbs));
    QVERIFY(window_->field_error("/clusters/0/gpus").isEmpty());
    // The same words as `planner sweep --spec scenario.json` prints for the same document.
    auto cli =
        search::parse_sweep_spec(window_->document().dump(), "scenario.json", builtin_catalog(),
                                 [](std::string_view n) { return topo::resolve_topology(n); });
    QVERIFY(!cli.is_ok());
    const QString message = QString::fromStdString(cli.status().message());
    QVERIFY2(message.contains(seq), qPrintable(message));
    QVERIFY2(message.contains(gbs), qPrintable(message));
    screenshot(*window_, MainWindow::kRankingTab, "scenario-errors");
    window_->set_field("/clusters/0/gpu", "no-such-gpu");
    window_->set_field("/training/seq_length", "8192");
    window_->set_field("/training/global_batch_size", "512");
    QVERIFY(!window_->validate());
    QVERIFY(window_->field_error("/clusters/0/gpu").contains("no-such-gpu"));
    QVERIFY(window_->field_error("/training/seq_length").isEmpty());
    window_->set_document(app::default_scenario_document());
    QVERIFY(window_->validate());
  }

  // The fp8 recipe is a training field for fp8 only; MXFP8 on the default scenario's H100s is
  // refused next to the field with the CLI's words.
  void fp8_recipe_is_offered_for_fp8_only() {
    QVERIFY(!window_->document()["training"].contains("fp8_recipe"));
    window_->set_field("/training/precision", "fp8");
    QCOMPARE(window_->document()["training"]["fp8_recipe"].get<std::string>(),
             std::string("delayed"));
    window_->set_field("/training/fp8_recipe", "current");
    QVERIFY(window_->validate());
    QCOMPARE(window_->document()["training"]["fp8_recipe"].get<std::string>(),
             std::string("current"));
    window_->set_field("/training/fp8_recipe", "mxfp8");
    QVERIFY(!window_->validate());
    const QString error = window_->field_error("/clusters/0/gpu");
    QVERIFY2(error.contains("mxfp8 needs a Blackwell GPU"), qPrintable(error));
    window_->set_field("/training/precision", "bf16");
    QVERIFY(!window_->document()["training"].contains("fp8_recipe"));
    window_->set_document(app::default_scenario_document());
    QVERIFY(window_->validate());
  }

  void scenario_saves_as_a_document_the_cli_reads() {
    QTemporaryDir dir;
    const QString path = dir.filePath("scenario.json");
    window_->set_field("/clusters/0/gpus", "2");
    QVERIFY(window_->save_scenario(path).is_ok());
    auto text = read_text_file(path.toStdString());
    QVERIFY(text.is_ok());
    auto request =
        search::parse_sweep_spec(*text, "scenario.json", builtin_catalog(),
                                 [](std::string_view n) { return topo::resolve_topology(n); });
    QVERIFY2(request.is_ok(), request.status().message().c_str());
    QCOMPARE(request->scenarios.size(), std::size_t{1});
    QCOMPARE(request->scenarios[0].max_gpus, 16);
    window_->set_document(app::default_scenario_document());
    QVERIFY(window_->load_scenario(path).is_ok());
    QCOMPARE(window_->document()["clusters"][0]["gpus"][0].get<int>(), 16);
    window_->set_document(app::default_scenario_document());
  }

  void hugging_face_import_fills_the_model() {
    const QString path = QString(PLANNER_TEST_DATA_DIR) + "/hf/llama3-8b.config.json";
    QVERIFY(window_->import_hf_config(path).is_ok());
    const Json doc = window_->document();
    QVERIFY(doc["models"][0].is_object());
    QCOMPARE(doc["models"][0]["layers"].get<int>(), 32);
    QVERIFY(window_->validate());
    window_->set_document(app::default_scenario_document());
  }

  // The provider picker lists the providers with a catalogue price for the GPU; the sweep is
  // costed at the one chosen.
  void provider_picker_prices_at_the_chosen_provider() {
    const Json doc = app::default_scenario_document();  // H100
    window_->set_document(doc);
    QVERIFY(!window_->document()["clusters"][0].contains("provider"));
    window_->set_field("/clusters/0/provider", "GCP");
    const Json gcp = window_->document();
    QCOMPARE(gcp["clusters"][0]["provider"].get<std::string>(), std::string("GCP"));
    const ParsedScenario parsed = parse_scenario(gcp);
    QVERIFY(parsed.request.has_value());
    QCOMPARE(parsed.request->scenarios[0].pricing->provider, std::string("GCP"));
    // MI300X: GCP does not rent it, so the picker falls back to the default rule.
    window_->set_field("/clusters/0/gpu",
                       QString::fromStdString(builtin_catalog().gpu("mi300x")->name));
    QVERIFY(!window_->document()["clusters"][0].contains("provider"));
    window_->set_field("/clusters/0/provider", "Oracle");
    QCOMPARE(window_->document()["clusters"][0]["provider"].get<std::string>(),
             std::string("Oracle"));
    window_->set_document(doc);
    QVERIFY(!window_->document()["clusters"][0].contains("provider"));
  }

  void what_if_knobs_change_the_document_or_the_fabric() {
    const Json doc = app::default_scenario_document();
    auto gpu = apply_knob(doc, {}, Knob::kGpu, "h200");
    QVERIFY(gpu.is_ok());
    const Json& cluster = gpu->doc["clusters"][0];
    QCOMPARE(cluster["gpu"].get<std::string>(), builtin_catalog().gpu("h200")->name);
    // Still the same number of nodes (64 GPUs: 8 nodes of 8).
    QCOMPARE(cluster["gpus"][0].get<int>(), 8 * gpus_per_node(gpu->doc));
    QVERIFY(parse_scenario(gpu->doc).request.has_value());
    auto batch = apply_knob(doc, {}, Knob::kBatch, "1024");
    QVERIFY(batch.is_ok());
    QCOMPARE(parse_scenario(batch->doc).request->scenarios[0].training.global_batch_size, 1024);
    // Fabric knobs change the resolved topology, not the document.
    const topo::FabricSpec before = parse_scenario(doc).request->scenarios[0].topology.fabric;
    auto slower = apply_knob(doc, {}, Knob::kInternodeBandwidth, "0.5");
    QVERIFY(slower.is_ok());
    QCOMPARE(slower->doc, doc);
    const topo::FabricSpec half = parse_scenario(slower->doc, kScenarioSource, slower->change)
                                      .request->scenarios[0]
                                      .topology.fabric;
    QCOMPARE(to_GBps(half.host_link.bandwidth), to_GBps(before.host_link.bandwidth) / 2);
    auto over = apply_knob(doc, {}, Knob::kOversubscription, "2");
    QVERIFY(over.is_ok());
    const topo::FabricSpec two = parse_scenario(over->doc, kScenarioSource, over->change)
                                     .request->scenarios[0]
                                     .topology.fabric;
    QCOMPARE(two.leaf_oversubscription(), 2.0);
    QCOMPARE(before.leaf_oversubscription(), 1.0);
    auto odd = apply_knob(doc, {}, Knob::kOversubscription, "3.7");
    QVERIFY(odd.is_ok());
    const ParsedScenario bad = parse_scenario(odd->doc, kScenarioSource, odd->change);
    QVERIFY(!bad.request.has_value());
    QCOMPARE(QString::fromStdString(bad.diagnostics.items().front().pointer),
             QString("/clusters/0/topology"));
  }

  void sweep_fills_the_ranking_table() {
    run_default_sweep(*window_);
    RankingModel* model = window_->ranking();
    QVERIFY(model->rowCount() > 5);
    QCOMPARE(model->plans().front().position, 1);
    QCOMPARE(window_->progress_bar()->value(), window_->progress_bar()->maximum());
    // Best plan first; sorting by a column reorders the view, not the ranking.
    QSortFilterProxyModel* proxy = window_->ranking_proxy();
    window_->ranking_view()->sortByColumn(RankingModel::kStepTime, Qt::AscendingOrder);
    double last = -1;
    for (int r = 0; r < proxy->rowCount(); ++r) {
      const double v = proxy->index(r, RankingModel::kStepTime).data(Qt::UserRole).toDouble();
      QVERIFY(v >= last);
      last = v;
    }
    window_->ranking_view()->sortByColumn(RankingModel::kPosition, Qt::AscendingOrder);
    proxy->setFilterFixedString("zero1");
    QVERIFY(proxy->rowCount() < model->rowCount());
    for (int r = 0; r < proxy->rowCount(); ++r) {
      QVERIFY(proxy->index(r, RankingModel::kPlan).data().toString().contains("zero1"));
    }
    proxy->setFilterFixedString("");
    // The decision columns come first, the configuration after.
    const QStringList decision{"#",         "plan", "GPUs",  "tokens/$", "cost", "time to train",
                               "step time", "MFU",  "memory"};
    for (int c = 0; c < decision.size(); ++c) {
      QCOMPARE(model->headerData(c, Qt::Horizontal, Qt::DisplayRole).toString(), decision[c]);
    }
    const search::RankedPlan& best = model->plans().front();
    QCOMPARE(model->text(0, RankingModel::kGpus), QString::number(best.parallel.world_size()));
    QVERIFY(model->text(0, RankingModel::kPeakMemory).endsWith(" GiB"));
    QVERIFY(RankingModel::kTp > RankingModel::kPeakMemory);
    screenshot(*window_, MainWindow::kRankingTab, "ranking");
  }

  void selecting_a_row_draws_memory_timeline_and_topology() {
    // The deepest pipeline among the ranked plans, so the timeline has several rows.
    const auto& plans = window_->ranking()->plans();
    int row = 0;
    for (int r = 0; r < static_cast<int>(plans.size()); ++r) {
      if (plans[static_cast<std::size_t>(r)].parallel.pp >
          plans[static_cast<std::size_t>(row)].parallel.pp) {
        row = r;
      }
    }
    window_->select_row(row);
    const auto& view = window_->plan_view();
    QVERIFY(view.has_value());
    QCOMPARE(view->ranked.id, plans[static_cast<std::size_t>(row)].id);
    // Memory: six stacked parts per pipeline stage, and the HBM line.
    QChart* memory = window_->memory_chart()->chart();
    QCOMPARE(memory->series().size(), 2);
    auto* bars = qobject_cast<QAbstractBarSeries*>(memory->series()[0]);
    QVERIFY(bars != nullptr);
    QCOMPARE(bars->count(), 6);
    QCOMPARE(bars->barSets()[0]->count(), view->ranked.parallel.pp);
    QVERIFY(memory->series()[1]->name().startsWith("HBM 80"));
    // Timeline: one row per pipeline stage, every simulated op a block.
    std::size_t ops = 0;
    for (const sim::RankRun& r : view->sim.ranks)
      ops += r.ops.size();
    QCOMPARE(view->sim.ranks.size(), static_cast<std::size_t>(view->ranked.parallel.pp));
    QCOMPARE(static_cast<std::size_t>(window_->timeline()->blocks()), ops);
    QVERIFY(ops > 0);
    window_->timeline()->zoom_by(2.0);
    QCOMPARE(window_->timeline()->zoom(), 2.0);
    window_->timeline()->zoom_by(0.5);  // the whole step for the screenshot
    // Time chart and topology: rank 0's tp and dp groups are outlined.
    QVERIFY(!window_->time_chart()->chart()->series().isEmpty());
    const ParallelConfig& p = view->ranked.parallel;
    QCOMPARE(window_->topology()->highlighted_gpus(), p.tp + p.dp - 1);
    screenshot(*window_, MainWindow::kPlanTab, "plan");
  }

  void trade_off_click_selects_the_plan() {
    const auto& plans = window_->ranking()->plans();
    QVERIFY(plans.size() > 3);
    window_->select_pareto_point(pareto_point(plans[3]));
    QVERIFY(window_->plan_view().has_value());
    // The nearest point may be another plan drawn at the same place: same time and cost.
    QCOMPARE(pareto_point(window_->plan_view()->ranked), pareto_point(plans[3]));
    QVERIFY(!window_->outcome()->result->pareto.empty());
    screenshot(*window_, MainWindow::kTradeOffTab, "trade-off");
  }

  void export_writes_a_plan_document() {
    QTemporaryDir dir;
    const QString path = dir.filePath("plan.json");
    QVERIFY(window_->export_plan(path).is_ok());
    auto plan = load_plan_file(path.toStdString(), builtin_catalog());
    QVERIFY2(plan.is_ok(), plan.status().message().c_str());
    QCOMPARE(plan->parallel.tp, window_->plan_view()->ranked.parallel.tp);
    QCOMPARE(plan->cluster.num_gpus(), window_->plan_view()->plan.cluster.num_gpus());
  }

  // What if the GPU were a B200: the scenario moves to the B200's default topology (DGX B200) at
  // its catalogue price, and the same model trains faster per step.
  void what_if_to_another_gpu_takes_its_topology_and_price() {
    window_->start_what_if(Knob::kGpu, "b200");
    QVERIFY2(window_->what_if_runner().running(), qPrintable(window_->what_if_summary()));
    window_->what_if_runner().wait();
    QVERIFY2(window_->what_if_next()->rowCount() > 0, qPrintable(window_->what_if_summary()));
    QVERIFY2(window_->what_if_summary().contains("b200"), qPrintable(window_->what_if_summary()));
    QVERIFY2(window_->what_if_summary().contains("runs on dgx-b200 (8 GPUs/node)"),
             qPrintable(window_->what_if_summary()));
    const search::RankedPlan& h100 = window_->what_if_base()->plans().front();
    const search::RankedPlan& b200 = window_->what_if_next()->plans().front();
    QVERIFY(b200.metrics().tokens_per_second > h100.metrics().tokens_per_second);
    screenshot(*window_, MainWindow::kWhatIfTab, "what-if-b200");
  }

  void what_if_compares_two_rankings() {
    window_->start_what_if(Knob::kPrice, "1.25");
    QVERIFY(window_->what_if_runner().running());
    window_->what_if_runner().wait();
    QVERIFY(window_->what_if_next()->rowCount() > 0);
    QCOMPARE(window_->what_if_base()->rowCount(), window_->ranking()->rowCount());
    // A cheaper GPU-hour changes tokens per dollar and cost on every row.
    const auto& cells = window_->what_if_next()->differences();
    QVERIFY(cells.count({0, RankingModel::kTokensPerUsd}) == 1);
    QVERIFY(cells.count({0, RankingModel::kCost}) == 1);
    QVERIFY(window_->what_if_next()->plans().front().economics.tokens_per_usd >
            window_->what_if_base()->plans().front().economics.tokens_per_usd);
    QVERIFY2(window_->what_if_summary().contains("price = 1.25"),
             qPrintable(window_->what_if_summary()));
    screenshot(*window_, MainWindow::kWhatIfTab, "what-if");
    // A knob value the scenario cannot take is reported, not swept.
    window_->start_what_if(Knob::kNodes, "lots");
    QVERIFY(!window_->what_if_runner().running());
    QVERIFY(window_->what_if_summary().contains("node count: expected a number"));
  }

  void sweeps_and_what_ifs_are_recorded_in_the_history() {
    window_->refresh_history();
    QTableWidget* h = window_->history_table();
    QVERIFY2(h->rowCount() >= 3, qPrintable(window_->history_details()));
    // Newest first: the price what-if, the B200 what-if, then the scenario's sweep, all of kind
    // sweep with their plans.
    QCOMPARE(h->item(0, 1)->text(), QString("sweep"));
    QCOMPARE(h->item(1, 1)->text(), QString("sweep"));
    QCOMPARE(h->item(2, 1)->text(), QString("sweep"));
    QVERIFY(h->item(0, 5)->text().toInt() > 0);
    auto db = store::Database::open(history_dir_.filePath("planner.db").toStdString());
    QVERIFY(db.is_ok());
    store::RunFilter filter;
    auto runs = store::list_runs(*db, filter);
    QVERIFY(runs.is_ok());
    QVERIFY(runs->size() >= 3);
    const Json what_if = Json::parse((*runs)[0].inputs_json);
    QCOMPARE(what_if["command"].get<std::string>(), std::string("gui what-if"));
    QCOMPARE(what_if["change"].get<std::string>(), std::string("price = 1.25"));
    QCOMPARE(Json::parse((*runs)[1].inputs_json)["change"].get<std::string>(),
             std::string("GPU type = b200"));
    const Json sweep = Json::parse((*runs)[2].inputs_json);
    QCOMPARE(sweep["command"].get<std::string>(), std::string("gui sweep"));
    QCOMPARE(sweep["top_k"].get<int>(), app::default_scenario().top_k);
    window_->select_history_row(2);
    QVERIFY2(window_->history_details().contains("llama3-8b"),
             qPrintable(window_->history_details()));
    screenshot(*window_, MainWindow::kHistoryTab, "history-sweeps");
  }

  void cancel_stops_a_running_sweep() {
    window_->start_sweep();
    QVERIFY(window_->runner().running());
    window_->cancel_sweep();
    window_->runner().wait();
    QVERIFY(!window_->runner().running());
    // Cancelled between work units, unless it had already finished.
    QVERIFY(window_->ranking()->rowCount() > 0);
  }

  void executed_run_measurements_appear_in_history() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("planner.db").toStdString();
    {
      auto db = store::Database::open(path);
      QVERIFY(db.is_ok());
      store::NewRun nr;
      nr.kind = store::RunKind::kExec;
      nr.label = "gui test run";
      auto run = store::create_run(*db, nr);
      QVERIFY(run.is_ok());
      auto plan = store::put_plan_text(*db, to_json_text(window_->plan_view()->plan), "plan");
      QVERIFY(plan.is_ok());
      QVERIFY(store::link_plan(*db, *run, *plan).is_ok());
      std::vector<store::OpPrediction> predicted;
      std::vector<store::OpMeasurement> measured;
      const char* kinds[] = {"gemm", "all_reduce", "send"};
      for (int i = 0; i < 6; ++i) {
        store::OpPrediction p;
        p.op_id = "op" + std::to_string(i);
        p.op_kind = kinds[i % 3];
        p.start = microseconds(10 * i);
        p.duration = microseconds(10 + i);
        predicted.push_back(p);
        for (int step = 0; step < 2; ++step) {
          store::OpMeasurement m;
          m.step = step;
          m.op_id = p.op_id;
          m.op_kind = p.op_kind;
          m.wall = microseconds(12 + i);
          measured.push_back(m);
        }
      }
      std::vector<store::StepMeasurement> steps(2);
      steps[0].step = 0;
      steps[1].step = 1;
      steps[0].step_time = steps[1].step_time = microseconds(120);
      QVERIFY(store::add_predicted_ops(*db, *run, *plan, predicted).is_ok());
      QVERIFY(store::add_measured_ops(*db, *run, measured).is_ok());
      QVERIFY(store::add_measured_steps(*db, *run, steps).is_ok());
      QVERIFY(store::finish_run(*db, *run).is_ok());
    }
    window_->set_database_path(QString::fromStdString(path));
    QCOMPARE(window_->history_table()->rowCount(), 1);
    QCOMPARE(window_->history_table()->item(0, 1)->text(), QString("exec"));
    window_->select_history_row(0);
    QChart* chart = window_->accuracy_chart()->chart();
    QScatterSeries* points = nullptr;
    for (QAbstractSeries* s : chart->series()) {
      if (s->name() == "op kinds") points = static_cast<QScatterSeries*>(s);
    }
    QVERIFY(points != nullptr);
    QCOMPARE(points->count(), 3);  // gemm, all_reduce, send
    QVERIFY2(window_->history_details().contains("all_reduce"),
             qPrintable(window_->history_details()));
    screenshot(*window_, MainWindow::kHistoryTab, "history");
  }

  void run_streams_the_planner_exec_log() {
#ifndef PLANNER_TEST_HAVE_EXECUTOR
    QSKIP("planner is built without the executor");
#else
    // `planner exec` (built beside this test) checks the plan before starting any rank: the
    // default scenario's bf16 H100 plan is refused by the cpu backend, in the CLI's words.
    QVERIFY(window_->plan_view().has_value());
    QVERIFY(window_->start_run());
    QVERIFY(QTest::qWaitFor([this] { return window_->run_log().contains("planner exec finished"); },
                            60000));
    const QString log = window_->run_log();
    QVERIFY2(log.contains("exec " + QDir::tempPath()), qPrintable(log));
    QVERIFY2(log.contains("the cpu backend trains in fp32 only, got bf16"), qPrintable(log));
    QVERIFY2(log.contains("finished with exit code 2"), qPrintable(log));
    screenshot(*window_, MainWindow::kRunTab, "run");
#endif
  }

 private:
  QTemporaryDir history_dir_;
  std::unique_ptr<MainWindow> window_;
};

}  // namespace planner::gui

QTEST_MAIN(planner::gui::MainWindowTest)
#include "main_window_test.moc"
