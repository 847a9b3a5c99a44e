#include "server/kernel/kernel_config.h"

#include <unistd.h>

#include <filesystem>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/ingest/config_text.h"
#include "server/ingest/decompress.h"

namespace symdex::kernel {
namespace {

constexpr size_t kMaxConfigBytes = size_t{16} << 20;  // 6.1's is ~250 KB

absl::StatusOr<std::string> ReadConfig(const std::string& path) {
  ASSIGN_OR_RETURN(std::string raw, ReadFileBounded(path, kMaxConfigBytes));
  const ingest::Compression c = ingest::DetectCompression(raw);
  if (c != ingest::Compression::kNone) {
    ASSIGN_OR_RETURN(raw, ingest::Decompress(raw, c, kMaxConfigBytes));
  }
  if (!ingest::LooksLikeKernelConfig(raw)) {
    return absl::InvalidArgumentError(StrCat(path, " is not a kernel config (no CONFIG_ lines)"));
  }
  return raw;
}

}  // namespace

std::vector<std::string> KernelConfigCandidates(const KernelTarget& t, const std::string& sysroot,
                                                const std::string& system_map) {
  std::vector<std::string> out;
  if (t.kind == "live") {
    out.push_back(SysrootPath(sysroot, "/proc/config.gz"));
    if (!t.release.empty()) {
      out.push_back(SysrootPath(sysroot, "/boot/config-" + t.release));
      out.push_back(SysrootPath(sysroot, "/lib/modules/" + t.release + "/config"));
    }
  } else if (!system_map.empty()) {
    const std::string dir = std::filesystem::path(system_map).parent_path().string();
    const std::string base = dir.empty() ? "" : dir + "/";
    if (!t.release.empty()) out.push_back(base + "config-" + t.release);
    out.push_back(base + "config");
  }
  return out;
}

absl::Status AttachKernelConfig(KernelTarget& t, const std::string& explicit_path,
                                const std::vector<std::string>& candidates) {
  const std::string_view kOption = "CONFIG_KPROBE_EVENTS_ON_NOTRACE";
  auto use = [&](const std::string& path, const std::string& text) {
    // kprobe events check for an ftrace site on every kernel with dynamic ftrace, whatever the
    // architecture, unless this option is set (6.1 trace_kprobe.c: within_notrace_func under
    // CONFIG_DYNAMIC_FTRACE && !CONFIG_KPROBE_EVENTS_ON_NOTRACE; arm64 has no
    // CONFIG_KPROBES_ON_FTRACE and still checks).
    t.kprobe_events_on_notrace = ingest::KernelConfigBool(text, kOption).value_or(false) ||
                                 !ingest::KernelConfigBool(text, "CONFIG_DYNAMIC_FTRACE").value_or(false);
    // BPF kprobe_multi links are fprobes (kernel/trace/bpf_trace.c): without it the link is
    // refused (EOPNOTSUPP).
    t.fprobe = ingest::KernelConfigBool(text, "CONFIG_FPROBE").value_or(false);
    // A BPF trampoline on a function ftrace patches is an ftrace direct call (kernel/bpf/
    // trampoline.c register_fentry: ENOTSUPP without; arm64 has them from 6.4).
    t.ftrace_direct = ingest::KernelConfigBool(text, "CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS").value_or(false);
    t.kernel_config = path;
    t.files.push_back({"kernel-config", path, InputFileStatus::kUsed, ""});
  };
  if (!explicit_path.empty()) {
    auto text = ReadConfig(explicit_path);
    if (!text.ok()) return absl::InvalidArgumentError(StrCat("--kernel-config: ", text.status().message()));
    use(explicit_path, *text);
    return absl::OkStatus();
  }
  for (const std::string& path : candidates) {
    if (::access(path.c_str(), F_OK) != 0) continue;
    auto text = ReadConfig(path);
    if (!text.ok()) {
      t.files.push_back({"kernel-config", path, InputFileStatus::kError, std::string(text.status().message())});
      continue;
    }
    use(path, *text);
    return absl::OkStatus();
  }
  t.warnings.push_back(
      "no kernel config found (--kernel-config FILE): probe verdicts assume CONFIG_KPROBE_EVENTS_ON_NOTRACE=n, "
      "as distributions build");
  return absl::OkStatus();
}

}  // namespace symdex::kernel
