// `symdex pprof IN -o OUT`: a pprof profile's kernel locations symbolized (query/pprof.h).
#include <fmt/core.h>

#include <cstdio>

#include "client/cli_common.h"
#include "server/common/file_util.h"
#include "server/common/hex.h"
#include "server/common/strings.h"

namespace symdex::cli {
namespace {

constexpr size_t kMaxProfileBytes = size_t{256} << 20;  // ingest/pprof_wire.h's limit

struct PprofOptions {
  KernelOfInput kernel;
  std::string in, out;
};

int RunPprof(const GlobalOptions& g, const PprofOptions& o) {
  query::PprofRequest req;
  if (int failed = 0;
      !ReadComposedRequest(g, o.kernel, o.in, kMaxProfileBytes, &query::PprofRequest::profile, req, failed)) {
    return failed;
  }
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto r = query::SymbolizePprof(**api, req);
  if (!r.ok()) return Fail(g, r.status(), r.status().code() == absl::StatusCode::kInvalidArgument);
  // Written whole or not at all: a temporary file renamed into place.
  const std::string tmp = o.out + ".tmp";
  FILE* f = o.out == "-" ? stdout : std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Fail(g, absl::NotFoundError(StrCat("cannot write ", o.out)), true);
  const bool wrote = std::fwrite(r->profile.data(), 1, r->profile.size(), f) == r->profile.size();
  if (o.out != "-" && (std::fclose(f) != 0 || !wrote || std::rename(tmp.c_str(), o.out.c_str()) != 0)) {
    std::remove(tmp.c_str());
    return Fail(g, absl::InternalError(StrCat("cannot write ", o.out)), true);
  }
  const int code = r->kernel_locations == 0 ? kNotFound : r->symbolized < r->kernel_locations ? kNotFound : kFound;
  if (g.json && o.out != "-") {
    PrintJson({{"target", r->target.name},
               {"samples", r->samples},
               {"locations", r->locations},
               {"kernel_locations", r->kernel_locations},
               {"symbolized", r->symbolized},
               {"notes", r->notes},
               {"out", o.out}});
  } else {
    fmt::print(stderr, "symdex pprof: target {}: {} of {} kernel locations symbolized ({} locations, {} samples){}\n",
               r->target.name, r->symbolized, r->kernel_locations, r->locations, r->samples,
               r->notes.empty() ? "" : "; " + StrJoin(r->notes, "; "));
  }
  return code;
}

}  // namespace

void AddPprofCommand(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto o = std::make_shared<PprofOptions>();
  CLI::App* pp = app.add_subcommand(
      "pprof", "Symbolize the kernel locations of a pprof profile: functions, file:line, inline frames");
  pp->add_option("IN", o->in, "The profile (gzip-compressed or not; '-' = standard input)")->required();
  pp->add_option("-o,--output", o->out, "Where to write the symbolized profile (gzip; '-' = standard output)")
      ->required();
  AddKernelOfInputOptions(
      pp, o->kernel, "Target (default: the one whose build-ID the kernel mapping carries, else 'host')",
      "The profiled kernel's vmlinux build-ID (checked)",
      "The profiled host's _text (_stext on arm64, whose kallsyms lists no _text): its addresses are then exact");
  pp->footer(R"(Kernel locations are those of mappings named [kernel.kallsyms], vmlinux, [MODULE] or MODULE.ko;
every other location, sample and field is written back as it was. A duplicated name's copy gets
its canonical spec as Function.name (name_show@card.c) so the copies stay apart in reports.
Example: symdex pprof cpu.pb.gz -o cpu.sym.pb.gz && go tool pprof -top cpu.sym.pb.gz
Exit: 0 every kernel location symbolized, 1 some (or none) not, 2 usage, 3 no index/unreadable input.)");
  pp->callback([&g, &exit_code, o] { exit_code = RunPprof(g, *o); });
}

}  // namespace symdex::cli
