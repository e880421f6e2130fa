#include "tools/profile/profile_report.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/dtype.h"
#include "common/output_file.h"

namespace chronoserve::profile {
namespace {

using nlohmann::json;

json SpreadJson(const Spread& s) {
  return {{"median_us", s.median}, {"p10_us", s.p10}, {"p90_us", s.p90}, {"samples", s.samples}};
}

json InputsJson(const ProfileReport& r) {
  json inputs = json::array();
  for (const InputShape& in : r.inputs) inputs.push_back({{"name", in.name}, {"dims", in.dims}, {"source", in.source}});
  return inputs;
}

std::string Cell(const Spread& s) { return absl::StrFormat("%.1f [%.1f-%.1f]", s.median, s.p10, s.p90); }

void PrintMode(const ModeProfile& mode, std::ostream& out) {
  out << "\n== " << mode.mode << (mode.note.empty() ? "" : " (" + mode.note + ")") << "\n";
  if (!mode.measured) return;
  out << absl::StrFormat("%6s  %-27s %-27s %-27s %-27s %-27s %12s\n", "batch", "compute us", "launch us",
                         "h2d us", "d2h us", "wall us", "items/s");
  for (const BatchProfile& b : mode.batches) {
    out << absl::StrFormat("%6d  %-27s %-27s %-27s %-27s %-27s %12.0f\n", b.batch_size, Cell(b.compute_us),
                           Cell(b.launch_us), Cell(b.h2d_us), Cell(b.d2h_us), Cell(b.wall_us), b.items_per_s);
  }
}

const ModeProfile* MeasuredMode(const ProfileReport& r, const std::string& name) {
  for (const ModeProfile& m : r.modes) {
    if (m.mode == name && m.measured) return &m;
  }
  return nullptr;
}

// Eager compute from events on an idle stream next to the device time alone: the difference is the
// GPU waiting for the host to launch (TIMING.md lesson 4).
void PrintLaunchStalls(const ProfileReport& r, std::ostream& out) {
  const ModeProfile* eager = MeasuredMode(r, "eager");
  const ModeProfile* exact = MeasuredMode(r, "eager_exact");
  if (eager == nullptr || exact == nullptr || eager->batches.size() != exact->batches.size()) return;
  out << "\n== eager compute: events on an idle stream vs device time only (eager_exact)\n";
  out << absl::StrFormat("%6s  %14s %14s %14s %9s\n", "batch", "events med us", "device med us", "stall us",
                         "ratio");
  for (size_t i = 0; i < eager->batches.size(); ++i) {
    const double events = eager->batches[i].compute_us.median;
    const double device = exact->batches[i].compute_us.median;
    out << absl::StrFormat("%6d  %14.1f %14.1f %14.1f %8.2fx\n", eager->batches[i].batch_size, events, device,
                           events - device, device > 0 ? events / device : 0);
  }
}

// "INPUT__0 [64] (config), INPUT__1 [7,3] (--shape)".
std::string InputsLine(const ProfileReport& r) {
  std::vector<std::string> parts;
  for (const InputShape& in : r.inputs) {
    parts.push_back(absl::StrCat(in.name, " ", ShapeString(in.dims), " (", in.source, ")"));
  }
  return absl::StrJoin(parts, ", ");
}

void PrintThroughput(const ProfileReport& r, std::ostream& out) {
  const ThroughputSearch& t = r.throughput;
  if (r.max_batch_size <= 0) {
    out << "\n== throughput search (eager; the model does not batch: batch 1 only)\n";
  } else {
    const std::string reach = t.search_max_batch > r.max_batch_size ? "past max_batch_size up to" : "up to";
    out << "\n== throughput search (eager, batch size doubled from 1 " << reach << " --search-max-batch "
        << t.search_max_batch << "; stopped by " << t.stopped_by << ")\n";
  }
  out << absl::StrFormat("%6s  %14s %14s\n", "batch", "wall med us", "items/s");
  for (const ThroughputPoint& p : t.points) {
    std::string marks;
    if (p.above_max_batch_size) absl::StrAppend(&marks, "  (> max_batch_size: the server never runs it)");
    if (p.batch_size == t.best_batch_size) absl::StrAppend(&marks, "  <- best");
    out << absl::StrFormat("%6d  %14.1f %14.0f%s\n", p.batch_size, p.wall_median_us, p.items_per_s, marks);
  }
  if (!t.stop_error.empty()) out << t.stopped_by << ": " << t.stop_error << "\n";
}

void PrintMistakes(const ProfileReport& r, std::ostream& out) {
  out << "\n== four classic timing mistakes (eager, batch size " << r.mistakes_batch_size << ")\n";
  out << absl::StrFormat("%-36s %12s %12s %8s  %s\n", "mistake", "mistaken us", "correct us", "ratio",
                         "mistaken figure / correct figure");
  for (const TimingMistake& m : r.mistakes) {
    if (!m.measured) {
      out << absl::StrFormat("%-36s %12s %12.1f %8s  %s\n", m.name, "n/a", m.correct_us, "n/a", m.note);
      continue;
    }
    std::string details;
    for (const auto& [key, value] : m.details_us) absl::StrAppend(&details, details.empty() ? " (" : ", ", key, " ",
                                                                  absl::StrFormat("%.1f", value));
    if (!details.empty()) details += ")";
    out << absl::StrFormat("%-36s %12.1f %12.1f %7.2fx  %s / %s%s\n", m.name, m.mistaken_us, m.correct_us, m.ratio,
                           m.what, m.correct_figure, details);
  }
}

}  // namespace

void PrintReport(const ProfileReport& r, std::ostream& out) {
  out << "model '" << r.model << "' version " << r.version << " on " << r.device << ", max_batch_size "
      << r.max_batch_size << ", "
      << r.warmup_runs << " warm-up runs and " << r.repetitions << " measured runs per batch size\n"
      << "inputs (dims without the batch dim): " << InputsLine(r) << "\n"
      << "timing: " << r.timing_note << "\n"
      << "cells: median [p10-p90]; wall = host time around one whole batch (stage, copies, forward, wait)\n";
  for (const ModeProfile& m : r.modes) PrintMode(m, out);
  PrintLaunchStalls(r, out);

  if (!r.throughput.points.empty() || !r.throughput.stopped_by.empty()) PrintThroughput(r, out);
  PrintMistakes(r, out);
}

std::string ReportToJson(const ProfileReport& r) {
  json doc = {{"schema", kProfileSchema},
              {"model", r.model},
              {"version", r.version},
              {"device", r.device},
              {"device_timed", r.device_timed},
              {"timing_note", r.timing_note},
              {"max_batch_size", r.max_batch_size},
              {"inputs", InputsJson(r)},
              {"warmup_runs", r.warmup_runs},
              {"repetitions", r.repetitions},
              {"batch_sizes", r.batch_sizes}};
  json modes = json::array();
  for (const ModeProfile& m : r.modes) {
    json batches = json::array();
    for (const BatchProfile& b : m.batches) {
      batches.push_back({{"batch_size", b.batch_size},
                         {"compute", SpreadJson(b.compute_us)},
                         {"launch", SpreadJson(b.launch_us)},
                         {"h2d", SpreadJson(b.h2d_us)},
                         {"d2h", SpreadJson(b.d2h_us)},
                         {"wall", SpreadJson(b.wall_us)},
                         {"items_per_s", b.items_per_s}});
    }
    modes.push_back({{"mode", m.mode}, {"measured", m.measured}, {"note", m.note}, {"batches", batches}});
  }
  doc["modes"] = modes;
  json points = json::array();
  for (const ThroughputPoint& p : r.throughput.points) {
    points.push_back({{"batch_size", p.batch_size}, {"wall_median_us", p.wall_median_us},
                      {"items_per_s", p.items_per_s}, {"above_max_batch_size", p.above_max_batch_size}});
  }
  // Not searched (--no-throughput-search), or nothing measured before the search stopped: no best.
  const bool searched = r.throughput.search_max_batch > 0;
  const bool found = !r.throughput.points.empty();
  doc["throughput"] = {{"measured", found},
                       {"points", points},
                       {"best_batch_size", found ? json(r.throughput.best_batch_size) : json(nullptr)},
                       {"best_items_per_s", found ? json(r.throughput.best_items_per_s) : json(nullptr)},
                       {"search_max_batch", searched ? json(r.throughput.search_max_batch) : json(nullptr)},
                       {"memory_limit_batch_size", r.throughput.memory_limit_batch_size > 0
                                                       ? json(r.throughput.memory_limit_batch_size)
                                                       : json(nullptr)},
                       {"stopped_by", r.throughput.stopped_by},
                       {"stop_error", r.throughput.stop_error}};
  json mistakes = json::array();
  for (const TimingMistake& m : r.mistakes) {
    // Not measured: the figure is absent (null), never a made-up number.
    mistakes.push_back({{"name", m.name}, {"what", m.what}, {"measured", m.measured}, {"note", m.note},
                        {"mistaken_us", m.measured ? json(m.mistaken_us) : json(nullptr)},
                        {"correct_figure", m.correct_figure}, {"correct_us", m.correct_us},
                        {"ratio", m.measured ? json(m.ratio) : json(nullptr)}, {"details_us", m.details_us}});
  }
  doc["mistakes"] = {{"batch_size", r.mistakes_batch_size}, {"rows", mistakes}};
  // A model path that is not UTF-8 (any bytes are a Linux path) gets U+FFFD, not an exception.
  return doc.dump(2, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

absl::Status WriteJson(const ProfileReport& report, const std::string& path) {
  return WriteFile(path, ReportToJson(report) + "\n");
}

}  // namespace chronoserve::profile
