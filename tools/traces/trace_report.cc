#include "tools/traces/trace_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/histogram.h"

namespace chronoserve::traces {
namespace {

using nlohmann::json;

constexpr int kServer = 2;
constexpr int kClient = 3;

// OTLP/JSON writes 64-bit integers as decimal strings; other writers may use numbers.
bool ReadInt(const json& value, int64_t* out) {
  if (value.is_number_integer()) {
    *out = value.get<int64_t>();
    return true;
  }
  if (value.is_number_unsigned()) {
    *out = static_cast<int64_t>(value.get<uint64_t>());
    return true;
  }
  if (!value.is_string()) return false;
  // Signed first: an intValue may be negative (chronoserve.gpu is -1 on a CPU instance). Unsigned
  // for a fixed64 time beyond int64's range.
  const std::string text = value.get<std::string>();
  if (absl::SimpleAtoi(text, out)) return true;
  uint64_t u = 0;
  if (!absl::SimpleAtoi(text, &u)) return false;
  *out = static_cast<int64_t>(u);
  return true;
}

std::string StringOr(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string ValueText(const json& value) {
  if (auto s = value.find("stringValue"); s != value.end() && s->is_string()) return s->get<std::string>();
  if (auto i = value.find("intValue"); i != value.end()) {
    int64_t n = 0;
    return ReadInt(*i, &n) ? absl::StrCat(n) : std::string();
  }
  if (auto b = value.find("boolValue"); b != value.end() && b->is_boolean()) return b->get<bool>() ? "true" : "false";
  if (auto d = value.find("doubleValue"); d != value.end() && d->is_number()) return absl::StrCat(d->get<double>());
  return "";
}

// One span object; false (with `why`) when a field the report needs is missing or malformed.
bool ReadSpan(const json& s, TraceSpan* out, std::string* why) {
  if (!s.is_object()) return *why = "a span is not an object", false;
  out->trace_id = StringOr(s, "traceId");
  out->span_id = StringOr(s, "spanId");
  out->parent_span_id = StringOr(s, "parentSpanId");
  out->name = StringOr(s, "name");
  if (out->span_id.empty()) return *why = "a span has no spanId", false;
  int64_t n = 0;
  if (auto kind = s.find("kind"); kind != s.end() && ReadInt(*kind, &n)) out->kind = static_cast<int>(n);
  if (auto start = s.find("startTimeUnixNano"); start == s.end() || !ReadInt(*start, &out->start_ns)) {
    return *why = absl::StrCat("span '", out->name, "' has no startTimeUnixNano"), false;
  }
  if (auto end = s.find("endTimeUnixNano"); end == s.end() || !ReadInt(*end, &out->end_ns)) {
    return *why = absl::StrCat("span '", out->name, "' has no endTimeUnixNano"), false;
  }
  if (auto status = s.find("status"); status != s.end() && status->is_object()) {
    if (auto code = status->find("code"); code != status->end() && ReadInt(*code, &n)) out->status = static_cast<int>(n);
  }
  if (auto attributes = s.find("attributes"); attributes != s.end() && attributes->is_array()) {
    for (const json& kv : *attributes) {
      if (!kv.is_object() || !kv.contains("key") || !kv["key"].is_string() || !kv.contains("value")) continue;
      out->attributes[kv["key"].get<std::string>()] = ValueText(kv["value"]);
    }
  }
  return true;
}

absl::Status ReadLine(const std::string& line, std::vector<TraceSpan>* spans) {
  const json request = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded() || !request.is_object()) return absl::InvalidArgumentError("not a JSON object");
  auto rs = request.find("resourceSpans");
  if (rs == request.end() || !rs->is_array()) return absl::InvalidArgumentError("no resourceSpans list");
  for (const json& resource_spans : *rs) {
    auto ss = resource_spans.find("scopeSpans");
    if (ss == resource_spans.end() || !ss->is_array()) continue;
    for (const json& scope_spans : *ss) {
      auto list = scope_spans.find("spans");
      if (list == scope_spans.end() || !list->is_array()) continue;
      for (const json& s : *list) {
        TraceSpan span;
        std::string why;
        if (!ReadSpan(s, &span, &why)) return absl::InvalidArgumentError(why);
        spans->push_back(std::move(span));
      }
    }
  }
  return absl::OkStatus();
}

PhaseStats Stats(std::vector<int64_t> ns) {
  PhaseStats stats;
  stats.count = static_cast<int64_t>(ns.size());
  if (ns.empty()) return stats;
  std::sort(ns.begin(), ns.end());
  auto at = [&](double p) { return static_cast<double>(ns[Histogram::PercentileRank(p, stats.count) - 1]) / 1e3; };
  stats.p50_us = at(50);
  stats.p99_us = at(99);
  double sum = 0;
  for (int64_t v : ns) sum += static_cast<double>(v);
  stats.mean_us = sum / static_cast<double>(ns.size()) / 1e3;
  return stats;
}

}  // namespace

absl::StatusOr<std::vector<TraceSpan>> ReadTraceFile(const std::string& path, TornLines* torn) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read trace file '", path, "'"));
  std::vector<TraceSpan> spans;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (absl::Status s = ReadLine(line, &spans); !s.ok()) {
      // Torn: begun as an export request, cut before it parses.
      if (absl::StartsWith(line, "{\"resourceSpans\"") && !json::accept(line)) {
        if (torn != nullptr && torn->count++ == 0) torn->first = number;
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat("trace file '", path, "' line ", number,
                                                     ": ", s.message(), " (expected OTLP/JSON: one "
                                                     "ExportTraceServiceRequest a line, as --trace-file writes)"));
    }
  }
  return spans;
}

