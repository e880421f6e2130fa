// A strict CSV reader for chronobench's --csv output, shared by the unit test (synthetic report) and
// the end-to-end test (the binary's file): it reads the text as a CSV reader would and refuses what
// is not CSV, so the tests never split on commas or line breaks that a quoted field may hold.
#ifndef CHRONOSERVE_TESTS_CLIENT_CSV_PARSE_H_
#define CHRONOSERVE_TESTS_CLIENT_CSV_PARSE_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace chronoserve::client::bench::testing {

// RFC 4180 quoting with LF line ends (chronobench's): fields quoted or not, "" inside quotes, line
// breaks inside quotes kept; every record ends with '\n'. An error for text that is not CSV.
inline absl::StatusOr<std::vector<std::vector<std::string>>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false;       // inside a quoted field
  bool after_quote = false;  // a quoted field just closed: only ',' or the line break may follow
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c != '"') {
        field += c;
      } else if (i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else {
        quoted = false;
        after_quote = true;
      }
    } else if (c == ',' || c == '\n') {
      record.push_back(std::move(field));
      field.clear();
      after_quote = false;
      if (c == '\n') {
        records.push_back(std::move(record));
        record.clear();
      }
    } else if (after_quote) {
      return absl::InvalidArgumentError(absl::StrCat("text after a closing quote at offset ", i));
    } else if (c == '"') {
      if (!field.empty()) return absl::InvalidArgumentError(absl::StrCat("a quote inside a field at offset ", i));
      quoted = true;
    } else {
      field += c;
    }
  }
  if (quoted || after_quote || !field.empty() || !record.empty()) {
    return absl::InvalidArgumentError("the text does not end with a complete record");
  }
  return records;
}

// The index of the column `name` in `header`; a failure (and header.size()) when there is none.
inline size_t Column(const std::vector<std::string>& header, const std::string& name) {
  const auto it = std::find(header.begin(), header.end(), name);
  EXPECT_NE(it, header.end()) << name;
  return static_cast<size_t>(it - header.begin());
}

}  // namespace chronoserve::client::bench::testing

#endif  // CHRONOSERVE_TESTS_CLIENT_CSV_PARSE_H_
