// The probe tables (ingest/probe_tables.h) of a file on disk: a debug file (vmlinux, .ko) or an
// image package's module (.ko, .ko.xz, .ko.zst, .ko.gz). A debug vmlinux is ~600 MB: it is
// mapped, not read, and only the pages of its section headers, .symtab and the tables are
// touched.
#pragma once

#include <string>

#include "server/common/status.h"
#include "server/ingest/probe_tables.h"

namespace symdex::debuginfo {

absl::StatusOr<ingest::ProbeTables> ReadProbeTablesFile(const std::string& path);

}  // namespace symdex::debuginfo
