// How which, dups and symbols show one instance: its row in a table, its place, its source, and
// its object in --json (resolve and kprobe show a match with its offset: resolve_report.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "server/query/api.h"

namespace symdex::cli {

// Its address, or (an offline module) section+offset.
std::string Location(const query::Instance& in);
// "0x1c0", "~0x40" (the distance to the next symbol), "?".
std::string SizeText(const query::Instance& in);
// The instance as `which --json`, `dups --json` and `symbols --json` list it.
nlohmann::json InstanceRowJson(const query::Instance& in);
// "drivers/pnp/card.c:186 (decl :184)", with the CU when the code comes from another file
// (a header inline, an #included .c), or the reason there is no DWARF.
std::string SourceText(const query::Instance& in);
// One table row: [name] module address type size probe verdict source (and the verdict's reason
// on a line of its own when `reasons`).
void PrintInstanceRow(const query::Instance& in, bool show_name, bool reasons);
// What fentry/fexit by the name does about this copy (query/fentry_verdict.h).
nlohmann::json FentryJson(const query::FentryVerdict& f);

}  // namespace symdex::cli
