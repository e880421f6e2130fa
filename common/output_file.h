// A report file that a long run writes at its end: checked before the run, written after it.
#ifndef CHRONOSERVE_COMMON_OUTPUT_FILE_H_
#define CHRONOSERVE_COMMON_OUTPUT_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace chronoserve {

// Writes `contents` to `path`; INTERNAL with the path (and errno's text) on failure. The file is
// replaced whole or not at all: the contents go to a file beside it that is renamed over it once
// written, so a failed write (a full disk) leaves the old file as it was and no partial one. Links
// are followed by the kernel (the file a link names is replaced, the link stays; a link naming no
// file yet gets it created there) and the replaced file's mode is kept. The process's own output
// (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, or any path to the file descriptor 1 or 2
// is open on) is written through its descriptor, after what is there. Written in place instead of
// replaced: a device or pipe (/dev/null), a file with other hard links or of another owner, a
// writable file in a directory that is not, a name too long for the temporary's suffix, and a file
// that cannot be renamed over (bind-mounted alone, another filesystem).
absl::Status WriteFile(const std::string& path, const std::string& contents);
// Whether WriteFile(path, ...) could create or replace `path` now (its directory exists and is
// writable; the path, if it exists, is a writable file), without touching it: checked before a run
// that may take hours, not after. INVALID_ARGUMENT naming `flag`, the path and what is wrong.
absl::Status CheckWritable(const std::string& flag, const std::string& path);
// Why a `kind` ("file", "socket") cannot be created at `path` now, from its parent directory: missing
// ("directory 'D' does not exist"), no directory, or not writable and searchable; "" when nothing
// there stands in the way.
std::string WhyCannotCreateIn(const std::string& path, const std::string& kind);
// Whether two report paths lead to one file: the same regular file when both exist (links
// followed; /dev/null twice is no collision), else the same path once `.`, `..` and the links in
// its existing part are resolved.
bool SameFile(const std::string& a, const std::string& b);

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_OUTPUT_FILE_H_
