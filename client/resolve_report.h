// What the verbs that name one copy share (cmd_resolve.cc): a match as JSON, one spec's
// resolution reported, a resolution that is not exactly one copy explained, tracefs found.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "server/common/status.h"
#include "server/query/api.h"

namespace symdex::cli {

// One copy as `--json` shows it, at `offset` into it, with its canonical spec.
nlohmann::json InstanceJson(const query::Instance& in, uint64_t offset, const std::string& canonical);
// Reports one spec's resolution (printed unless json); fills `j` and returns the exit code for it.
int ReportResolve(const std::string& text, absl::StatusOr<query::ResolveResult> r, bool json, nlohmann::json& j,
                  query::ResolveResult* out);
// Prints why `spec` did not resolve to exactly one instance (json: the resolve object).
void ReportNotUnique(const std::string& spec, const nlohmann::json& j, int code, bool json);
// Resolves `spec` to exactly one match; otherwise prints the candidates or the error (as JSON with
// `json`), sets `code` to the exit code and returns NotFound.
absl::StatusOr<query::ResolveResult> ResolveUnique(query::QueryApi& api, const std::string& target,
                                                   const std::string& spec, int& code, bool json);
// The tracefs directory: `given`, else the first of the usual two that has kprobe_events.
std::string TracefsDir(const std::string& given);

}  // namespace symdex::cli
