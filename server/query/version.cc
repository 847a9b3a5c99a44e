// query::VersionText (api.h).
#include "server/query/local_query.h"

#include "server/common/strings.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/store/migrations.h"

namespace symdex::query {

std::string VersionText(std::string_view program_version) {
  const auto& migrations = store::Migrations();
  const int schema = migrations.empty() ? 0 : migrations.back().version;
  return StrCat(program_version, " (index schema ", schema, ", address maps v", debuginfo::addrmap::kVersion,
                ", gRPC API symdex.v1)");
}

}  // namespace symdex::query
