// OneLineScriptError: TorchScript's multi-line pages (the interpreter's two tracebacks, the
// compiler's source excerpt) as one line: the error, then where in the model's source.
#include "server/backend/script_error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chronoserve::server {
namespace {

// As LibTorch 1.13's interpreter reports an operator's failure in a model made with define().
constexpr char kInterpreterPage[] =
    "The following operation failed in the TorchScript interpreter.\n"
    "Traceback of TorchScript, serialized code (most recent call last):\n"
    "  File \"code/__torch__.py\", line 14, in forward\n"
    "    _2 = torch.select(torch.select(x, 0, 0), 0, 1)\n"
    "    if bool(torch.gt(_2, 100.)):\n"
    "      _4 = torch.matmul(x, torch.ones([3, 3]))\n"
    "           ~~~~~~~~~~~~ <--- HERE\n"
    "      _3 = _4\n"
    "    else:\n"
    "\n"
    "Traceback of TorchScript, original code (most recent call last):\n"
    "  File \"<string>\", line 4, in forward\n"
    "  assert bool(x[0, 0] < 100.0), 'first value out of range'\n"
    "  if bool(x[0, 1] > 100.0):\n"
    "    return torch.matmul(x, torch.ones([3, 3]))\n"
    "           ~~~~~~~~~~~~ <--- HERE\n"
    "  return x * 2.0\n"
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x8 and 3x3)\n";

TEST(ScriptErrorTest, TheInterpretersPageBecomesTheErrorAndTheOriginalSourceLine) {
  EXPECT_EQ(OneLineScriptError(kInterpreterPage),
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x8 and 3x3) (in forward, \"<string>\" line 4: "
            "return torch.matmul(x, torch.ones([3, 3])))");
}

// The model's source at column 0 in the context (define()'s first line) is not taken for the
// message; a message of several lines keeps them all; the innermost frame of a nested call wins.
TEST(ScriptErrorTest, SourceAtColumnZeroAndNestedFramesAndLongMessages) {
  const std::string page =
      "The following operation failed in the TorchScript interpreter.\n"
      "Traceback of TorchScript (most recent call last):\n"
      "  File \"<string>\", line 5, in forward\n"
      "def forward(self, x):\n"
      "    return self.helper(x)\n"
      "           ~~~~~~~~~~~ <--- HERE\n"
      "  File \"<string>\", line 2, in helper\n"
      "def helper(self, x):\n"
      "  assert bool(x[0, 0] < 100.0), 'out of range'\n"
      "  ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n"
      "def unrelated(self, y):\n"
      "RuntimeError: AssertionError: out of range\n"
      "second line of the message\n";
  EXPECT_EQ(OneLineScriptError(page),
            "RuntimeError: AssertionError: out of range; second line of the message (in helper, \"<string>\" line 2: "
            "assert bool(x[0, 0] < 100.0), 'out of range')");
}

TEST(ScriptErrorTest, TheCompilersReportKeepsItsMessageAndTheLineItCouldNotCompile) {
  const std::string report =
      "Unknown builtin op: chronoserve_test::vanished.\n"
      "Could not find any similar ops to chronoserve_test::vanished. This op may not exist or may not be currently "
      "supported in TorchScript.\n"
      ":\n"
      "  File \"code/__torch__.py\", line 6\n"
      "  def forward(self: __torch__.M, x: Tensor) -> Tensor:\n"
      "    return ops.chronoserve_test.vanished(x)\n"
      "           ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n";
  EXPECT_EQ(OneLineScriptError(report),
            "Unknown builtin op: chronoserve_test::vanished.; Could not find any similar ops to chronoserve_test::vanished. "
            "This op may not exist or may not be currently supported in TorchScript. (File \"code/__torch__.py\", line 6: "
            "return ops.chronoserve_test.vanished(x))");
}

TEST(ScriptErrorTest, OtherTextKeepsEveryLineOnOne) {
  EXPECT_EQ(OneLineScriptError("CUDA out of memory. Tried to allocate 2.00 GiB"),
            "CUDA out of memory. Tried to allocate 2.00 GiB");
  EXPECT_EQ(OneLineScriptError("Expected all tensors to be on the same device\n  but found cuda:0 and cpu\n"),
            "Expected all tensors to be on the same device; but found cuda:0 and cpu")
      << "indented lines are kept where there is no source context";
  EXPECT_EQ(OneLineScriptError(""), "");
}

// A page of a form not recognised (no error line after the marker, no message before the
// context) loses nothing: all of it, on one line.
TEST(ScriptErrorTest, AnUnrecognisedPageIsKeptWhole) {
  const std::string page =
      "Traceback of TorchScript (most recent call last):\n"
      "  File \"<string>\", line 1, in forward\n"
      "    return x\n"
      "    ~ <--- HERE\n"
      "something went wrong\n";
  EXPECT_EQ(OneLineScriptError(page),
            "Traceback of TorchScript (most recent call last):; File \"<string>\", line 1, in forward; return x; "
            "~ <--- HERE; something went wrong");
}

}  // namespace
}  // namespace chronoserve::server
