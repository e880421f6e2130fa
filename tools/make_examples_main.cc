// chronoserve-examples: writes the example model repository (policy_net, mlp) without Python.
#include <CLI/CLI.hpp>
#include <iostream>

#include "common/cli_integer.h"
#include "tools/example_models.h"

int main(int argc, char** argv) {
  std::string out = "models";
  CLI::App app{"Writes an example chronoserve model repository (TorchScript + config.pbtxt)"};
  app.add_option("--out", out, "Repository directory to write")->capture_default_str();
  if (std::optional<int> code = chronoserve::ParseFlags(app, argc, argv)) return *code;
  if (absl::Status s = chronoserve::examples::WriteExampleRepository(out); !s.ok()) {
    std::cerr << "chronoserve-examples: " << s.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << out << "/policy_net and " << out << "/mlp\n";
  return 0;
}
