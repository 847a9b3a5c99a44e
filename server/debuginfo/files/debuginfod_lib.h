// libdebuginfod, loaded the first time a debug file is fetched (dlopen), as elfutils' own libdwfl
// loads it. Linked, it would bring libcurl and its ~25 libraries (TLS, Kerberos, LDAP, HTTP/2, ...)
// into every symdex process: several milliseconds of start-up for each CLI call, most of which
// never fetch anything.
#pragma once

#include <elfutils/debuginfod.h>

#include <string>

namespace symdex::debuginfo {

struct DebuginfodLib {
  decltype(&debuginfod_begin) begin = nullptr;
  decltype(&debuginfod_end) end = nullptr;
  decltype(&debuginfod_set_progressfn) set_progressfn = nullptr;
  decltype(&debuginfod_find_debuginfo) find_debuginfo = nullptr;
};

// The library's functions, loaded once per process (thread-safe); nullptr when libdebuginfod.so.1
// cannot be loaded, with *error saying why.
const DebuginfodLib* LoadDebuginfod(std::string* error);

}  // namespace symdex::debuginfo
