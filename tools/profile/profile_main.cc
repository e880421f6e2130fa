// chronoserve-profile: the same command as `chronoserve profile` (tools/profile/profile_command.h).
#include "tools/profile/profile_command.h"

int main(int argc, char** argv) { return chronoserve::profile::RunProfileCommand(argc, argv); }
