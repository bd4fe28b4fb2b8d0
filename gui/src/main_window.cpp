#include "main_window.hpp"

#include <QAction>
#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QThread>
#include <QToolBar>
#include <QVBoxLayout>
#include <QtCharts/QChartView>
#include <QtCharts/QScatterSeries>
#include <algorithm>
#include <cmath>

#include "charts.hpp"
#include "planner/app/database.hpp"
#include "planner/app/defaults.hpp"
#include "planner/core/catalog.hpp"
#include "planner/core/enums.hpp"
#include "planner/core/hf_import.hpp"
#include "planner/core/loaders.hpp"
#include "planner/core/spec_json.hpp"
#include "planner/store/store.hpp"
#include "planner/topo/topology_catalog.hpp"
#include "ranking_model.hpp"
#include "timeline_view.hpp"
#include "topology_view.hpp"

namespace planner::gui {

namespace {

// Pointers of the editor's fields in the sweep document.
constexpr const char* kModelPtr = "/models/0";
constexpr const char* kGpuPtr = "/clusters/0/gpu";
constexpr const char* kTopologyPtr = "/clusters/0/topology";
constexpr const char* kGpusPtr = "/clusters/0/gpus";
constexpr const char* kOfferingPtr = "/clusters/0/offering";
constexpr const char* kProviderPtr = "/clusters/0/provider";
constexpr const char* kPricePtr = "/clusters/0/usd_per_gpu_hour";
constexpr const char* kBatchPtr = "/training/global_batch_size";
constexpr const char* kSeqPtr = "/training/seq_length";
constexpr const char* kPrecisionPtr = "/training/precision";
constexpr const char* kFp8RecipePtr = "/training/fp8_recipe";
constexpr const char* kTokensPtr = "/training/token_budget";
constexpr const char* kBudgetPtr = "/constraints/budget_usd";
constexpr const char* kDeadlinePtr = "/constraints/deadline_days";
constexpr const char* kCustomModel = "custom (JSON below)";
constexpr int kHistoryLimit = 200;
constexpr int kDefaultExecSteps = 5;

QString qs(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<int>(s.size()));
}

// A field's text as a JSON value: integers and reals as numbers, anything else as a string, so
// that the parser reports a wrong value in its own words ("expected a number, got string ...").
std::optional<Json> field_value(const QString& text) {
  const QString t = text.trimmed();
  if (t.isEmpty()) return std::nullopt;
  bool ok = false;
  const qlonglong i = t.toLongLong(&ok);
  if (ok) return Json(static_cast<std::int64_t>(i));
  const double d = t.toDouble(&ok);
  if (ok && std::isfinite(d)) return Json(d);
  return Json(t.toStdString());
}

QString json_text(const Json& j) {
  if (j.is_string()) return QString::fromStdString(j.get<std::string>());
  if (j.is_number_integer()) return QString::number(j.get<std::int64_t>());
  if (j.is_number()) return QString::number(j.get<double>(), 'g', 12);
  return QString::fromStdString(j.dump());
}

// Sets or erases doc[a][b] (creating the object a).
void put(Json& doc, const char* a, const char* b, const std::optional<Json>& v) {
  if (v) {
    doc[a][b] = *v;
  } else if (doc.contains(a) && doc[a].is_object()) {
    doc[a].erase(b);
    if (doc[a].empty() && std::string_view(a) == "constraints") doc.erase(a);
  }
}

QLabel* error_label() {
  auto* label = new QLabel;
  label->setStyleSheet("color: #c62828;");
  label->setWordWrap(true);
  label->hide();
  return label;
}

QChartView* chart_view() {
  auto* view = new QChartView;
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumSize(360, 240);
  return view;
}

void set_chart(QChartView* view, QChart* chart) {
  QChart* old = view->chart();
  view->setChart(chart);
  delete old;
}

// " The what-if runs on dgx-b200 (8 GPUs/node) at $14.240/GPU-hour (AWS p6-b200.48xlarge,
// 2026-11-09).": where a changed GPU, node count or price put the scenario.
QString where_it_runs(const std::vector<search::ScenarioInfo>& scenarios) {
  if (scenarios.empty()) return {};
  const search::ScenarioInfo& s = scenarios.front();
  const search::GpuPrice& p = s.price;
  const std::string from = p.overridden
                               ? std::string(" (given)")
                               : " (" + p.provider + " " + p.instance + ", " + p.date + ")";
  return QString(" The what-if runs on %1 (%2 GPUs/node) at $%3/GPU-hour%4.")
      .arg(QString::fromStdString(s.topology).toHtmlEscaped())
      .arg(s.gpus_per_node)
      .arg(p.usd_per_gpu_hour.raw(), 0, 'f', 3)
      .arg(QString::fromStdString(from).toHtmlEscaped());
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle("planner");
  runner_ = new SweepRunner(this);
  what_if_runner_ = new SweepRunner(this);
  connect(runner_, &SweepRunner::progress, this, &MainWindow::on_progress);
  connect(runner_, &SweepRunner::finished, this, &MainWindow::on_sweep_finished);
  connect(what_if_runner_, &SweepRunner::finished, this, &MainWindow::on_what_if_finished);

  tabs_ = new QTabWidget;
  tabs_->addTab(build_ranking_tab(), "Ranking");
  tabs_->addTab(build_plan_tab(), "Plan");
  tabs_->addTab(build_trade_off_tab(), "Trade-off");
  tabs_->addTab(build_what_if_tab(), "What-if");
  tabs_->addTab(build_history_tab(), "History");
  tabs_->addTab(build_run_tab(), "Run");

  auto* scroll = new QScrollArea;
  scroll->setWidget(build_editor());
  scroll->setWidgetResizable(true);
  scroll->setMinimumWidth(330);
  auto* split = new QSplitter;
  split->addWidget(scroll);
  split->addWidget(tabs_);
  split->setStretchFactor(1, 1);
  setCentralWidget(split);
  build_toolbar();

  progress_ = new QProgressBar;
  progress_->setRange(0, 1);
  progress_->setValue(0);
  phase_label_ = new QLabel("ready");
  statusBar()->addWidget(phase_label_);
  statusBar()->addPermanentWidget(progress_);
  resize(1500, 900);
  set_document(app::default_scenario_document());
}

MainWindow::~MainWindow() {
  if (process_) process_->kill();
}

// ---------------------------------------------------------------- scenario editor

QWidget* MainWindow::build_editor() {
  auto* root = new QWidget;
  auto* layout = new QVBoxLayout(root);
  auto add_field = [this](QFormLayout* form, const QString& label, QWidget* editor,
                          const char* pointer) {
    Field f{editor, error_label()};
    form->addRow(label, editor);
    form->addRow(QString(), f.error);
    fields_[pointer] = f;
  };

  auto* model_box = new QGroupBox("Model");
  auto* model_form = new QFormLayout(model_box);
  model_combo_ = new QComboBox;
  for (const ModelSpec& m : builtin_catalog().models())
    model_combo_->addItem(qs(m.name));
  model_combo_->addItem(kCustomModel);
  model_json_ = new QPlainTextEdit;
  model_json_->setPlaceholderText("model fields (JSON), e.g. from a Hugging Face config.json");
  model_json_->setMinimumHeight(120);
  auto* hf = new QPushButton("Import Hugging Face config.json…");
  connect(hf, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, "Hugging Face config.json", {}, "JSON (*.json)");
    if (!path.isEmpty()) report(import_hf_config(path));
  });
  connect(model_combo_, &QComboBox::currentTextChanged, this, [this](const QString& name) {
    model_json_->setEnabled(name == kCustomModel);
    if (name != kCustomModel) {
      if (const ModelSpec* m = builtin_catalog().find_model(name.toStdString())) {
        model_json_->setPlainText(QString::fromStdString(to_json(*m).dump(2)));
      }
    }
  });
  add_field(model_form, "preset", model_combo_, kModelPtr);
  model_form->addRow(hf);
  model_form->addRow(model_json_);
  layout->addWidget(model_box);

  auto* cluster_box = new QGroupBox("Cluster");
  auto* cluster_form = new QFormLayout(cluster_box);
  gpu_combo_ = new QComboBox;
  gpu_combo_->setEditable(true);
  for (const GpuSpec& g : builtin_catalog().gpus())
    gpu_combo_->addItem(qs(g.name));
  topology_combo_ = new QComboBox;
  topology_combo_->setEditable(true);
  topology_combo_->addItem("");  // the first preset with the GPU
  for (const topo::TopologySpec& t : topo::builtin_topologies().all()) {
    topology_combo_->addItem(qs(t.name));
  }
  nodes_ = new QLineEdit;
  offering_combo_ = new QComboBox;
  for (const auto& [value, name] : EnumTraits<Offering>::kNames)
    offering_combo_->addItem(qs(name));
  // The providers with a catalogue price for the GPU; the first entry, empty, is the default rule
  // (AWS where it rents the GPU, core/pricing.hpp).
  provider_combo_ = new QComboBox;
  const auto fill_providers = [this](const QString& gpu_name) {
    const QString current = provider_combo_->currentText();
    QStringList providers;
    if (const GpuSpec* g = builtin_catalog().find_gpu(gpu_name.toStdString())) {
      for (const PriceEntry& e : g->prices) {
        if (!providers.contains(qs(e.provider))) providers.push_back(qs(e.provider));
      }
    }
    providers.sort(Qt::CaseInsensitive);
    provider_combo_->clear();
    provider_combo_->addItem("");
    provider_combo_->addItems(providers);
    provider_combo_->setCurrentText(providers.contains(current) ? current : QString());
  };
  connect(gpu_combo_, &QComboBox::currentTextChanged, this, fill_providers);
  fill_providers(gpu_combo_->currentText());
  price_ = new QLineEdit;
  price_->setPlaceholderText("catalogue price");
  add_field(cluster_form, "GPU", gpu_combo_, kGpuPtr);
  add_field(cluster_form, "topology", topology_combo_, kTopologyPtr);
  add_field(cluster_form, "nodes", nodes_, kGpusPtr);
  add_field(cluster_form, "offering", offering_combo_, kOfferingPtr);
  add_field(cluster_form, "provider", provider_combo_, kProviderPtr);
  add_field(cluster_form, "USD / GPU-hour", price_, kPricePtr);
  layout->addWidget(cluster_box);

  auto* training_box = new QGroupBox("Training");
  auto* training_form = new QFormLayout(training_box);
  batch_ = new QLineEdit;
  seq_ = new QLineEdit;
  precision_combo_ = new QComboBox;
  for (const auto& [value, name] : EnumTraits<Precision>::kNames) {
    precision_combo_->addItem(qs(name));
  }
  // Transformer Engine's fp8 scaling recipe: what quantizing each fp8 GEMM's input costs.
  fp8_recipe_combo_ = new QComboBox;
  for (const auto& [value, name] : EnumTraits<Fp8Recipe>::kNames) {
    fp8_recipe_combo_->addItem(qs(name));
  }
  fp8_recipe_combo_->setEnabled(false);
  connect(precision_combo_, &QComboBox::currentTextChanged, this, [this](const QString& p) {
    fp8_recipe_combo_->setEnabled(p == qs(to_string(Precision::kFp8)));
  });
  tokens_ = new QLineEdit;
  add_field(training_form, "global batch", batch_, kBatchPtr);
  add_field(training_form, "sequence length", seq_, kSeqPtr);
  add_field(training_form, "precision", precision_combo_, kPrecisionPtr);
  add_field(training_form, "fp8 recipe", fp8_recipe_combo_, kFp8RecipePtr);
  add_field(training_form, "token budget", tokens_, kTokensPtr);
  layout->addWidget(training_box);

  auto* constraints_box = new QGroupBox("Constraints");
  auto* constraints_form = new QFormLayout(constraints_box);
  budget_ = new QLineEdit;
  budget_->setPlaceholderText("none");
  deadline_ = new QLineEdit;
  deadline_->setPlaceholderText("none");
  add_field(constraints_form, "budget (USD)", budget_, kBudgetPtr);
  add_field(constraints_form, "deadline (days)", deadline_, kDeadlinePtr);
  layout->addWidget(constraints_box);

  general_error_ = error_label();
  layout->addWidget(general_error_);
  layout->addStretch();
  for (QLineEdit* e : {nodes_, price_, batch_, seq_, tokens_, budget_, deadline_}) {
    connect(e, &QLineEdit::editingFinished, this, [this] { validate(); });
  }
  return root;
}

