#include "server/backend/script_error.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace chronoserve::server {
namespace {

bool Indented(absl::string_view line) { return !line.empty() && absl::ascii_isspace(line.front()); }

// "RuntimeError: ...", "builtins.AssertionError: ...": how the interpreter's error itself begins.
bool BeginsError(absl::string_view line) {
  const size_t colon = line.find(": ");
  if (Indented(line) || colon == line.npos || colon == 0) return false;
  const absl::string_view name = line.substr(0, colon);
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.') return false;
  }
  return absl::EndsWith(name, "Error") || absl::EndsWith(name, "Exception");
}

// `File "<string>", line 4, in forward` -> `in forward, "<string>" line 4`.
std::string Where(absl::string_view frame) {
  const size_t in = frame.rfind(", in ");
  if (!absl::StartsWith(frame, "File ") || in == frame.npos) return std::string(frame);
  absl::string_view file_and_line = frame.substr(5, in - 5);  // `"<string>", line 4`
  const size_t comma = file_and_line.rfind(", line ");
  if (comma == file_and_line.npos) return std::string(frame);
  return absl::StrCat("in ", frame.substr(in + 5), ", ", file_and_line.substr(0, comma), " line ",
                      file_and_line.substr(comma + 7));
}

std::string JoinLines(const std::vector<absl::string_view>& lines, size_t from, size_t to) {
  std::vector<absl::string_view> kept;
  for (size_t i = from; i < to; ++i) {
    const absl::string_view text = absl::StripAsciiWhitespace(lines[i]);
    if (!text.empty() && text != ":") kept.push_back(text);
  }
  return absl::StrJoin(kept, "; ");
}

}  // namespace

std::string OneLineScriptError(absl::string_view what) {
  const std::vector<absl::string_view> lines = absl::StrSplit(absl::StripTrailingAsciiWhitespace(what), '\n');
  // Where the source context begins (a traceback heading or a frame), the last frame and the last
  // marker. The model's own source may sit at column 0 in that context, so indentation does not
  // tell it from the message.
  size_t context = lines.size();
  size_t frame = lines.size();
  size_t marker = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    const absl::string_view text = absl::StripAsciiWhitespace(lines[i]);
    const bool heading = absl::StartsWith(lines[i], "Traceback of TorchScript");
    if (heading || absl::StartsWith(text, "File \"")) {
      context = std::min(context, i);
      if (!heading) frame = i;
    }
    if (absl::EndsWith(text, "<--- HERE")) marker = i;
  }
  if (context == lines.size()) return JoinLines(lines, 0, lines.size());
  // The message: what precedes the context (the compiler's errors; the interpreter's preamble is
  // dropped) and, after the last marker, the interpreter's error from its "...Error: " line on.
  std::string message;
  for (size_t i = 0; i < context; ++i) {
    if (absl::StartsWith(lines[i], "The following operation failed in the TorchScript interpreter")) continue;
    const std::string text = JoinLines(lines, i, i + 1);
    if (!text.empty()) absl::StrAppend(&message, message.empty() ? "" : "; ", text);
  }
  size_t error = lines.size();
  for (size_t i = marker == lines.size() ? context : marker + 1; i < lines.size(); ++i) {
    if (BeginsError(lines[i])) {
      error = i;
      break;
    }
  }
  if (error < lines.size()) {
    absl::StrAppend(&message, message.empty() ? "" : "; ", JoinLines(lines, error, lines.size()));
  } else if (message.empty()) {
    return JoinLines(lines, 0, lines.size());  // a form not recognised: all of it, on one line
  }
  if (frame < lines.size()) {
    absl::StrAppend(&message, " (", Where(absl::StripAsciiWhitespace(lines[frame])));
    if (marker < lines.size() && marker > frame + 1) {
      absl::StrAppend(&message, ": ", absl::StripAsciiWhitespace(lines[marker - 1]));
    }
    message.push_back(')');
  }
  return message;
}

}  // namespace chronoserve::server
