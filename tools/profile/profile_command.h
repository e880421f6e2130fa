// The `profile` command line: parses flags, profiles one model directory and prints (and optionally
// writes as JSON) the report. Shared by `chronoserve profile ...` and `chronoserve-profile ...`.
#ifndef CHRONOSERVE_TOOLS_PROFILE_PROFILE_COMMAND_H_
#define CHRONOSERVE_TOOLS_PROFILE_PROFILE_COMMAND_H_

namespace chronoserve::profile {

// argv[0] is the command's name; returns the process exit code.
int RunProfileCommand(int argc, char** argv);

}  // namespace chronoserve::profile

#endif  // CHRONOSERVE_TOOLS_PROFILE_PROFILE_COMMAND_H_
