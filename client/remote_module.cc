#include "client/remote_module.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "server/api/remote_plugin.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"

namespace symdex::cli {
namespace {

struct Module {
  api::RemoteConnectFn connect = nullptr;
  std::string error;
};

// Where the module may be: SYMDEX_REMOTE_MODULE, else beside this program, else ../lib/symdex/.
std::vector<std::string> Candidates() {
  if (const char* e = std::getenv("SYMDEX_REMOTE_MODULE"); e && *e) return {e};
  auto program_dir = ProgramDir();
  if (!program_dir.ok()) return {api::kRemoteModuleFile};  // the dynamic loader's search path
  std::filesystem::path dir = *program_dir;
  return {(dir / api::kRemoteModuleFile).string(),
          (dir.parent_path() / "lib/symdex" / api::kRemoteModuleFile).string()};
}

#if defined(__SANITIZE_ADDRESS__)
#define SYMDEX_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SYMDEX_SANITIZED 1
#endif
#endif

// How the module is opened. RTLD_DEEPBIND puts its own libraries (gRPC, protobuf, ~30 abseil
// ones) first when their ~17,000 symbol relocations are bound at load: looked up through this
// program's 41 libraries first, they were ~6 ms of every remote call's ~34 (20 interleaved runs of
// a one-frame `symdex frames`: 34.4 -> 28.4 ms). It also means the module does not see symbols
// other libraries interpose, so not with an LD_PRELOAD (a replacement malloc would then free
// what libc's allocated) nor under the sanitizers (their runtime interposes malloc).
int OpenFlags() {
  int flags = RTLD_NOW | RTLD_LOCAL;
#if !defined(SYMDEX_SANITIZED)
  if (const char* preload = std::getenv("LD_PRELOAD"); preload == nullptr || *preload == '\0') flags |= RTLD_DEEPBIND;
#endif
  return flags;
}

Module Load() {
  Module m;
  std::vector<std::string> tried;
  for (const std::string& path : Candidates()) {
    // Never closed: the query object it returns runs its code.
    void* h = ::dlopen(path.c_str(), OpenFlags());
    if (h == nullptr) {
      const char* e = ::dlerror();
      tried.push_back(e ? e : path);
      continue;
    }
    auto version = reinterpret_cast<api::RemoteVersionFn>(::dlsym(h, api::kRemoteVersionSymbol));
    m.connect = reinterpret_cast<api::RemoteConnectFn>(::dlsym(h, api::kRemoteConnectSymbol));
    if (version == nullptr || m.connect == nullptr) {
      m.connect = nullptr;
      tried.push_back(StrCat(path, ": not a symdex remote module"));
      continue;
    }
    if (std::string_view(version()) != SYMDEX_VERSION) {
      m.connect = nullptr;
      tried.push_back(StrCat(path, ": built as symdex ", version(), ", this symdex is ", SYMDEX_VERSION));
      continue;
    }
    return m;
  }
  m.error = StrCat("talking to symdexd needs ", api::kRemoteModuleFile,
                   " (installed with symdex, beside it or in ../lib/symdex/; SYMDEX_REMOTE_MODULE names another); ",
                   StrJoin(tried, "; "));
  return m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<query::QueryApi>> ConnectRemote(const api::ConnectOptions& opts) {
  static const Module module = Load();
  if (module.connect == nullptr) return absl::FailedPreconditionError(module.error);
  absl::StatusOr<std::unique_ptr<query::QueryApi>> out = absl::UnknownError("symdex-remote.so answered nothing");
  module.connect(opts, out);
  return out;
}

}  // namespace symdex::cli