TraceReport SummarizeTraces(const std::vector<TraceSpan>& spans, const std::string& group_by) {
  TraceReport report;
  report.group_by = group_by;
  report.spans = static_cast<int64_t>(spans.size());
  // Ids are unique within a trace only: every key is "trace id/span id".
  auto id = [](const std::string& trace, const std::string& span) { return absl::StrCat(trace, "/", span); };
  // The same span read again (same ids, name and times) counts once; another span with the ids of
  // one read before (two runs that drew the same ids) is a span of its own, an id collision.
  std::unordered_map<std::string, std::vector<const TraceSpan*>> kept_by_id;  // every different span of an id
  std::vector<const TraceSpan*> unique;
  for (const TraceSpan& s : spans) {
    std::vector<const TraceSpan*>& kept = kept_by_id[id(s.trace_id, s.span_id)];
    const bool read_before = std::any_of(kept.begin(), kept.end(), [&s](const TraceSpan* k) {
      return k->name == s.name && k->start_ns == s.start_ns && k->end_ns == s.end_ns;
    });
    if (read_before) {
      ++report.duplicates;
      continue;
    }
    if (!kept.empty()) ++report.id_collisions;
    kept.push_back(&s);
    unique.push_back(&s);
  }
  std::unordered_map<std::string, std::vector<const TraceSpan*>> clients;   // by id
  std::unordered_map<std::string, std::vector<const TraceSpan*>> children;  // by parent's id
  for (const TraceSpan* s : unique) {
    if (s->kind == kClient) {
      clients[id(s->trace_id, s->span_id)].push_back(s);
      ++report.client_spans;
    } else if (s->kind != kServer && !s->parent_span_id.empty()) {
      children[id(s->trace_id, s->parent_span_id)].push_back(s);
    }
  }
  // A server span's client span: the one its parent id names, or where several carry that id, the
  // only one whose time holds the server span's (none when two do).
  auto client_of = [&](const TraceSpan& s) -> const TraceSpan* {
    if (s.parent_span_id.empty()) return nullptr;
    auto it = clients.find(id(s.trace_id, s.parent_span_id));
    if (it == clients.end()) return nullptr;
    if (it->second.size() == 1) return it->second.front();
    const TraceSpan* holder = nullptr;
    for (const TraceSpan* c : it->second) {
      if (c->start_ns > s.start_ns || s.end_ns > c->end_ns) continue;
      if (holder != nullptr) return nullptr;
      holder = c;
    }
    return holder;
  };
  std::unordered_map<const TraceSpan*, int> server_children;  // by client span
  for (const TraceSpan* s : unique) {
    if (s->kind != kServer) continue;
    if (const TraceSpan* client = client_of(*s)) ++server_children[client];
  }
  // By (model, group value): numeric values in numeric order ("2" before "16"), then the others.
  using Key = std::tuple<std::string, bool, int64_t, std::string>;
  std::map<Key, ModelTraces> models;
  std::map<Key, std::map<std::string, std::vector<int64_t>>> durations;  // -> phase -> ns
  for (const TraceSpan* span : unique) {
    const TraceSpan& s = *span;
    auto model_name = s.attributes.find("chronoserve.model.name");
    if (s.kind != kServer || model_name == s.attributes.end()) continue;
    std::string value;
    if (!group_by.empty()) {
      auto it = s.attributes.find(group_by);
      value = it != s.attributes.end() ? it->second : "(none)";
    }
    int64_t number = 0;
    const bool numeric = absl::SimpleAtoi(value, &number);
    const Key key{model_name->second, !numeric, number, value};
    ModelTraces& m = models[key];
    m.model = model_name->second;
    m.group_value = value;
    ++m.requests;
    if (s.status == 2) ++m.errors;
    auto& phases = durations[key];
    const int64_t server_ns = s.end_ns - s.start_ns;
    phases["server"].push_back(server_ns);
    if (auto it = children.find(id(s.trace_id, s.span_id)); it != children.end()) {
      for (const TraceSpan* child : it->second) phases[child->name].push_back(child->end_ns - child->start_ns);
    }
    if (const TraceSpan* client = client_of(s); client != nullptr && client->status != 2 && server_children[client] == 1) {
      ++m.with_client;
      const int64_t e2e_ns = client->end_ns - client->start_ns;
      phases["e2e"].push_back(e2e_ns);
      phases["transport"].push_back(e2e_ns - server_ns);
    }
  }
  for (auto& [key, m] : models) {
    for (auto& [phase, ns] : durations[key]) m.phases[phase] = Stats(std::move(ns));
    report.models.push_back(std::move(m));
  }
  return report;
}