Json MainWindow::document() const {
  Json doc = base_doc_.is_object() ? base_doc_ : app::default_scenario_document();
  if (!doc.contains("models") || !doc["models"].is_array() || doc["models"].empty()) {
    doc["models"] = Json::array({""});
  }
  if (model_combo_->currentText() == kCustomModel) {
    Diagnostics ignored;
    auto model = parse_json_text(model_json_->toPlainText().toStdString(), ignored);
    doc["models"][0] = model ? *model : Json(model_json_->toPlainText().toStdString());
  } else {
    doc["models"][0] = model_combo_->currentText().toStdString();
  }
  if (!doc.contains("clusters") || !doc["clusters"].is_array() || doc["clusters"].empty()) {
    doc["clusters"] = Json::array({Json::object()});
  }
  Json& cluster = doc["clusters"][0];
  cluster["gpu"] = gpu_combo_->currentText().toStdString();
  if (topology_combo_->currentText().isEmpty()) {
    cluster.erase("topology");
  } else {
    cluster["topology"] = topology_combo_->currentText().toStdString();
  }
  // Nodes become the document's GPU count (whole nodes of the topology).
  Json probe = doc;
  const int per_node = gpus_per_node(probe);
  const std::optional<Json> nodes = field_value(nodes_->text());
  if (nodes && nodes->is_number_integer() && per_node > 0) {
    cluster["gpus"] = Json::array({nodes->get<std::int64_t>() * per_node});
  } else {
    cluster["gpus"] = nodes ? Json::array({*nodes}) : Json::array();
  }
  cluster["offering"] = offering_combo_->currentText().toStdString();
  if (provider_combo_->currentText().isEmpty()) {
    cluster.erase("provider");
  } else {
    cluster["provider"] = provider_combo_->currentText().toStdString();
  }
  if (auto v = field_value(price_->text())) {
    cluster["usd_per_gpu_hour"] = *v;
  } else {
    cluster.erase("usd_per_gpu_hour");
  }
  put(doc, "training", "global_batch_size", field_value(batch_->text()));
  put(doc, "training", "seq_length", field_value(seq_->text()));
  doc["training"]["precision"] = precision_combo_->currentText().toStdString();
  if (fp8_recipe_combo_->isEnabled()) {
    doc["training"]["fp8_recipe"] = fp8_recipe_combo_->currentText().toStdString();
  } else {
    doc["training"].erase("fp8_recipe");
  }
  put(doc, "training", "token_budget", field_value(tokens_->text()));
  put(doc, "constraints", "budget_usd", field_value(budget_->text()));
  put(doc, "constraints", "deadline_days", field_value(deadline_->text()));
  return doc;
}

