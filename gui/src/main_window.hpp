// planner-gui's main window: the scenario editor on the left, the views on the right.
//
//   Ranking     the sweep's ranked plans, sortable and filterable
//   Plan        for the selected plan: memory per stage vs HBM, time per bucket (compute vs
//               exposed communication per axis), the pipeline timeline of one simulated step, and
//               the cluster with the plan's groups
//   Trade-off   cost vs time to train with the Pareto frontier (clicking a point selects the plan)
//   What-if     one knob changed, both rankings side by side, changed cells highlighted
//   History     the SQLite store's runs; for executed runs, predicted vs measured per op kind
//   Run         `planner exec` of the selected plan as a child process, its log streamed
//
// Everything is computed by the libraries the CLI uses (sweep, simulate, memory, store); the
// scenario is a "sweep" document, checked by the CLI's parser, whose diagnostics appear next to
// the field they point at. Public methods are the actions of the toolbar and the tests' handles.
#pragma once

#include <QMainWindow>
#include <QPointer>
#include <QProcess>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "plan_view.hpp"
#include "planner/core/json_reader.hpp"
#include "planner/core/status.hpp"
#include "scenario_document.hpp"
#include "sweep_runner.hpp"

class QChartView;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QTabWidget;
class QTableView;
class QTableWidget;

namespace planner::gui {

class RankingModel;
class TimelineView;
class TopologyView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  enum Tab { kRankingTab, kPlanTab, kTradeOffTab, kWhatIfTab, kHistoryTab, kRunTab };
  QTabWidget* tabs() const { return tabs_; }

  // ---- scenario
  Json document() const;  // the editor's fields over the loaded document
  void set_document(const Json& doc);
  // Parses the document as the CLI does; shows each diagnostic next to its field. True when valid.
  bool validate();
  // The error shown next to the field of `pointer` ("/training/seq_length"); empty when none.
  QString field_error(const std::string& pointer) const;
  Status load_scenario(const QString& path);
  Status save_scenario(const QString& path);
  Status import_hf_config(const QString& path);
  void set_field(const std::string& pointer, const QString& text);  // editor field by pointer

  // ---- sweep
  void start_sweep();
  void cancel_sweep();
  SweepRunner& runner() { return *runner_; }
  const std::shared_ptr<SweepOutcome>& outcome() const { return outcome_; }
  RankingModel* ranking() const { return ranking_; }
  QTableView* ranking_view() const { return ranking_view_; }
  QSortFilterProxyModel* ranking_proxy() const { return proxy_; }
  QProgressBar* progress_bar() const { return progress_; }

  // ---- selected plan
  void select_row(int proxy_row);
  void select_plan(const search::RankedPlan& plan);
  const std::optional<PlanView>& plan_view() const { return plan_view_; }
  QChartView* memory_chart() const { return memory_chart_; }
  QChartView* time_chart() const { return time_chart_; }
  QChartView* pareto_chart() const { return pareto_chart_; }
  TimelineView* timeline() const { return timeline_; }
  TopologyView* topology() const { return topology_; }
  Status export_plan(const QString& path) const;
  // Selects the ranked or frontier plan nearest to a point of the trade-off chart.
  void select_pareto_point(QPointF point);

  // ---- what-if
  void start_what_if(Knob knob, const QString& value);
  SweepRunner& what_if_runner() { return *what_if_runner_; }
  RankingModel* what_if_base() const { return what_if_base_; }
  RankingModel* what_if_next() const { return what_if_next_; }
  QString what_if_summary() const;

  // ---- history and runs
  void set_database_path(const QString& path);
  void refresh_history();
  QTableWidget* history_table() const { return history_; }
  void select_history_row(int row);
  QChartView* accuracy_chart() const { return accuracy_chart_; }
  QString history_details() const;
  // Starts `planner exec` on the selected plan; false (with the reason in the log) when it cannot.
  bool start_run();
  QString run_log() const;

 private:
  QWidget* build_editor();
  QWidget* build_ranking_tab();
  QWidget* build_plan_tab();
  QWidget* build_trade_off_tab();
  QWidget* build_what_if_tab();
  QWidget* build_history_tab();
  QWidget* build_run_tab();
  void build_toolbar();
  // Shows a failed status in the status bar; returns whether it was ok.
  bool report(const Status& status);
  void show_diagnostics(const Diagnostics& diag);
  void clear_errors();
  void on_progress(int phase, qint64 done, qint64 total);
  void on_sweep_finished(std::shared_ptr<SweepOutcome> outcome);
  void on_what_if_finished(std::shared_ptr<SweepOutcome> outcome);
  // Where a sweep started from the app is recorded: the history's database, and who asked.
  Recording recording(Json origin) const;
  QString recorded_text(const SweepOutcome& outcome) const;
  void show_plan(const search::RankedPlan& plan);
  void show_trade_off();

  struct Field {
    QWidget* editor = nullptr;
    QLabel* error = nullptr;
  };
  std::map<std::string, Field> fields_;  // by JSON pointer
  QLabel* general_error_ = nullptr;
  Json base_doc_;
  QString source_name_;
  FabricChange fabric_change_;

  QComboBox* model_combo_ = nullptr;
  QPlainTextEdit* model_json_ = nullptr;
  QComboBox* gpu_combo_ = nullptr;
  QComboBox* topology_combo_ = nullptr;
  QLineEdit* nodes_ = nullptr;
  QComboBox* offering_combo_ = nullptr;
  QComboBox* provider_combo_ = nullptr;  // "" (the default rule) or a provider pricing the GPU
  QLineEdit* price_ = nullptr;
  QLineEdit* batch_ = nullptr;
  QLineEdit* seq_ = nullptr;
  QComboBox* precision_combo_ = nullptr;
  QComboBox* fp8_recipe_combo_ = nullptr;  // enabled for fp8 only
  QLineEdit* tokens_ = nullptr;
  QLineEdit* budget_ = nullptr;
  QLineEdit* deadline_ = nullptr;

  QTabWidget* tabs_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* phase_label_ = nullptr;
  QPushButton* run_button_ = nullptr;
  QPushButton* cancel_button_ = nullptr;
  SweepRunner* runner_ = nullptr;
  std::shared_ptr<SweepOutcome> outcome_;
  RankingModel* ranking_ = nullptr;
  QSortFilterProxyModel* proxy_ = nullptr;
  QTableView* ranking_view_ = nullptr;
  QLabel* counts_label_ = nullptr;

  std::optional<PlanView> plan_view_;
  QLabel* plan_label_ = nullptr;
  QChartView* memory_chart_ = nullptr;
  QChartView* time_chart_ = nullptr;
  TimelineView* timeline_ = nullptr;
  TopologyView* topology_ = nullptr;
  QChartView* pareto_chart_ = nullptr;
  std::vector<search::RankedPlan> pareto_points_;  // the chart's clickable plans

  QComboBox* knob_combo_ = nullptr;
  QLineEdit* knob_value_ = nullptr;
  SweepRunner* what_if_runner_ = nullptr;
  RankingModel* what_if_base_ = nullptr;
  RankingModel* what_if_next_ = nullptr;
  QLabel* what_if_label_ = nullptr;
  QString what_if_change_;

  QLineEdit* db_path_ = nullptr;
  QTableWidget* history_ = nullptr;
  QChartView* accuracy_chart_ = nullptr;
  QPlainTextEdit* history_text_ = nullptr;

  QComboBox* launcher_combo_ = nullptr;
  QLineEdit* steps_ = nullptr;
  QPlainTextEdit* run_log_ = nullptr;
  QPointer<QProcess> process_;
};

}  // namespace planner::gui
