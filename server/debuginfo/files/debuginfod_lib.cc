#include "server/debuginfo/files/debuginfod_lib.h"

#include <dlfcn.h>

#include "server/common/strings.h"

namespace symdex::debuginfo {
namespace {

// The soname elfutils 0.188 installs (libdebuginfod1); the same one libdwfl opens.
constexpr const char* kSoname = "libdebuginfod.so.1";

struct Loaded {
  DebuginfodLib lib;
  bool ok = false;
  std::string error;
};

template <typename Fn>
bool Bind(void* handle, const char* name, Fn& fn, std::string& error) {
  fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (fn == nullptr) error = StrCat(kSoname, " has no ", name);
  return fn != nullptr;
}

Loaded Load() {
  Loaded l;
  // Never closed: libcurl keeps global state that is not meant to be unloaded.
  void* h = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = ::dlerror();
    l.error = StrCat("cannot load ", kSoname, " (Debian: libdebuginfod1): ", e ? e : "unknown error");
    return l;
  }
  l.ok = Bind(h, "debuginfod_begin", l.lib.begin, l.error) && Bind(h, "debuginfod_end", l.lib.end, l.error) &&
         Bind(h, "debuginfod_set_progressfn", l.lib.set_progressfn, l.error) &&
         Bind(h, "debuginfod_find_debuginfo", l.lib.find_debuginfo, l.error);
  return l;
}

}  // namespace

const DebuginfodLib* LoadDebuginfod(std::string* error) {
  static const Loaded loaded = Load();
  if (!loaded.ok) {
    if (error) *error = loaded.error;
    return nullptr;
  }
  return &loaded.lib;
}

}  // namespace symdex::debuginfo