void MainWindow::set_document(const Json& doc) {
  base_doc_ = doc;
  auto at = [&doc](std::initializer_list<const char*> path) -> const Json* {
    const Json* j = &doc;
    for (const char* k : path) {
      if (!j->is_object() || !j->contains(k)) return nullptr;
      j = &(*j)[k];
    }
    return j;
  };
  auto text_at = [&](std::initializer_list<const char*> path) {
    const Json* j = at(path);
    return j ? json_text(*j) : QString();
  };
  const Json* models = at({"models"});
  if (models && models->is_array() && !models->empty()) {
    const Json& m = (*models)[0];
    if (m.is_string()) {
      const ModelSpec* preset = builtin_catalog().find_model(m.get<std::string>());
      model_combo_->setCurrentText(preset ? qs(preset->name) : json_text(m));
    } else {
      model_combo_->setCurrentText(kCustomModel);
      model_json_->setPlainText(QString::fromStdString(m.dump(2)));
    }
  }
  const Json* clusters = at({"clusters"});
  if (clusters && clusters->is_array() && !clusters->empty() && (*clusters)[0].is_object()) {
    const Json& c = (*clusters)[0];
    if (c.contains("gpu")) {
      const GpuSpec* g = builtin_catalog().find_gpu(json_text(c["gpu"]).toStdString());
      gpu_combo_->setCurrentText(g ? qs(g->name) : json_text(c["gpu"]));
    }
    topology_combo_->setCurrentText(c.contains("topology") ? json_text(c["topology"]) : "");
    const int per_node = gpus_per_node(doc);
    if (c.contains("gpus") && c["gpus"].is_array() && !c["gpus"].empty()) {
      const Json& g = c["gpus"][0];
      nodes_->setText(g.is_number_integer() && per_node > 0
                          ? QString::number(g.get<std::int64_t>() / per_node)
                          : json_text(g));
    }
    offering_combo_->setCurrentText(c.contains("offering") ? json_text(c["offering"])
                                                           : QString("on-demand"));
    price_->setText(c.contains("usd_per_gpu_hour") ? json_text(c["usd_per_gpu_hour"]) : "");
    const QString provider = c.contains("provider") ? json_text(c["provider"]) : QString();
    if (!provider.isEmpty() && provider_combo_->findText(provider) < 0) {
      provider_combo_->addItem(provider);  // one the catalogue does not know: the sweep says so
    }
    provider_combo_->setCurrentText(provider);
  }
  batch_->setText(text_at({"training", "global_batch_size"}));
  seq_->setText(text_at({"training", "seq_length"}));
  if (const Json* p = at({"training", "precision"}))
    precision_combo_->setCurrentText(json_text(*p));
  const Json* recipe = at({"training", "fp8_recipe"});
  fp8_recipe_combo_->setCurrentText(recipe != nullptr ? json_text(*recipe)
                                                      : qs(to_string(Fp8Recipe::kDelayed)));
  tokens_->setText(text_at({"training", "token_budget"}));
  budget_->setText(text_at({"constraints", "budget_usd"}));
  deadline_->setText(text_at({"constraints", "deadline_days"}));
  fabric_change_ = {};
  clear_errors();
}

