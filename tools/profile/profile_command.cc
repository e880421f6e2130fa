#include "tools/profile/profile_command.h"

#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/cli_integer.h"
#include "common/log.h"
#include "common/output_file.h"
#include "common/shape_flag.h"
#include "tools/profile/input_shapes.h"
#include "tools/profile/model_profiler.h"
#include "tools/profile/profile_report.h"

namespace chronoserve::profile {

int RunProfileCommand(int argc, char** argv) {
  ProfileOptions options;
  std::string model_dir;
  std::string json_path;
  bool no_graphs = false;
  bool no_exact = false;
  bool no_search = false;
  std::vector<std::string> shapes;
  CLI::App app{"chronoserve profile (also chronoserve-profile): offline timing of one model directory (no gRPC): "
               "per batch size, median and p10/p90 of h2d/compute/launch/d2h and host wall time, eager, CUDA-graph "
               "and exact-device-timing "
               "modes, a throughput search up to the memory limit and the four classic timing mistakes"};
  // As invoked: `chronoserve profile` (argv[0] is then "profile") or chronoserve-profile.
  app.name(std::string(argv[0]) == "profile" ? "chronoserve profile" : argv[0]);
  app.add_option("model_dir", model_dir, "Model directory in Triton's layout: DIR/config.pbtxt, DIR/<version>/model.pt")
      ->required();
  app.add_option("--batch-sizes", options.batch_sizes, "Comma-separated batch sizes; 'max' = max_batch_size")
      ->capture_default_str();
  // At least 10 measured runs, so p10 and p90 are more than the extremes, and one warm-up run, so the
  // "no warm-up" row compares a cold run against warm ones: the methodology this command teaches.
  app.add_option("--repetitions", options.repetitions, "Measured runs per batch size (at least 10: p10/p90)")
      ->capture_default_str()
      ->transform(IntegerIn(10, 1000000));
  app.add_option("--warmup-runs", options.warmup_runs, "Warm-up runs per batch size before measuring")
      ->capture_default_str()
      ->transform(IntegerIn(1, 1000000));
  app.add_option("--gpu", options.gpu, "CUDA device ordinal; -1 = CPU; default: GPU 0 when present")
      ->transform(IntegerIn(-1, 1023));
  app.add_option("--shape", shapes,
                 "NAME:d1,d2,... for an input's variable dims (without the batch dim); repeat per input. "
                 "Default: the first model_warmup sample's dims; a variable dim with neither is an error")
      ->allow_extra_args(false);
  app.add_option("--search-max-batch", options.search_max_batch,
                 "Largest batch size the throughput search tries (it goes past max_batch_size, doubling, "
                 "until out of memory or this). Default: 4096 or 2 x max_batch_size, the larger, on a GPU; "
                 "max_batch_size on the CPU")
      ->transform(IntegerIn(1, 1 << 30));
  app.add_option("--mistakes-batch-size", options.mistakes_batch_size,
                 "Batch size of the timing-mistakes table, at most max_batch_size (default: the largest profiled)")
      ->transform(IntegerIn(1, 1 << 30));
  app.add_option("--model-version", options.model_version,
                 "The version to profile, one its version_policy serves (default: the highest)")
      ->transform(IntegerIn(1, std::numeric_limits<int64_t>::max()));
  app.add_option("--seed", options.seed, "Seed of the random inputs")
      ->capture_default_str()
      ->transform(IntegerIn(0, std::numeric_limits<int64_t>::max()));  // base 10, as every other flag
  app.add_flag("--no-graphs", no_graphs, "Skip the CUDA-graph mode");
  app.add_flag("--no-exact-timing", no_exact,
               "Skip the eager_exact mode (exact device timing: stream held until each batch is enqueued)");
  app.add_flag("--no-throughput-search", no_search, "Skip the throughput search");
  CLI::Option* json_flag = app.add_option("--json", json_path, "Also write the whole report as JSON to this file");
  // --help and --version exit 0; a bad flag exits 2, as every other start-up error of a flag does.
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  options.cuda_graphs = !no_graphs;
  options.exact_device_timing = !no_exact;
  options.throughput_search = !no_search;
  // The list's syntax is a flag's: checked here (exit 2); sizes are clipped to the model's later.
  if (absl::StatusOr<std::vector<int>> sizes = ResolveBatchSizes(options.batch_sizes, 1); !sizes.ok()) {
    CS_LOG(ERROR) << sizes.status().message();
    return 2;
  }
  for (const std::string& shape : shapes) {
    if (absl::Status s = ParseShapeFlag(shape, &options.shapes); !s.ok()) {
      CS_LOG(ERROR) << s.message();
      return 2;  // a bad flag, as CLI11's own
    }
  }
  // Before a profile that may take minutes, not after it.
  if (json_flag->count() > 0 && json_path.empty()) {
    CS_LOG(ERROR) << "--json: a file path is needed";
    return 2;
  }
  if (!json_path.empty()) {
    if (absl::Status s = CheckWritable("--json", json_path); !s.ok()) {
      CS_LOG(ERROR) << s.message();
      return 2;
    }
  }

  auto report = ProfileModel(model_dir, options);
  if (!report.ok()) {
    CS_LOG(ERROR) << report.status().message();
    return 1;
  }
  PrintReport(*report, std::cout);
  if (!json_path.empty()) {
    if (absl::Status s = WriteJson(*report, json_path); !s.ok()) {
      CS_LOG(ERROR) << s.message();
      return 1;
    }
    std::cout << "\nwrote " << json_path << "\n";
  }
  return 0;
}

}  // namespace chronoserve::profile
