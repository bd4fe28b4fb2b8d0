// planner-gui: the desktop front-end over the same libraries as the `planner` CLI.
//   planner-gui [SCENARIO.json] [--sweep] [--exit-after-sweep]
#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>
#include <cstdio>

#include "main_window.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("planner-gui");
  QCommandLineParser parser;
  parser.setApplicationDescription("planner's desktop app: scenarios, sweeps, plans, what-ifs");
  parser.addHelpOption();
  parser.addPositionalArgument("scenario", "A sweep document (kind \"sweep\") to open");
  QCommandLineOption sweep("sweep", "Run the scenario's sweep at start");
  QCommandLineOption exit_after("exit-after-sweep",
                                "Quit when the sweep has finished (exit code 1 if it failed)");
  parser.addOption(sweep);
  parser.addOption(exit_after);
  parser.process(app);

  planner::gui::MainWindow window;
  if (!parser.positionalArguments().isEmpty()) {
    const planner::Status s = window.load_scenario(parser.positionalArguments().front());
    if (!s.is_ok()) std::fprintf(stderr, "planner-gui: %s\n", s.message().c_str());
  }
  window.show();
  if (parser.isSet(exit_after)) {
    QObject::connect(&window.runner(), &planner::gui::SweepRunner::finished, &app,
                     [](const std::shared_ptr<planner::gui::SweepOutcome>& outcome) {
                       QTimer::singleShot(
                           0, [ok = outcome->status.is_ok()] { QApplication::exit(ok ? 0 : 1); });
                     });
  }
  if (parser.isSet(sweep) || parser.isSet(exit_after)) {
    QTimer::singleShot(0, &window, [&window] { window.start_sweep(); });
  }
  return QApplication::exec();
}