void MainWindow::set_field(const std::string& pointer, const QString& text) {
  auto it = fields_.find(pointer);
  if (it == fields_.end()) return;
  if (auto* e = qobject_cast<QLineEdit*>(it->second.editor)) e->setText(text);
  if (auto* c = qobject_cast<QComboBox*>(it->second.editor)) c->setCurrentText(text);
}

void MainWindow::clear_errors() {
  for (auto& [pointer, f] : fields_) {
    f.error->clear();
    f.error->hide();
  }
  general_error_->clear();
  general_error_->hide();
}

void MainWindow::show_diagnostics(const Diagnostics& diag) {
  clear_errors();
  for (const Diagnostic& d : diag.items()) {
    // The field whose pointer is the diagnostic's or a prefix of it, else the general label.
    QLabel* label = general_error_;
    std::size_t best = 0;
    for (auto& [pointer, f] : fields_) {
      const bool match = d.pointer == pointer ||
                         (d.pointer.size() > pointer.size() && d.pointer.starts_with(pointer) &&
                          d.pointer[pointer.size()] == '/');
      if (match && pointer.size() > best) {
        best = pointer.size();
        label = f.error;
      }
    }
    const QString line = QString::fromStdString(diag.format(d));
    label->setText(label->text().isEmpty() ? line : label->text() + "\n" + line);
    label->show();
  }
}

bool MainWindow::validate() {
  const std::string source =
      source_name_.isEmpty() ? std::string(kScenarioSource) : source_name_.toStdString();
  ParsedScenario parsed = parse_scenario(document(), source, fabric_change_);
  show_diagnostics(parsed.diagnostics);
  return parsed.request.has_value();
}

QString MainWindow::field_error(const std::string& pointer) const {
  auto it = fields_.find(pointer);
  if (it == fields_.end()) return pointer.empty() ? general_error_->text() : QString();
  return it->second.error->text();
}

Status MainWindow::load_scenario(const QString& path) {
  PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(path.toStdString()));
  Diagnostics diag(QFileInfo(path).fileName().toStdString());
  auto json = parse_json_text(text, diag);
  if (!json) {
    show_diagnostics(diag);
    return diag.to_status();
  }
  set_document(*json);
  source_name_ = QFileInfo(path).fileName();
  validate();
  return Status::ok();
}

Status MainWindow::save_scenario(const QString& path) {
  PLANNER_RETURN_IF_ERROR(write_text_file_atomic(path.toStdString(), document().dump(2) + "\n"));
  source_name_ = QFileInfo(path).fileName();
  return Status::ok();
}

Status MainWindow::import_hf_config(const QString& path) {
  auto imported = [&]() -> Result<ModelSpec> {
    PLANNER_ASSIGN_OR_RETURN(std::string text, read_text_file(path.toStdString()));
    return planner::import_hf_config(text, path.toStdString());
  }();
  Field& f = fields_[kModelPtr];
  if (!imported.is_ok()) {
    f.error->setText(QString::fromStdString(imported.status().message()));
    f.error->show();
    return imported.status();
  }
  model_combo_->setCurrentText(kCustomModel);
  model_json_->setPlainText(QString::fromStdString(to_json(*imported).dump(2)));
  validate();
  return Status::ok();
}

bool MainWindow::report(const Status& status) {
  if (!status.is_ok()) statusBar()->showMessage(QString::fromStdString(status.message()));
  return status.is_ok();
}

void MainWindow::build_toolbar() {
  QToolBar* bar = addToolBar("main");
  bar->setMovable(false);
  bar->addAction("Load scenario…", this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, "Scenario", {}, "JSON (*.json)");
    if (!path.isEmpty()) report(load_scenario(path));
  });
  bar->addAction("Save scenario…", this, [this] {
    const QString path =
        QFileDialog::getSaveFileName(this, "Scenario", "scenario.json", "JSON (*.json)");
    if (path.isEmpty()) return;
    if (report(save_scenario(path))) statusBar()->showMessage("saved " + path);
  });
  bar->addSeparator();
  run_button_ = new QPushButton("Run sweep");
  cancel_button_ = new QPushButton("Cancel");
  cancel_button_->setEnabled(false);
  connect(run_button_, &QPushButton::clicked, this, &MainWindow::start_sweep);
  connect(cancel_button_, &QPushButton::clicked, this, &MainWindow::cancel_sweep);
  bar->addWidget(run_button_);
  bar->addWidget(cancel_button_);
  bar->addSeparator();
  bar->addAction("Export plan…", this, [this] {
    if (!plan_view_) return;
    const QString path =
        QFileDialog::getSaveFileName(this, "Plan document", "plan.json", "JSON (*.json)");
    if (path.isEmpty()) return;
    if (report(export_plan(path))) statusBar()->showMessage("exported " + path);
  });
}

// ---------------------------------------------------------------- sweep and ranking

QWidget* MainWindow::build_ranking_tab() {
  auto* w = new QWidget;
  auto* layout = new QVBoxLayout(w);
  auto* filter = new QLineEdit;
  filter->setPlaceholderText("filter plans (e.g. 1f1b, zero1, tp4)");
  counts_label_ = new QLabel("Run a sweep to rank the plans of the scenario.");
  ranking_ = new RankingModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(ranking_);
  proxy_->setSortRole(Qt::UserRole);
  proxy_->setFilterKeyColumn(-1);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  connect(filter, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);
  ranking_view_ = new QTableView;
  ranking_view_->setModel(proxy_);
  ranking_view_->setSortingEnabled(true);
  ranking_view_->sortByColumn(RankingModel::kPosition, Qt::AscendingOrder);
  ranking_view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  ranking_view_->setSelectionMode(QAbstractItemView::SingleSelection);
  ranking_view_->horizontalHeader()->setStretchLastSection(true);
  ranking_view_->verticalHeader()->hide();
  connect(ranking_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (!current.isValid()) return;
            const int row = proxy_->mapToSource(current).row();
            show_plan(ranking_->plans()[static_cast<std::size_t>(row)]);
          });
  layout->addWidget(counts_label_);
  layout->addWidget(filter);
  layout->addWidget(ranking_view_);
  return w;
}

