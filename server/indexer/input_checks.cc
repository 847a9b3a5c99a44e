#include "server/indexer/input_checks.h"

#include <cmath>

#include "server/common/strings.h"
#include "server/store/index_store.h"

namespace symdex::indexer {
namespace {

// The file the vmlinux symbols came from: System.map or kallsyms.
std::string SymbolFile(const kernel::KernelTarget& t) {
  for (const auto& f : t.files) {
    if (f.role == "system-map" || f.role == "kallsyms") return f.path;
  }
  return t.source;
}

absl::Status CheckSystemMapMarkers(const kernel::KernelTarget& t) {
  bool etext = false, end = false;
  for (const auto& s : t.symbols) {
    if (s.module >= 0) continue;
    etext |= s.name == "_etext";
    end |= s.name == "_end";
  }
  if (etext && end) return absl::OkStatus();
  const char* missing = !etext && !end ? "_etext and _end" : !etext ? "_etext" : "_end";
  return absl::FailedPreconditionError(StrCat(SymbolFile(t), " has no ", missing,
                                              ", which every System.map has: the file looks truncated; "
                                              "refusing to index it (--force indexes it anyway)"));
}

}  // namespace

absl::Status CheckInputLooksComplete(store::Db& db, const kernel::KernelTarget& t, bool force) {
  if (force) return absl::OkStatus();
  if (t.kind == "offline") RETURN_IF_ERROR(CheckSystemMapMarkers(t));
  ASSIGN_OR_RETURN(auto old, store::FindTarget(db, t.name));
  if (!old) return absl::OkStatus();
  ASSIGN_OR_RETURN(int64_t had, store::CountVmlinuxSymbols(db, old->id));
  int64_t has = 0;
  for (const auto& s : t.symbols) has += s.module < 0;
  if (had == 0 || static_cast<double>(has) >= kMinVmlinuxSymbolShare * static_cast<double>(had)) {
    return absl::OkStatus();
  }
  const int fewer = static_cast<int>(std::floor(100.0 * static_cast<double>(had - has) / static_cast<double>(had)));
  return absl::FailedPreconditionError(
      StrCat(SymbolFile(t), " has ", has, " vmlinux symbols, the current index of target ", t.name, " has ", had, " (",
             fewer, "% fewer): refusing to replace it; truncated input? --force replaces it anyway"));
}

}  // namespace symdex::indexer
