#ifndef CHRONOSERVE_SERVER_BACKEND_SCRIPT_ERROR_H_
#define CHRONOSERVE_SERVER_BACKEND_SCRIPT_ERROR_H_

// TorchScript's interpreter reports a failure in forward() as a page: two tracebacks (the
// serialized code and the original source), each with context lines and a "<--- HERE" marker, then
// the error itself. An answer's status message and a load error read better as one line: the error,
// then where in the model's source it happened. Pure text, no LibTorch.

#include <string>

#include "absl/strings/string_view.h"

namespace chronoserve::server {

// "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x8 and 3x3) (in forward, "<string>"
// line 4: return torch.matmul(x, torch.ones([3, 3])))" for the interpreter's page; any other text
// with its line breaks turned into "; " (a c10 error's message may span lines too).
std::string OneLineScriptError(absl::string_view what);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_SCRIPT_ERROR_H_
