// bench_timing_encoding: what per-request timing costs the host, per response, without a network:
// the server's share (timing.* parameters into the response, its serialization, the server-timing
// trailer string) and the client's (parsing the response, decoding the timing), against the same
// response without timing. Three ways a server fills its response: a fresh message per response
// (unary ModelInfer on the callback API), a message reused with ClearKeepingTimingParams (what
// ModelStreamInfer's slots and the asynchronous API's ResponsePool do), and no timing
// (--request-timing off). The client reads each response twice: into a fresh ModelInferResponse
// (InferenceClient::DecodeTiming, what any KServe client does) and into a reused view
// (client/response_view.h, what chronobench does). Medians of rounds, ns per response.
//
//   bench_timing_encoding --responses 200000 --rounds 5 --json timing_encoding.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "client/inference_client.h"
#include "client/response_view.h"
#include "common/cli_integer.h"
#include "common/clock.h"
#include "common/timing.h"
#include "server/grpc/infer_dispatcher.h"

namespace {
using chronoserve::RequestTiming;

enum class Mode { kFresh, kReused, kOff };
const char* Name(Mode m) { return m == Mode::kFresh ? "fresh message, timing on" : m == Mode::kReused ? "reused message, timing on" : "timing off"; }

struct Cost {
  double server_ns = 0;  // fill + serialize (+ trailer string when on)
  double client_ns = 0;  // parse + decode timing, fresh message
  double view_ns = 0;    // parse + decode timing, reused view
  size_t bytes = 0;      // serialized response
};

// A 1-item response as the mlp example returns it: one 16-float output.
void FillOutputs(inference::ModelInferResponse* r, const std::string& raw) {
  r->set_model_name("mlp");
  r->set_model_version("1");
  auto* out = r->add_outputs();
  out->set_name("OUTPUT__0");
  out->set_datatype("FP32");
  out->add_shape(1);
  out->add_shape(16);
  r->add_raw_output_contents(raw);
}

Cost Run(Mode mode, int responses, const std::string& raw, std::mt19937_64& rng) {
  RequestTiming t;
  t.batch_size = 1;
  t.worker = 0;
  t.device_timed = true;
  inference::ModelStreamInferResponse slot;
  chronoserve::view::ModelInferResponseView view;
  std::string wire, trailer;
  size_t bytes = 0;
  int64_t server_ns = 0, client_ns = 0, view_ns = 0, checksum = 0;
  for (int i = 0; i < responses; ++i) {
    t.queue_ns = static_cast<int64_t>(rng() % 100000);
    t.compute_ns = static_cast<int64_t>(rng() % 1000000);
    t.server_total_ns = t.queue_ns + t.compute_ns + 5000;
    const int64_t s0 = chronoserve::SteadyClock::Now();
    if (mode == Mode::kReused) {
      chronoserve::server::ClearKeepingTimingParams(&slot);
      inference::ModelInferResponse* r = slot.mutable_infer_response();
      FillOutputs(r, raw);
      chronoserve::server::AddTimingParams(t, r);
      r->SerializeToString(&wire);
    } else {
      inference::ModelInferResponse r;
      FillOutputs(&r, raw);
      if (mode == Mode::kFresh) {
        chronoserve::server::AddTimingParams(t, &r);
        trailer = chronoserve::EncodeServerTiming(t);
      }
      r.SerializeToString(&wire);
    }
    const int64_t s1 = chronoserve::SteadyClock::Now();
    inference::ModelInferResponse parsed;
    parsed.ParseFromString(wire);
    auto decoded = chronoserve::client::InferenceClient::DecodeTiming(parsed);
    const int64_t s2 = chronoserve::SteadyClock::Now();
    view.ParseFromString(wire);
    auto viewed = chronoserve::client::DecodeTiming(view);
    const int64_t s3 = chronoserve::SteadyClock::Now();
    if (decoded.has_value()) checksum += decoded->queue_ns;
    if (viewed.has_value()) checksum += viewed->compute_ns;
    server_ns += s1 - s0;
    client_ns += s2 - s1;
    view_ns += s3 - s2;
    bytes = wire.size();
  }
  if (checksum == 42) std::printf(" ");  // keeps the decode from being optimised away
  return {static_cast<double>(server_ns) / responses, static_cast<double>(client_ns) / responses,
          static_cast<double>(view_ns) / responses, bytes};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int responses = 200000, rounds = 5;
  std::string json_path;
  CLI::App app{"bench_timing_encoding: host cost of per-request timing per response (no network)"};
  app.add_option("--responses", responses, "Responses per round and mode")->capture_default_str()->transform(chronoserve::IntegerIn(1, 100000000));
  app.add_option("--rounds", rounds, "Rounds (modes alternate within each); medians are reported")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(1, 100000000));
  app.add_option("--json", json_path, "Write the results as JSON");
  if (std::optional<int> code = chronoserve::ParseFlags(app, argc, argv)) return *code;

  std::mt19937_64 rng(20261123);
  std::string raw(16 * sizeof(float), '\0');
  for (char& c : raw) c = static_cast<char>(rng() | 1);  // never all zeros
  const Mode modes[] = {Mode::kFresh, Mode::kReused, Mode::kOff};
  std::vector<std::vector<Cost>> costs(3);
  for (int round = 0; round < rounds; ++round) {
    for (int m = 0; m < 3; ++m) costs[m].push_back(Run(modes[m], responses, raw, rng));
  }
  std::printf("%-32s%12s%12s%12s%10s\n", "server fills response", "server ns", "client ns", "view ns", "bytes");
  nlohmann::json out = {{"responses", responses}, {"rounds", rounds}, {"modes", nlohmann::json::array()}};
  double off_server = 0, off_client = 0, off_view = 0;
  for (int m = 2; m >= 0; --m) {
    std::vector<double> s, c, v;
    for (const Cost& k : costs[m]) {
      s.push_back(k.server_ns);
      c.push_back(k.client_ns);
      v.push_back(k.view_ns);
    }
    const double ms = Median(s), mc = Median(c), mv = Median(v);
    if (modes[m] == Mode::kOff) off_server = ms, off_client = mc, off_view = mv;
    out["modes"].push_back({{"mode", Name(modes[m])}, {"server_ns", ms}, {"client_ns", mc}, {"view_ns", mv},
                            {"bytes", costs[m].back().bytes}, {"server_rounds_ns", s}, {"client_rounds_ns", c},
                            {"view_rounds_ns", v}});
  }
  for (int m = 0; m < 3; ++m) {
    const auto& j = out["modes"][2 - m];
    std::printf("%-32s%12.0f%12.0f%12.0f%10zu\n", Name(modes[m]), j["server_ns"].get<double>(), j["client_ns"].get<double>(),
                j["view_ns"].get<double>(), j["bytes"].get<size_t>());
  }
  for (int m = 0; m < 2; ++m) {
    const auto& j = out["modes"][2 - m];
    std::printf("%s: timing adds %.0f ns on the server, %.0f ns on a client's fresh message, %.0f ns on a reused view\n",
                Name(modes[m]), j["server_ns"].get<double>() - off_server, j["client_ns"].get<double>() - off_client,
                j["view_ns"].get<double>() - off_view);
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