void MainWindow::start_sweep() {
  if (runner_->running()) return;
  const std::string source =
      source_name_.isEmpty() ? std::string(kScenarioSource) : source_name_.toStdString();
  ParsedScenario parsed = parse_scenario(document(), source, fabric_change_);
  show_diagnostics(parsed.diagnostics);
  if (!parsed.request) {
    phase_label_->setText("the scenario has errors (see the fields)");
    return;
  }
  run_button_->setEnabled(false);
  cancel_button_->setEnabled(true);
  progress_->setRange(0, 0);
  phase_label_->setText("sweeping…");
  runner_->start(std::move(*parsed.request),
                 recording({{"command", "gui sweep"}, {"scenario", source}}));
}

void MainWindow::cancel_sweep() {
  runner_->cancel();
  what_if_runner_->cancel();
}

void MainWindow::on_progress(int phase, qint64 done, qint64 total) {
  const auto p = static_cast<search::SweepPhase>(phase);
  if (total > 0) {
    progress_->setRange(0, 1000);
    progress_->setValue(static_cast<int>(1000 * done / total));
  }
  phase_label_->setText(QString("%1 %2 / %3").arg(qs(to_string(p))).arg(done).arg(total));
}

void MainWindow::on_sweep_finished(std::shared_ptr<SweepOutcome> outcome) {
  run_button_->setEnabled(true);
  cancel_button_->setEnabled(false);
  progress_->setRange(0, 1);
  progress_->setValue(outcome->status.is_ok() ? 1 : 0);
  if (!outcome->status.is_ok()) {
    phase_label_->setText(QString::fromStdString("sweep: " + outcome->status.message()));
    return;
  }
  outcome_ = outcome;
  const search::SweepResult& r = *outcome->result;
  phase_label_->setText(QString("done: %1 plans ranked").arg(r.ranking.size()) +
                        recorded_text(*outcome));
  if (outcome->recorded) refresh_history();
  counts_label_->setText(
      QString("%1 candidate plans · %2 out of memory · %3 feasible · %4 simulated · estimate vs "
              "simulation: mean %5 % off")
          .arg(r.counts.candidates)
          .arg(r.counts.out_of_memory)
          .arg(r.counts.feasible)
          .arg(r.counts.simulated)
          .arg(r.error.mean_abs_pct, 0, 'f', 1));
  ranking_->set_plans(r.ranking);
  ranking_view_->sortByColumn(RankingModel::kPosition, Qt::AscendingOrder);
  ranking_view_->resizeColumnsToContents();
  show_trade_off();
  if (!r.ranking.empty()) select_row(0);
}

// ---------------------------------------------------------------- the selected plan

QWidget* MainWindow::build_plan_tab() {
  auto* w = new QWidget;
  auto* layout = new QVBoxLayout(w);
  plan_label_ = new QLabel("Select a plan in the ranking.");
  plan_label_->setWordWrap(true);
  memory_chart_ = chart_view();
  time_chart_ = chart_view();
  timeline_ = new TimelineView;
  topology_ = new TopologyView;
  auto* zoom_in = new QPushButton("zoom +");
  auto* zoom_out = new QPushButton("zoom −");
  connect(zoom_in, &QPushButton::clicked, this, [this] { timeline_->zoom_by(2.0); });
  connect(zoom_out, &QPushButton::clicked, this, [this] { timeline_->zoom_by(0.5); });
  auto* timeline_box = new QWidget;
  auto* tl = new QVBoxLayout(timeline_box);
  tl->setContentsMargins(0, 0, 0, 0);
  auto* tl_bar = new QHBoxLayout;
  auto* legend = new QLabel(
      "Pipeline timeline of one step: blue forward, green backward, dark green weight "
      "gradients, yellow recompute; lower lane communication. Wheel or buttons to zoom.");
  legend->setWordWrap(true);
  tl_bar->addWidget(legend, 1);
  tl_bar->addWidget(zoom_out);
  tl_bar->addWidget(zoom_in);
  tl->addLayout(tl_bar);
  tl->addWidget(timeline_);
  auto* top = new QSplitter;
  top->addWidget(memory_chart_);
  top->addWidget(time_chart_);
  auto* bottom = new QSplitter;
  bottom->addWidget(timeline_box);
  bottom->addWidget(topology_);
  bottom->setSizes({700, 450});
  auto* vertical = new QSplitter(Qt::Vertical);
  vertical->addWidget(top);
  vertical->addWidget(bottom);
  vertical->setSizes({460, 400});
  layout->addWidget(plan_label_);
  layout->addWidget(vertical);
  return w;
}

void MainWindow::select_row(int proxy_row) {
  const QModelIndex index = proxy_->index(proxy_row, 0);
  if (!index.isValid()) return;
  ranking_view_->setCurrentIndex(index);
  ranking_view_->selectRow(proxy_row);
}

void MainWindow::select_plan(const search::RankedPlan& plan) {
  for (int row = 0; row < proxy_->rowCount(); ++row) {
    const int source = proxy_->mapToSource(proxy_->index(row, 0)).row();
    if (ranking_->plans()[static_cast<std::size_t>(source)].id == plan.id) {
      select_row(row);
      return;
    }
  }
  show_plan(plan);  // a frontier plan beyond the kept ranking
}

