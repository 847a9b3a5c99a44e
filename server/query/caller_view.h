// The query API as one caller may see it.
//
// A live kernel's addresses are as secret as the kernel makes them: /proc/kallsyms reads as
// zeros for a reader without CAP_SYSLOG (kptr_restrict), because one absolute address reveals the
// KASLR slide. The index holds those addresses, so a service over it decides per caller what it
// may learn (the daemon: per peer, from SO_PEERCRED or the client certificate):
//
//   AddressAccess::kAbsolute   everything, as LocalQuery answers it (root, CAP_SYSLOG, the
//                              configured groups and certificate names; the embedded CLI, whose
//                              user could read the index file)
//   AddressAccess::kKaslrFree  for *live* targets, answers without absolute addresses:
//                              vmlinux symbols as _text+N, module symbols as SECTION+0xOFF, no
//                              `_text` address, kprobe definitions only in their KASLR-free forms
//                              (_text+N, MOD:NAME[+off]); and no absolute address is accepted as
//                              input (Symbolize, 0xADDR / NAME@0xADDR specs) — an address oracle
//                              reveals the slide as surely as printing it. Offline targets'
//                              addresses are link-time addresses, public in the distribution's
//                              System.map, and are answered as they are.
//
// JIT records (other users' processes: their addresses and file paths) are for kAbsolute callers
// only; BuildId answers others with the kernel's owners alone.
//
// A refusal is PermissionDenied naming the rule. Redaction lives here, in the query layer, so
// every front end that serves other users applies the same rule.
#pragma once

#include "server/query/local_query.h"

namespace symdex::query {

enum class AddressAccess { kAbsolute, kKaslrFree };

// True when answers about `t` must not carry absolute addresses for `access`.
bool HidesAddresses(AddressAccess access, const TargetInfo& t);
// PermissionDenied: `what` would show a live target's absolute addresses to a caller denied them.
absl::Status AddressesDenied(const TargetInfo& t, std::string_view what);

class CallerView : public QueryApi {
 public:
  CallerView(LocalQuery& q, AddressAccess access) : q_(q), access_(access) {}

  // A verb of verbs.h, under its kAccess.
  absl::StatusOr<AnyAnswer> Call(const AnyRequest& r) override;

  AddressAccess access() const { return access_; }

 private:
  // PermissionDenied when `spec` names an absolute address of a hidden target.
  absl::Status CheckSpec(const std::string& target, const std::string& spec);
  absl::Status Hide(const TargetInfo& t, Instance& in);

  LocalQuery& q_;
  AddressAccess access_;
};

}  // namespace symdex::query
