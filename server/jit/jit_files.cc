#include "server/jit/jit_files.h"

#include <filesystem>
#include <fstream>
#include <set>

#include "server/common/strings.h"
#include "server/ingest/jitted_dso.h"
#include "server/jit/ingest.h"
#include "server/jit/jit_elf.h"
#include "server/jit/jitted_dso_files.h"
#include "server/query/jit_query.h"
#include "server/store/open_index.h"

namespace symdex::jit {

namespace fs = std::filesystem;

absl::StatusOr<std::vector<JitIngestReport>> IngestJitFilesInto(const std::string& db_path,
                                                                const std::vector<std::string>& paths) {
  ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandJitPaths(paths));
  ASSIGN_OR_RETURN(store::Db db, store::OpenIndex(db_path, store::IndexUse::kWrite));
  std::vector<JitIngestReport> out;
  for (const std::string& f : files) out.push_back(IngestJitFile(db, f));
  return out;
}

absl::StatusOr<JitExportSummary> ExportJitDsos(const std::string& db_path, const JitExportRequest& req,
                                               const std::function<void(uint32_t pid, uint32_t elf_mach)>& on_skip) {
  ASSIGN_OR_RETURN(store::Db db, store::OpenIndex(db_path, store::IndexUse::kAsk));
  ASSIGN_OR_RETURN(std::vector<JitInstance> chosen, query::JitExportInstances(db, req.pid, req.instance));
  std::error_code ec;
  fs::create_directories(req.out, ec);
  if (ec) return absl::PermissionDeniedError(StrCat("cannot create ", req.out, ": ", ec.message()));
  JitExportSummary out;
  std::set<std::string> ids;
  for (const auto& inst : chosen) {
    if (!JitElfSupportsMachine(inst.elf_mach)) {
      on_skip(inst.pid, inst.elf_mach);
      continue;
    }
    ASSIGN_OR_RETURN(std::vector<query::JitExportLoad> loads, query::JitExportLoads(db, inst, req.scheme));
    for (const auto& e : loads) {
      JitElfInput in;
      in.machine = static_cast<uint16_t>(inst.elf_mach);
      in.name = e.function.name;
      in.code = e.code;
      in.build_id = e.build_id;
      in.lines = e.lines;
      ASSIGN_OR_RETURN(std::string bytes, WriteJitElf(in));
      std::string path = (fs::path(req.out) / e.function.DsoName()).string();
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      f.close();
      if (!f) return absl::PermissionDeniedError(StrCat("cannot write ", path));
      out.with_lines += !in.lines.empty();
      ids.insert(e.build_id.ToHex());
      out.files.push_back({path, e.function.name, e.build_id.ToHex(), in.lines.size()});
    }
  }
  out.distinct_build_ids = ids.size();
  return out;
}

JittedDsosOnDisk ReadJittedDsos(const std::vector<std::string>& paths) {
  JittedDsosOnDisk out;
  JittedDsoScan scan = ExpandJittedDsoPaths(paths);
  for (const absl::Status& s : scan.errors) out.unreadable.emplace_back("", std::string(s.message()));
  for (const std::string& f : scan.files) {
    auto d = ReadJittedDso(f);
    if (d.ok()) {
      out.dsos.push_back(std::move(*d));
    } else {
      out.unreadable.emplace_back(f, std::string(d.status().message()));
    }
  }
  out.shared = ingest::SharedDsoIds(out.dsos);
  return out;
}

}  // namespace symdex::jit