void MainWindow::show_plan(const search::RankedPlan& plan) {
  if (!outcome_ || !outcome_->setup) return;
  auto view = make_plan_view(*outcome_->setup, plan);
  if (!view.is_ok()) {
    plan_label_->setText(QString::fromStdString(view.status().message()));
    return;
  }
  plan_view_ = std::move(*view);
  const sim::SimResult& s = plan_view_->sim;
  plan_label_->setText(
      QString("<b>%1</b> · %2 GPUs · step %3 (simulated) · %4 tokens/s · MFU %5 % · bubble %6 % · "
              "peak %7 GiB of %8 GiB on stage %9 · %10")
          .arg(QString::fromStdString(short_label(plan.parallel)))
          .arg(s.world_size)
          .arg(format_time_s(to_seconds(s.step_time)))
          .arg(s.tokens_per_second, 0, 'f', 0)
          .arg(s.mfu * 100, 0, 'f', 1)
          .arg(s.bubble_fraction * 100, 0, 'f', 1)
          .arg(to_GiB(s.memory.peak), 0, 'f', 1)
          .arg(to_GiB(s.memory.capacity), 0, 'f', 0)
          .arg(s.memory.peak_stage)
          .arg(QString::fromStdString(plan.note)));
  set_chart(memory_chart_, make_memory_chart(s.memory));
  set_chart(time_chart_, make_time_chart(s, plan.estimate));
  timeline_->set_run(s);
  topology_->set_plan(*plan_view_->cluster, plan.parallel, plan_view_->gpu_of_rank);
  if (auto* chart = pareto_chart_->chart()) {
    for (QAbstractSeries* series : chart->series()) {
      if (series->name() == "selected") {
        auto* sel = static_cast<QScatterSeries*>(series);
        sel->clear();
        sel->append(pareto_point(plan));
      }
    }
  }
}

Status MainWindow::export_plan(const QString& path) const {
  if (!plan_view_) return Status::invalid_input("no plan selected");
  return write_text_file_atomic(path.toStdString(), to_json_text(plan_view_->plan));
}

// ---------------------------------------------------------------- trade-off

QWidget* MainWindow::build_trade_off_tab() {
  pareto_chart_ = chart_view();
  return pareto_chart_;
}

void MainWindow::show_trade_off() {
  const search::SweepResult& r = *outcome_->result;
  ParetoChart chart = make_pareto_chart(r.ranking, r.pareto);
  pareto_points_ = r.ranking;
  pareto_points_.insert(pareto_points_.end(), r.pareto.begin(), r.pareto.end());
  connect(chart.plans, &QScatterSeries::clicked, this, &MainWindow::select_pareto_point);
  connect(chart.frontier, &QScatterSeries::clicked, this, &MainWindow::select_pareto_point);
  set_chart(pareto_chart_, chart.chart);
}

void MainWindow::select_pareto_point(QPointF point) {
  // Nearest in units of the points' spread, so both axes count alike.
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const search::RankedPlan& p : pareto_points_) {
    const QPointF q = pareto_point(p);
    x0 = std::min(x0, q.x()), x1 = std::max(x1, q.x());
    y0 = std::min(y0, q.y()), y1 = std::max(y1, q.y());
  }
  const double sx = x1 > x0 ? x1 - x0 : 1.0, sy = y1 > y0 ? y1 - y0 : 1.0;
  const search::RankedPlan* best = nullptr;
  double best_d = 0;
  for (const search::RankedPlan& p : pareto_points_) {
    const QPointF q = pareto_point(p);
    const double d = std::hypot((q.x() - point.x()) / sx, (q.y() - point.y()) / sy);
    if (best == nullptr || d < best_d) best = &p, best_d = d;
  }
  if (best != nullptr) select_plan(*best);
}

// ---------------------------------------------------------------- what-if

QWidget* MainWindow::build_what_if_tab() {
  auto* w = new QWidget;
  auto* layout = new QVBoxLayout(w);
  auto* bar = new QHBoxLayout;
  knob_combo_ = new QComboBox;
  for (const KnobInfo& k : knobs()) {
    knob_combo_->addItem(QString("%1 (%2)").arg(qs(k.name), qs(k.unit)), static_cast<int>(k.knob));
  }
  knob_value_ = new QLineEdit;
  knob_value_->setPlaceholderText("new value, e.g. h200, 8, 0.5, 2, 1.99, 1024");
  auto* compare = new QPushButton("Compare");
  connect(compare, &QPushButton::clicked, this, [this] {
    start_what_if(static_cast<Knob>(knob_combo_->currentData().toInt()), knob_value_->text());
  });
  bar->addWidget(new QLabel("What if"));
  bar->addWidget(knob_combo_);
  bar->addWidget(new QLabel("were"));
  bar->addWidget(knob_value_);
  bar->addWidget(compare);
  what_if_label_ = new QLabel("Change one knob of the scenario and compare the two rankings.");
  what_if_label_->setWordWrap(true);
  what_if_label_->setTextFormat(Qt::RichText);
  what_if_base_ = new RankingModel(this);
  what_if_next_ = new RankingModel(this);
  auto* split = new QSplitter;
  for (auto [model, title] :
       {std::pair{what_if_base_, "now"}, std::pair{what_if_next_, "what if"}}) {
    auto* box = new QGroupBox(title);
    auto* l = new QVBoxLayout(box);
    auto* view = new QTableView;
    view->setModel(model);
    view->verticalHeader()->hide();
    view->setWordWrap(false);
    view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    for (int c :
         {RankingModel::kTp, RankingModel::kPp, RankingModel::kDp, RankingModel::kCp,
          RankingModel::kEp, RankingModel::kMicroBatch, RankingModel::kZero, RankingModel::kOrder,
          RankingModel::kOverlap, RankingModel::kMfu, RankingModel::kHeadroom, RankingModel::kNote,
          RankingModel::kTier, RankingModel::kSchedule, RankingModel::kRecompute,
          RankingModel::kPeakMemory, RankingModel::kTokensPerSecond}) {
      view->setColumnHidden(c, true);
    }
    l->addWidget(view);
    split->addWidget(box);
  }
  what_if_label_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Maximum);
  layout->addLayout(bar);
  layout->addWidget(what_if_label_);
  layout->addWidget(split, 1);
  return w;
}

