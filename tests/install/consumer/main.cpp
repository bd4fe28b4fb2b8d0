// Uses the installed planner libraries: loads the built-in presets and prints a parameter count.
#include <iostream>

#include "planner/core/catalog.hpp"

int main() {
  auto model = planner::builtin_catalog().model("llama3-8b");
  if (!model) {
    std::cerr << model.status().message() << '\n';
    return 1;
  }
  std::cout << model->name << ' ' << model->total_params() << '\n';
  return model->total_params() == 8030261248 ? 0 : 1;
}
