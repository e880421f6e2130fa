#include "server/core/batch_size_list.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace chronoserve::server {

absl::StatusOr<std::vector<int>> ParseBatchSizeList(absl::string_view list, int max_items,
                                                    absl::string_view beyond_max, absl::string_view usage) {
  std::vector<int> sizes;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int size = 0;
    if (!absl::SimpleAtoi(part, &size) || size <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", part, "' is not a positive integer", usage));
    }
    if (size > max_items) return absl::InvalidArgumentError(absl::StrCat(size, beyond_max));
    sizes.push_back(size);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

}  // namespace chronoserve::server