void MainWindow::start_what_if(Knob knob, const QString& value) {
  if (what_if_runner_->running()) return;
  knob_combo_->setCurrentIndex(knob_combo_->findData(static_cast<int>(knob)));
  knob_value_->setText(value);
  if (!outcome_ || !outcome_->result) {
    what_if_label_->setText("Run the sweep of the scenario first.");
    return;
  }
  auto changed = apply_knob(document(), fabric_change_, knob, value.toStdString());
  if (!changed.is_ok()) {
    what_if_label_->setText(QString::fromStdString(changed.status().message()).toHtmlEscaped());
    return;
  }
  ParsedScenario parsed = parse_scenario(changed->doc, "what-if", changed->change);
  if (!parsed.request) {
    what_if_label_->setText(QString::fromStdString(parsed.diagnostics.to_string()).toHtmlEscaped());
    return;
  }
  for (const KnobInfo& k : knobs()) {
    if (k.knob == knob) what_if_change_ = QString("%1 = %2").arg(qs(k.name), value);
  }
  what_if_label_->setText("sweeping " + what_if_change_ + " …");
  what_if_base_->set_plans(outcome_->result->ranking);
  what_if_runner_->start(
      std::move(*parsed.request),
      recording({{"command", "gui what-if"}, {"change", what_if_change_.toStdString()}}));
}

void MainWindow::on_what_if_finished(std::shared_ptr<SweepOutcome> outcome) {
  if (!outcome->status.is_ok()) {
    what_if_label_->setText(QString::fromStdString("what-if: " + outcome->status.message()));
    return;
  }
  if (outcome->recorded) refresh_history();
  const auto& next = outcome->result->ranking;
  what_if_next_->set_plans(next);
  what_if_next_->set_differences(ranking_differences(*what_if_base_, *what_if_next_));
  const auto& base = what_if_base_->plans();
  if (base.empty() || next.empty()) {
    what_if_label_->setText(what_if_change_ + ": no feasible plan on one side");
    return;
  }
  const search::RankedPlan& a = base.front();
  const search::RankedPlan& b = next.front();
  // Green where the what-if is better (more tokens per dollar, less time or cost), red where worse.
  auto pct = [](double now, double then, bool higher_is_better) {
    const double d = then != 0 ? (now - then) / then * 100 : 0;
    const QString color = std::abs(d) < 0.05            ? "black"
                          : (d > 0) == higher_is_better ? "#2e7d32"
                                                        : "#c62828";
    return QString("<span style='color:%1'>%2%3 %</span>")
        .arg(color)
        .arg(d >= 0 ? "+" : "")
        .arg(d, 0, 'f', 1);
  };
  what_if_label_->setText(
      QString("<b>%1</b>: best plan %2 → %3 · tokens/$ %4 → %5 (%6) · time to train %7 → %8 (%9) "
              "· cost %10 → %11 (%12). Highlighted cells differ from the same rank now.")
          .arg(what_if_change_.toHtmlEscaped())
          .arg(QString::fromStdString(short_label(a.parallel)))
          .arg(QString::fromStdString(short_label(b.parallel)))
          .arg(a.economics.tokens_per_usd, 0, 'f', 0)
          .arg(b.economics.tokens_per_usd, 0, 'f', 0)
          .arg(pct(b.economics.tokens_per_usd, a.economics.tokens_per_usd, true))
          .arg(format_time_s(a.economics.time_to_train_s))
          .arg(format_time_s(b.economics.time_to_train_s))
          .arg(pct(b.economics.time_to_train_s, a.economics.time_to_train_s, false))
          .arg(format_usd(a.economics.total_cost.raw()))
          .arg(format_usd(b.economics.total_cost.raw()))
          .arg(pct(b.economics.total_cost.raw(), a.economics.total_cost.raw(), false)) +
      where_it_runs(outcome->result->scenarios));
}

QString MainWindow::what_if_summary() const {
  return what_if_label_->text();
}

// ---------------------------------------------------------------- history

QWidget* MainWindow::build_history_tab() {
  auto* w = new QWidget;
  auto* layout = new QVBoxLayout(w);
  auto* bar = new QHBoxLayout;
  db_path_ = new QLineEdit(store::kDefaultDatabasePath);
  auto* refresh = new QPushButton("Refresh");
  connect(refresh, &QPushButton::clicked, this, &MainWindow::refresh_history);
  bar->addWidget(new QLabel("database"));
  bar->addWidget(db_path_);
  bar->addWidget(refresh);
  history_ = new QTableWidget(0, 6);
  history_->setHorizontalHeaderLabels({"run", "kind", "status", "label", "created", "plans"});
  history_->setSelectionBehavior(QAbstractItemView::SelectRows);
  history_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  history_->verticalHeader()->hide();
  history_->horizontalHeader()->setStretchLastSection(true);
  connect(history_, &QTableWidget::currentCellChanged, this,
          [this](int row) { select_history_row(row); });
  accuracy_chart_ = chart_view();
  history_text_ = new QPlainTextEdit;
  history_text_->setReadOnly(true);
  auto* split = new QSplitter;
  split->addWidget(history_);
  auto* right = new QSplitter(Qt::Vertical);
  right->addWidget(accuracy_chart_);
  right->addWidget(history_text_);
  right->setSizes({500, 250});
  split->addWidget(right);
  split->setSizes({450, 650});
  layout->addLayout(bar);
  layout->addWidget(split);
  return w;
}

Recording MainWindow::recording(Json origin) const {
  return {app::DatabaseRef{db_path_->text().toStdString(), false}, std::move(origin)};
}

QString MainWindow::recorded_text(const SweepOutcome& outcome) const {
  if (outcome.recorded) {
    return QString(" · recorded as run %1 in %2").arg(*outcome.recorded).arg(db_path_->text());
  }
  if (!outcome.recording.is_ok()) {
    return QString::fromStdString(" · not recorded: " + outcome.recording.message());
  }
  return {};
}

void MainWindow::set_database_path(const QString& path) {
  db_path_->setText(path);
  refresh_history();
}