std::string FormatTraceReport(const TraceReport& report) {
  std::string out = absl::StrFormat("%d span(s) read, %d of them client spans\n", report.spans, report.client_spans);
  if (report.duplicates > 0) {
    absl::StrAppendFormat(&out, "%d span(s) read twice (the same trace and span id: a file given twice?) counted once\n",
                          report.duplicates);
  }
  if (report.id_collisions > 0) {
    absl::StrAppendFormat(&out,
                          "%d span(s) carry the trace and span id of another, different span (two runs that drew the "
                          "same ids?): each server span joined to the one client span whose time holds it\n",
                          report.id_collisions);
  }
  if (report.models.empty()) {
    absl::StrAppend(&out, "no server span (ModelInfer / ModelStreamInfer with chronoserve.model.name) found\n");
  }
  for (const ModelTraces& m : report.models) {
    const std::string group = report.group_by.empty() ? "" : absl::StrCat(", ", report.group_by, "=", m.group_value);
    absl::StrAppendFormat(&out, "\nmodel '%s'%s: %d request(s), %d error(s), %d with their client span\n", m.model,
                          group, m.requests, m.errors, m.with_client);
    absl::StrAppendFormat(&out, "%-14s %8s %12s %12s %12s\n", "phase", "count", "p50 (us)", "p99 (us)", "mean (us)");
    for (const std::string& phase : TracePhases()) {
      auto it = m.phases.find(phase);
      if (it == m.phases.end()) continue;
      const PhaseStats& p = it->second;
      absl::StrAppendFormat(&out, "%-14s %8d %12.1f %12.1f %12.1f\n", phase, p.count, p.p50_us, p.p99_us, p.mean_us);
    }
  }
  return out;
}

nlohmann::json TraceReportJson(const TraceReport& report) {
  json out = {{"group_by", report.group_by}, {"spans", report.spans}, {"duplicate_spans", report.duplicates}, {"id_collisions", report.id_collisions}, {"client_spans", report.client_spans}, {"models", json::array()}};
  for (const ModelTraces& m : report.models) {
    json phases = json::object();
    for (const auto& [name, p] : m.phases) {
      phases[name] = {{"count", p.count}, {"p50_us", p.p50_us}, {"p99_us", p.p99_us}, {"mean_us", p.mean_us}};
    }
    json row = {{"model", m.model},
                {"requests", m.requests},
                {"errors", m.errors},
                {"with_client", m.with_client},
                {"phases", std::move(phases)}};
    if (!report.group_by.empty()) row["group"] = {{report.group_by, m.group_value}};
    out["models"].push_back(std::move(row));
  }
  return out;
}

}  // namespace chronoserve::traces
