#include "common/otlp/otlp_file_exporter.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace chronoserve::otlp {
namespace {

namespace collector = opentelemetry::proto::collector::trace::v1;
namespace common = opentelemetry::proto::common::v1;
namespace trace = opentelemetry::proto::trace::v1;

// A JSON string: escaped, invalid UTF-8 replaced by U+FFFD.
void AppendString(const std::string& text, std::string* out) {
  bool plain = true;  // printable ASCII with nothing to escape: the common case, copied as it is
  for (char c : text) plain &= c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  if (plain) {
    absl::StrAppend(out, "\"", text, "\"");
  } else {
    out->append(nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

void AppendKey(const char* key, std::string* out) { absl::StrAppend(out, "\"", key, "\":"); }

// protobuf's JSON mapping, which OTLP/JSON follows: a double as the shortest text that reads back
// the same, and the three values JSON has no number for as strings.
void AppendDouble(double d, std::string* out) {
  if (std::isnan(d)) {
    out->append("\"NaN\"");
  } else if (std::isinf(d)) {
    out->append(d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else {
    out->append(nlohmann::json(d).dump());
  }
}

void AppendValue(const common::AnyValue& v, std::string* out) {
  out->push_back('{');
  switch (v.value_case()) {
    case common::AnyValue::kIntValue: absl::StrAppend(out, "\"intValue\":\"", v.int_value(), "\""); break;
    case common::AnyValue::kBoolValue: absl::StrAppend(out, "\"boolValue\":", v.bool_value() ? "true" : "false"); break;
    case common::AnyValue::kDoubleValue:
      AppendKey("doubleValue", out);
      AppendDouble(v.double_value(), out);
      break;
    default:
      AppendKey("stringValue", out);
      AppendString(v.string_value(), out);
  }
  out->push_back('}');
}

void AppendAttributes(const google::protobuf::RepeatedPtrField<common::KeyValue>& attributes, std::string* out) {
  AppendKey("attributes", out);
  out->push_back('[');
  for (int i = 0; i < attributes.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->append("{\"key\":");
    AppendString(attributes[i].key(), out);
    out->append(",\"value\":");
    AppendValue(attributes[i].value(), out);
    out->push_back('}');
  }
  out->push_back(']');
}

// The Span fields EncodeExportRequest sets (no events or links: chronoserve makes none).
void AppendSpan(const trace::Span& span, std::string* out) {
  absl::StrAppend(out, "{\"traceId\":\"", absl::BytesToHexString(span.trace_id()), "\",\"spanId\":\"",
                  absl::BytesToHexString(span.span_id()), "\"");
  if (!span.parent_span_id().empty()) {
    absl::StrAppend(out, ",\"parentSpanId\":\"", absl::BytesToHexString(span.parent_span_id()), "\"");
  }
  if (!span.trace_state().empty()) {
    out->append(",\"traceState\":");
    AppendString(span.trace_state(), out);
  }
  absl::StrAppend(out, ",\"flags\":", span.flags(), ",\"name\":");
  AppendString(span.name(), out);
  absl::StrAppend(out, ",\"kind\":", static_cast<int>(span.kind()), ",\"startTimeUnixNano\":\"",
                  span.start_time_unix_nano(), "\",\"endTimeUnixNano\":\"", span.end_time_unix_nano(), "\",");
  AppendAttributes(span.attributes(), out);
  if (span.has_status()) {
    absl::StrAppend(out, ",\"status\":{\"code\":", static_cast<int>(span.status().code()));
    if (!span.status().message().empty()) {
      out->append(",\"message\":");
      AppendString(span.status().message(), out);
    }
    out->push_back('}');
  }
  out->push_back('}');
}

}  // namespace

std::string OtlpJsonLine(const collector::ExportTraceServiceRequest& request) {
  std::string out = "{\"resourceSpans\":[";
  for (int r = 0; r < request.resource_spans_size(); ++r) {
    const trace::ResourceSpans& rs = request.resource_spans(r);
    if (r > 0) out.push_back(',');
    out.append("{\"resource\":{");
    AppendAttributes(rs.resource().attributes(), &out);
    out.append("},\"scopeSpans\":[");
    for (int s = 0; s < rs.scope_spans_size(); ++s) {
      const trace::ScopeSpans& ss = rs.scope_spans(s);
      if (s > 0) out.push_back(',');
      out.append("{\"scope\":{\"name\":");
      AppendString(ss.scope().name(), &out);
      if (!ss.scope().version().empty()) {
        out.append(",\"version\":");
        AppendString(ss.scope().version(), &out);
      }
      out.append("},\"spans\":[");
      for (int i = 0; i < ss.spans_size(); ++i) {
        if (i > 0) out.push_back(',');
        AppendSpan(ss.spans(i), &out);
      }
      out.append("]}");
    }
    out.append("]}");
  }
  out.append("]}");
  return out;
}

absl::StatusOr<std::unique_ptr<OtlpFileExporter>> OtlpFileExporter::Create(const std::string& path,
                                                                         const OtlpResource& resource,
                                                                         bool regular_only) {
  if (path.empty()) return absl::InvalidArgumentError("trace file: the path is empty");
  auto not_regular = [&path] {
    return absl::InvalidArgumentError(
        absl::StrCat("trace file '", path, "' is not a regular file (a pipe, socket or device): refused"));
  };
  const int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | (regular_only ? O_NOFOLLOW | O_NONBLOCK : 0);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    const int error = errno;
    if (regular_only && error == ENXIO) return not_regular();  // a pipe with no reader, a device with none behind it
    return absl::InvalidArgumentError(absl::StrCat(
        "trace file '", path, "' cannot be opened for appending: ",
        regular_only && error == ELOOP ? "it is a symbolic link (not followed for a file a client names)"
                                       : std::strerror(error)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("trace file '", path, "': ", std::strerror(error)));
  }
  const bool regular = S_ISREG(st.st_mode);
  if (regular_only && !regular) {
    ::close(fd);
    return not_regular();
  }
  if (regular_only && st.st_nlink > 1) {  // another name for a file elsewhere, which O_NOFOLLOW does not see
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("trace file '", path, "' has other hard links (another name for a file elsewhere): refused"));
  }
  // A regular file's writes do not block; a pipe's or device's wait in Export, bounded.
  const int status_flags = ::fcntl(fd, F_GETFL);
  if (status_flags >= 0) ::fcntl(fd, F_SETFL, regular ? status_flags & ~O_NONBLOCK : status_flags | O_NONBLOCK);
  // A file whose last line has no newline (a server killed mid-write): the first line starts afresh.
  // (Read through a descriptor of its own: the appending one is write-only. Opened without waiting
  // (nor, for a client's name, following a link), and used only if it is the file opened above: the
  // name may name something else by now, a pipe whose open would block included.)
  bool torn = false;
  if (regular) {
    const int read_flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (regular_only ? O_NOFOLLOW : 0);
    if (const int reader = ::open(path.c_str(), read_flags); reader >= 0) {
      struct stat same;
      if (::fstat(reader, &same) == 0 && same.st_dev == st.st_dev && same.st_ino == st.st_ino) {
        char last = '\n';
        if (const off_t size = ::lseek(reader, 0, SEEK_END); size > 0) {
          torn = ::pread(reader, &last, 1, size - 1) == 1 && last != '\n';
        }
      }
      ::close(reader);
    }
  }
  return std::unique_ptr<OtlpFileExporter>(new OtlpFileExporter(path, fd, resource, torn));
}

OtlpFileExporter::OtlpFileExporter(std::string path, int fd, const OtlpResource& resource, bool torn)
    : path_(std::move(path)), fd_(fd), resource_(resource), torn_(torn) {}

OtlpFileExporter::~OtlpFileExporter() { ::close(fd_); }

namespace {
// write(2) to a pipe whose reader is gone raises SIGPIPE, which by default ends the process (the
// server, every request in flight with it) unless something ignores it process-wide. Here the
// signal is held back on this thread for the write and, when the write raised it (EPIPE), taken
// off the thread's pending set, so the export fails with EPIPE instead, whatever the process's
// disposition.
ssize_t WriteWithoutSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_only, before;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  const bool held = ::pthread_sigmask(SIG_BLOCK, &pipe_only, &before) == 0;
  const bool already = held && ::sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  const ssize_t n = ::write(fd, data, size);
  const int error = errno;
  if (held) {
    if (n < 0 && error == EPIPE && !already) {
      const struct timespec now = {0, 0};
      while (::sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
  errno = error;
  return n;
}
}  // namespace

absl::StatusOr<ExportResult> OtlpFileExporter::Export(const std::vector<SpanData>& spans, absl::Time deadline) {
  if (shut_down_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(absl::StrCat("trace file '", path_, "': the exporter is shut down"));
  }
  if (spans.empty()) return ExportResult{};
  std::string line;
  // A line cut short earlier (a write that failed part way, or a process killed mid-write) must not
  // swallow this one: start on a fresh line.
  if (torn_) line.push_back('\n');
  line += OtlpJsonLine(EncodeExportRequest(resource_, spans));
  line.push_back('\n');
  struct stat before;
  const bool sized = ::fstat(fd_, &before) == 0;
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = WriteWithoutSigpipe(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // A pipe or device that takes no more now: wait for room, until the deadline or Shutdown.
      const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left_ms > 0 && !shut_down_.load(std::memory_order_acquire)) {
        struct pollfd room = {fd_, POLLOUT, 0};
        ::poll(&room, 1, static_cast<int>(std::min<int64_t>(left_ms, kShutdownPollMs)));
        continue;
      }
    }
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      // A full disk or a size limit often takes part of a line first. Cut the file back to where it
      // was, unless something else appended meanwhile; failing that, the next line starts afresh.
      if (written > 0) {
        struct stat now;
        const bool only_ours = sized && ::fstat(fd_, &now) == 0 &&
                               now.st_size == before.st_size + static_cast<off_t>(written);
        if (!only_ours || ::ftruncate(fd_, before.st_size) != 0) torn_ = true;
      }
      const bool stalled = error == EAGAIN || error == EWOULDBLOCK;
      return absl::UnavailableError(absl::StrCat(
          "trace file '", path_, "': writing ", spans.size(), " spans failed: ",
          stalled ? (shut_down_.load(std::memory_order_acquire)
                         ? "its reader took no more before the exporter was shut down"
                         : "its reader took no more before the export's deadline")
                  : std::strerror(error)));
    }
    written += static_cast<size_t>(n);
  }
  torn_ = false;
  return ExportResult{};
}

void OtlpFileExporter::Shutdown() { shut_down_.store(true, std::memory_order_release); }

}  // namespace chronoserve::otlp