void MainWindow::refresh_history() {
  history_->setRowCount(0);
  auto db = app::open_existing_db({db_path_->text().toStdString(), false});
  if (!db.is_ok()) {
    history_text_->setPlainText(QString::fromStdString(db.status().message()));
    return;
  }
  store::RunFilter filter;
  filter.limit = kHistoryLimit;
  auto runs = store::list_runs(*db, filter);
  if (!runs.is_ok()) {
    history_text_->setPlainText(QString::fromStdString(runs.status().message()));
    return;
  }
  history_->setRowCount(static_cast<int>(runs->size()));
  for (int i = 0; i < static_cast<int>(runs->size()); ++i) {
    const store::RunRecord& r = (*runs)[static_cast<std::size_t>(i)];
    const QStringList cells{
        QString::number(r.id.value),
        qs(to_string(r.kind)),
        qs(to_string(r.status)),
        QString::fromStdString(r.label),
        QDateTime::fromMSecsSinceEpoch(r.created_unix_ms, Qt::UTC).toString(Qt::ISODate),
        QString::number(r.plan_count)};
    for (int c = 0; c < cells.size(); ++c)
      history_->setItem(i, c, new QTableWidgetItem(cells[c]));
  }
  history_->resizeColumnsToContents();
  history_text_->setPlainText(QString("%1 runs in %2").arg(runs->size()).arg(db_path_->text()));
}

void MainWindow::select_history_row(int row) {
  if (row < 0 || row >= history_->rowCount()) return;
  history_->selectRow(row);
  const store::RunId id{history_->item(row, 0)->text().toLongLong()};
  auto db = app::open_existing_db({db_path_->text().toStdString(), false});
  if (!db.is_ok()) return;
  QString text;
  if (history_->item(row, 1)->text() == "exec") {
    auto c = store::compare_run(*db, id);
    if (c.is_ok()) {
      set_chart(accuracy_chart_, make_accuracy_chart(*c));
      text += QString("Run %1: predicted vs measured per op kind (ms per step)\n").arg(id.value);
      for (const store::OpKindComparison& k : c->by_op_kind) {
        const auto e = k.relative_error();
        text += QString("%1  predicted %2  measured %3  %4\n")
                    .arg(QString::fromStdString(k.op_kind), -16)
                    .arg(to_milliseconds(k.predicted), 9, 'f', 3)
                    .arg(to_milliseconds(k.measured), 9, 'f', 3)
                    .arg(e ? QString("%1 %").arg(*e * 100, 0, 'f', 1) : QString("-"));
      }
    } else {
      text += QString::fromStdString(c.status().message()) + "\n";
    }
  } else {
    set_chart(accuracy_chart_, new QChart);
  }
  auto sweep = store::get_sweep_results(*db, id, 20);
  if (sweep.is_ok() && !sweep->empty()) {
    text += "Sweep results (best first):\n";
    for (const store::SweepResultRecord& s : *sweep) {
      text += QString("%1. %2  %3 tokens/$  %4\n")
                  .arg(s.position)
                  .arg(QString::fromStdString(s.plan_label))
                  .arg(s.objective, 0, 'f', 0)
                  .arg(QString::fromStdString(s.note));
    }
  }
  auto runs = store::get_run(*db, id);
  if (runs.is_ok() && !runs->failure_reason.empty()) {
    text += "failed: " + QString::fromStdString(runs->failure_reason) + "\n";
  }
  history_text_->setPlainText(text);
}

QString MainWindow::history_details() const {
  return history_text_->toPlainText();
}

// ---------------------------------------------------------------- run

QWidget* MainWindow::build_run_tab() {
  auto* w = new QWidget;
  auto* layout = new QVBoxLayout(w);
  auto* bar = new QHBoxLayout;
  launcher_combo_ = new QComboBox;
  launcher_combo_->addItems({"local", "slurm"});
  steps_ = new QLineEdit(QString::number(kDefaultExecSteps));
  auto* start = new QPushButton("Run the selected plan (planner exec)");
  auto* stop = new QPushButton("Stop");
  connect(start, &QPushButton::clicked, this, [this] { start_run(); });
  connect(stop, &QPushButton::clicked, this, [this] {
    if (process_) process_->terminate();
  });
  bar->addWidget(new QLabel("launcher"));
  bar->addWidget(launcher_combo_);
  bar->addWidget(new QLabel("steps"));
  bar->addWidget(steps_);
  bar->addWidget(start);
  bar->addWidget(stop);
  bar->addStretch();
  run_log_ = new QPlainTextEdit;
  run_log_->setReadOnly(true);
  run_log_->setFont(QFont("DejaVu Sans Mono"));
  layout->addLayout(bar);
  layout->addWidget(run_log_);
  return w;
}

bool MainWindow::start_run() {
  if (process_) {
    run_log_->appendPlainText("a run is already in progress");
    return false;
  }
  if (!plan_view_) {
    run_log_->appendPlainText("select a plan first");
    return false;
  }
  const QString plan_path = QDir::temp().filePath(
      QString("planner-gui-plan-%1.json").arg(QCoreApplication::applicationPid()));
  if (Status s = export_plan(plan_path); !s.is_ok()) {
    run_log_->appendPlainText(QString::fromStdString(s.message()));
    return false;
  }
  // The CLI beside this executable (installed together), else the one on PATH.
  QString program = QCoreApplication::applicationDirPath() + "/planner";
  if (!QFileInfo(program).isExecutable()) program = "planner";
  const QStringList args{"exec",    plan_path,      "--launch", launcher_combo_->currentText(),
                         "--steps", steps_->text(), "--db",     db_path_->text()};
  process_ = new QProcess(this);
  process_->setProcessChannelMode(QProcess::MergedChannels);
  connect(process_, &QProcess::readyRead, this,
          [this] { run_log_->appendPlainText(QString::fromUtf8(process_->readAll()).trimmed()); });
  connect(process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus) {
    run_log_->appendPlainText(QString("planner exec finished with exit code %1").arg(code));
    process_->deleteLater();
    process_ = nullptr;
    refresh_history();
    if (code == 0 && history_->rowCount() > 0) {
      select_history_row(0);  // the newest run: its measurements
      tabs_->setCurrentIndex(kHistoryTab);
    }
  });
  connect(process_, &QProcess::errorOccurred, this, [this, program](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) {
      run_log_->appendPlainText("could not start " + program);
    }
  });
  run_log_->appendPlainText("$ " + program + " " + args.join(' '));
  process_->start(program, args);
  return true;
}

QString MainWindow::run_log() const {
  return run_log_->toPlainText();
}

}  // namespace planner::gui
