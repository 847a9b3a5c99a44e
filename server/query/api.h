// The query API every front end uses: the CLI embedded (query/local_query.h: LocalQuery over the
// index file), the daemon's gRPC handlers (the same LocalQuery, shared by all calls, seen through
// query/caller_view.h per peer), and the CLI as a client of the daemon (api::RemoteQuery, the
// same interface over gRPC). Answers are plain structs (answers.h, jit_types.h, verbs.h); the
// printing lives in the CLI, the wire format in server/api/ (convert.h by hand, wire_fields.h by
// field name for the verbs of verbs.h), so the CLI prints the same bytes whichever
// implementation answered. This header reaches no store, libdw or gRPC header: a front
// end that includes it sees the questions and answers only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "server/common/status.h"
#include "server/common/strings.h"
#include "server/query/answers.h"
#include "server/query/decode.h"
#include "server/query/jit_types.h"
#include "server/query/pprof.h"
#include "server/query/probe_forms.h"
#include "server/query/verbs.h"

namespace symdex::query {

// Limits both implementations enforce, so a hostile request is refused the same way anywhere.
// Every string a request carries has one; a refusal names the field and the limit, never echoes
// the value.
inline constexpr size_t kMaxSpecLength = 4096;
inline constexpr size_t kMaxTargetNameLength = 256;
inline constexpr size_t kMaxSymbolNameLength = 1024;  // the kernel's KSYM_NAME_LEN is 512
inline constexpr size_t kMaxModuleNameLength = 256;
inline constexpr size_t kMaxPathLength = 4096;
inline constexpr size_t kMaxEventNameLength = 256;  // group and event of a kprobe definition
inline constexpr size_t kMaxFetchargs = 128;        // MAX_TRACE_ARGS in the kernel
inline constexpr int kMaxSourceLine = 1 << 24;      // a line number no source file reaches
inline constexpr size_t kMaxFetchargsBytes = 4096;
// InvalidArgument "FIELD is N bytes; the limit is L" when value is longer than limit.
absl::Status CheckFieldSize(std::string_view field, std::string_view value, size_t limit);
// A request's target and the one name or spec it asks of it: each within its limit, the second
// not empty ("FIELD is empty").
absl::Status CheckTargetAndName(std::string_view target, std::string_view field, std::string_view value, size_t limit);
absl::Status CheckKprobeOptions(const KprobeOptions& o);

// f(part, first) for `r` cut into requests of at most `n` elements of its list (V::kParts), in
// order (one part for an empty list), each `r` but for its list; `first` is the part's first
// element's place in the whole. f returns false to stop; its error stops it and is returned.
template <class V, class F>
absl::Status ForEachPart(const typename V::Request& r, size_t n, F&& f) {
  const auto& list = r.*V::kParts;
  typename V::Request part = r;
  for (size_t from = 0; from < list.size() || from == 0; from += n) {
    const size_t to = std::min(list.size(), from + n);
    (part.*V::kParts).assign(list.begin() + static_cast<ptrdiff_t>(from), list.begin() + static_cast<ptrdiff_t>(to));
    ASSIGN_OR_RETURN(bool more, f(std::as_const(part), from));
    if (!more || to == list.size()) break;
  }
  return absl::OkStatus();
}

class QueryApi {
 public:
  virtual ~QueryApi() = default;
  // `target` "" = the default target (query::SelectTarget's rule).

  // A verb declared in verbs.h, asked of this implementation; a list longer than one request may
  // carry (the verb's kParts) asked in parts, their answers merged.
  template <class V>
  absl::StatusOr<typename V::Answer> Ask(const typename V::Request& r) {
    if constexpr (requires { V::kParts; }) {
      if ((r.*V::kParts).size() > kMaxAddressesPerRequest) {
        typename V::Answer whole;
        auto ask = [&](const typename V::Request& part, size_t) -> absl::StatusOr<bool> {
          ASSIGN_OR_RETURN(typename V::Answer a, AskWhole<V>(part));
          V::Merge(whole, std::move(a));
          return true;
        };
        RETURN_IF_ERROR(ForEachPart<V>(r, kMaxAddressesPerRequest, ask));
        return whole;
      }
    }
    return AskWhole<V>(r);
  }
  // Ask, the request as it is: what a server answers (its Check refuses a list too long).
  template <class V, class R>
  requires std::is_same_v < std::remove_cvref_t<R>,
  typename V::Request > absl::StatusOr<typename V::Answer> AskWhole(R&& r) {
    constexpr size_t kIndex = Verbs::IndexOf<V>();
    ASSIGN_OR_RETURN(AnyAnswer a, Call(AnyRequest(std::in_place_index<kIndex>, std::forward<R>(r))));
    if (a.index() != kIndex) return absl::InternalError(StrCat(V::kMethod, " was answered with another verb's answer"));
    return std::get<kIndex>(std::move(a));
  }
  // The verbs of verbs.h, each request answered by the verb at the same place in Verbs.
  virtual absl::StatusOr<AnyAnswer> Call(const AnyRequest& r) = 0;
};

// The index at `db_path` opened for one process's questions (the CLI embedded): checks the file
// exists and this user may read it (PermissionDenied / FailedPrecondition naming the path and the
// cure), migrates an index written by an older symdex when this user may write it, and keeps
// per-generation tables but no answers across the process's calls (local_query.h: LocalQuery).
absl::StatusOr<std::unique_ptr<QueryApi>> OpenEmbeddedApi(const std::string& db_path);

// What `symdex --version` and `symdexd --version` print after the program's name: its version
// and the formats it writes, "0.1.0 (index schema 9, address maps v2, gRPC API symdex.v1)" — so
// that a bug report or a fleet inventory says which index a binary reads. The schema is the
// last migration the binary applies (an index made by a newer one is refused, not half read).
std::string VersionText(std::string_view program_version);

}  // namespace symdex::query
