// symdex: find out which of the kernel's same-named functions is which, and name exactly one.
// Works embedded (opens the SQLite index directly); no daemon needed.
#include "client/cli_common.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
// The sanitized build only. clang 14's LeakSanitizer, scanning thread-local storage at exit,
// crashes on glibc 2.36 over the dynamic TLS of a library loaded by dlopen ("Tracer caught signal
// 11", a DTLS range that is no memory), and the CLI loads the gRPC client that way when it asks a
// daemon (symdex-remote.so). Its leak check leaves TLS out of the roots here; everything else is
// still checked, and every other program keeps the default. What only TLS holds then looks lost:
// glibc's blocks for that TLS (suppressed by LeakSanitizer itself, without a report) and OpenSSL's
// per-thread error state after a failed TLS handshake (libcrypto's own allocations, suppressed
// here: the CLI never owns one).
extern "C" const char* __lsan_default_options() { return "use_tls=0:print_suppressions=0"; }
extern "C" const char* __lsan_default_suppressions() { return "leak:libcrypto.so\n"; }
#endif
#endif

int main(int argc, char** argv) { return symdex::cli::Main(argc, argv); }
