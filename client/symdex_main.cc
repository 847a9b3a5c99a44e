// symdex: find out which of the kernel's same-named functions is which, and name exactly one.
// Works embedded (opens the SQLite index directly); no daemon needed.
#include "client/cli_common.h"

int main(int argc, char** argv) { return symdex::cli::Main(argc, argv); }
