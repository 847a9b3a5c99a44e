#include "server/query/caller_view.h"

#include "server/common/strings.h"
#include "server/query/resolver.h"
#include "server/query/spec.h"

namespace symdex::query {
namespace {

// The target's KASLR-revealing addresses: the kernel's _text and its anchor symbol's.
void ForgetKernelBase(TargetInfo& t) {
  t.text_addr.reset();
  t.anchor_addr.reset();
}

}  // namespace

absl::Status AddressesDenied(const TargetInfo& t, std::string_view what) {
  return absl::PermissionDeniedError(
      StrCat(what, ": target '", t.name,
             "' is a live kernel, whose absolute addresses reveal its KASLR offset; they are for privileged callers "
             "(root, CAP_SYSLOG, or a group/certificate the daemon trusts), as /proc/kallsyms shows them only to "
             "those. Name functions by NAME, MOD:NAME, NAME@FILE[:LINE] or _text+N instead"));
}

bool HidesAddresses(AddressAccess access, const TargetInfo& t) {
  return access == AddressAccess::kKaslrFree && t.kind == "live";
}

// vmlinux: _text+N (the `section` _text, or the target's anchor: _stext on arm64); a loaded module: SECTION+0xOFF from
// the section bases /sys/module/M/sections gave; a kprobe target that is an absolute address is dropped.
absl::Status CallerView::Hide(const TargetInfo& t, Instance& in) {
  if (!HidesAddresses(access_, t)) return absl::OkStatus();
  if (in.probe.starts_with("0x")) in.probe.clear();
  if (!in.addr) return absl::OkStatus();
  const uint64_t a = *in.addr;
  in.addr.reset();
  if (in.module.empty()) {
    if (in.text_offset) {
      in.section = in.text_anchor;
      in.section_offset = *in.text_offset;
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto sections, q_.ModuleSections(t, in.module));
  if (const auto* best = SectionHolding(*sections, a)) {
    in.section = best->first;
    in.section_offset = a - best->second;
  }
  return absl::OkStatus();
}

absl::Status CallerView::CheckSpec(const std::string& target, const std::string& spec) {
  if (access_ == AddressAccess::kAbsolute) return absl::OkStatus();
  auto parsed = ParseSpec(spec);
  if (!parsed.ok()) return absl::OkStatus();  // LocalQuery reports the malformed spec
  const bool absolute = parsed->address || (parsed->at_addr && parsed->at_section.empty());
  if (!absolute) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto t, q_.Target(target));
  if (HidesAddresses(access_, t)) return AddressesDenied(t, "a spec with an absolute address");
  return absl::OkStatus();
}

namespace {
// The one target an answer is about (nullptr: an answer about several, as Targets').
template <class V>
TargetInfo* TargetOf(typename V::Answer& a) {
  if constexpr (requires { V::Resolved(a); }) {
    return &V::Resolved(a).target;
  } else if constexpr (requires { a.target; }) {
    return &a.target;
  } else {
    return nullptr;
  }
}
}  // namespace

absl::StatusOr<AnyAnswer> CallerView::Call(const AnyRequest& r) {
  return Verbs::Visit(r.index(), [&]<class V>(std::type_identity<V>) -> absl::StatusOr<AnyAnswer> {
    const typename V::Request& req = std::get<Verbs::IndexOf<V>()>(r);
    if constexpr (V::kAccess == VerbAccess::kPrivileged) {
      if (access_ != AddressAccess::kAbsolute) {
        return absl::PermissionDeniedError(StrCat(
            VerbName<V>(), " is for privileged callers (root, CAP_SYSLOG, or a group/certificate the daemon trusts): ",
            V::kWhyPrivileged));
      }
    }
    if constexpr (V::kAccess == VerbAccess::kAbsoluteInput) {
      if (access_ == AddressAccess::kKaslrFree) {
        std::string target;
        if constexpr (requires { V::RouteOf(req); }) {
          target = V::RouteOf(req).target;
        } else {
          target = req.target;
        }
        ASSIGN_OR_RETURN(auto t, q_.Target(target));
        if (HidesAddresses(access_, t)) return AddressesDenied(t, V::kAsked);
      }
    }
    if constexpr (V::kAccess == VerbAccess::kHideAddresses && requires { req.spec; }) {
      RETURN_IF_ERROR(CheckSpec(req.target, req.spec));
    }
    if constexpr (requires { V::Composed(*this, req); }) {  // each verb it asks is this view's
      RETURN_IF_ERROR(V::Check(req));
      ASSIGN_OR_RETURN(typename V::Answer a, V::Composed(*this, req));
      return AnyAnswer(std::in_place_index<Verbs::IndexOf<V>()>, std::move(a));
    }
    auto ask = [&]() -> absl::StatusOr<AnyAnswer> {
      if constexpr (requires(typename V::Request & q) { V::ForUnprivileged(q); }) {
        if (access_ != AddressAccess::kAbsolute) {  // what it may not see is not looked for
          typename V::Request q = req;
          V::ForUnprivileged(q);
          return q_.Call(AnyRequest(std::in_place_index<Verbs::IndexOf<V>()>, std::move(q)));
        }
      }
      return q_.Call(r);
    };
    ASSIGN_OR_RETURN(AnyAnswer any, ask());
    if constexpr (requires(typename V::Answer & a) { V::HidePrivileged(a); }) {
      if (access_ != AddressAccess::kAbsolute) V::HidePrivileged(std::get<Verbs::IndexOf<V>()>(any));
    }
    if constexpr (V::kAccess == VerbAccess::kHideAddresses) {
      auto& a = std::get<Verbs::IndexOf<V>()>(any);
      TargetInfo* t = TargetOf<V>(a);
      if (t == nullptr) {
        ForEachValueOf<TargetInfo>(a, [&](TargetInfo& each) {
          if (HidesAddresses(access_, each)) ForgetKernelBase(each);
        });
      } else if (HidesAddresses(access_, *t)) {
        // The verb's own first: what it refuses or hides may depend on the addresses.
        if constexpr (requires { V::HideAddresses(a); }) {
          if constexpr (std::is_same_v<decltype(V::HideAddresses(a)), absl::Status>) {
            RETURN_IF_ERROR(V::HideAddresses(a));
          } else {
            V::HideAddresses(a);
          }
        }
        absl::Status hidden;
        ForEachValueOf<Instance>(a, [&](Instance& in) {
          if (hidden.ok()) hidden = Hide(*t, in);
        });
        RETURN_IF_ERROR(hidden);
        ForgetKernelBase(*t);
      }
    }
    return any;
  });
}

}  // namespace symdex::query
