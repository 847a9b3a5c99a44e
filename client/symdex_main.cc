// symdex: find out which of the kernel's same-named functions is which, and name exactly one.
// Works embedded (opens the SQLite index directly); no daemon needed.
#include "client/cli_common.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
// The sanitized build only. clang 14's LeakSanitizer, scanning thread-local storage at exit,
// crashes on glibc 2.36 over the dynamic TLS of a library loaded by dlopen ("Tracer caught signal
// 11", a DTLS range that is no memory), and the CLI loads the gRPC client that way when it asks a
// daemon (symdex-remote.so). Its leak check leaves TLS out of the roots here; everything else is
// still checked (the allocations glibc makes for that TLS stay suppressed, without a report),
// and every other program keeps the default.
extern "C" const char* __lsan_default_options() { return "use_tls=0:print_suppressions=0"; }
#endif
#endif

int main(int argc, char** argv) { return symdex::cli::Main(argc, argv); }
