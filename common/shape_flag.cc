#include "common/shape_flag.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace chronoserve {

absl::Status ParseShapeFlag(absl::string_view text, std::map<std::string, std::vector<int64_t>>* shapes) {
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--shape '", text, "': expected NAME:d1,d2,..."));
  }
  std::vector<int64_t> dims;
  for (absl::string_view d : absl::StrSplit(text.substr(colon + 1), ',')) {
    int64_t x = 0;
    if (!absl::SimpleAtoi(d, &x) || x < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--shape '", text, "': dim '", d, "' is not a positive integer"));
    }
    dims.push_back(x);
  }
  auto [it, inserted] = shapes->emplace(std::string(text.substr(0, colon)), std::move(dims));
  if (!inserted) {
    return absl::InvalidArgumentError(absl::StrCat("--shape '", text, "': input '", it->first, "' was given a shape already"));
  }
  return absl::OkStatus();
}

}  // namespace chronoserve
