// The wire of the verbs declared in server/query/verbs.h: a value with a field list
// (query/fields.h) put on the proto message whose fields have the same names, and read back,
// through protobuf reflection — so a verb's request and answer are declared once, in the query
// layer, and the proto only has to name its fields alike. A std::map is a proto map. The records
// in HandWired below go through their hand-written conversions (convert.h). A TargetInfo whose
// field on the wire is a string is the older answers' pair: its name there, the whole in
// `target_info` beside it (as every answer before the declared verbs carried it). CheckWire says,
// for a type and a message, every field that is missing or of another kind; the daemon refuses to
// start on any (SymbolServiceImpl), and a test checks every verb.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "server/api/convert.h"
#include "server/common/strings.h"
#include "server/query/fields.h"
#include "server/query/verbs.h"

namespace symdex::api {
namespace wire_internal {

namespace gp = ::google::protobuf;

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct Element {
  using type = T;
};
template <class T>
struct Element<std::vector<T>> {
  using type = T;
};
template <class T>
struct Element<std::optional<T>> {
  using type = T;
};

template <class T>
struct IsMap : std::false_type {};
template <class K, class T>
struct IsMap<std::map<K, T>> : std::true_type {};

// The records whose wire form is written by hand (convert.h), each with its message type: a
// record of server/common, or one whose message is not named field for field (an Instance's
// address forms, a TargetInfo inside a Target, a build-ID answer's hits as one list of kinds).
template <class X, class M>
struct ByHand {
  using Record = X;
  using Message = M;
  static void To(const X& v, M* m) { ToProto(v, m); }
  static X From(const M& m) { return FromProto(m); }
};
// ... whose strings an answer read once can move out of its message (FromProto(M&&)).
template <class X, class M>
struct ByHandTaking : ByHand<X, M> {
  static X Take(M& m) { return FromProto(std::move(m)); }
};
// A TargetInfo goes as the Target it is part of, with no counts.
struct TargetInfoByHand {
  using Record = TargetInfo;
  using Message = pb::Target;
  static void To(const TargetInfo& v, pb::Target* m) { ToProto(query::TargetSummary{v, {}}, m); }
  static TargetInfo From(const pb::Target& m) { return FromProto(m).info; }
};
using HandWiredRecords = std::tuple<
    ByHand<query::Instance, pb::Instance>, ByHand<query::TargetSummary, pb::Target>, TargetInfoByHand,
    ByHand<query::CanonicalMatch, pb::Match>, ByHand<query::BuildIdAnswer, pb::LookupBuildIdResponse>,
    // The composed verbs' (a client composes them over its own calls: only the daemon reads
    // their requests and writes their answers).
    ByHand<query::DecodeRequest, pb::DecodeRequest>, ByHand<query::DecodeResult, pb::DecodeResponse>,
    ByHand<query::PprofRequest, pb::SymbolizePprofRequest>, ByHand<query::PprofResult, pb::SymbolizePprofResponse>,
    ByHand<query::SymbolizeRequest, pb::SymbolizeRequest>, ByHandTaking<query::SymbolizeResult, pb::SymbolizeResponse>,
    ByHand<query::FramesRequest, pb::SymbolizeFramesRequest>,
    ByHandTaking<query::FramesResult, pb::SymbolizeFramesResponse>, ByHand<query::AddrMapState, pb::AddrMap>,
    ByHand<query::JitFunction, pb::JitLoad>, ByHand<query::JitAddrResult, pb::JitAddrResult>>;

// HandWired<X>: X's entry of the table (Message, To, From, and Take where it has one), or an
// empty struct for a record that goes by its field list.
template <class X, class Table>
struct EntryFor {};
template <class X, class E, class... Rest>
struct EntryFor<X, std::tuple<E, Rest...>>
    : std::conditional_t<std::is_same_v<typename E::Record, X>, E, EntryFor<X, std::tuple<Rest...>>> {};
template <class X>
struct HandWired : EntryFor<X, HandWiredRecords> {};

// T's fields in message type `d`, looked up once (a type meets one message type; another is
// looked up every time).
template <class T>
std::array<const gp::FieldDescriptor*, query::kFieldCount<T>> FieldsIn(const gp::Descriptor* d) {
  using Array = std::array<const gp::FieldDescriptor*, query::kFieldCount<T>>;
  auto resolve = [d] {
    Array a{};
    size_t i = 0;
    query::ForEachField<T>(
        [&](auto f) { a[i++] = f.name.empty() ? nullptr : d->FindFieldByName(std::string(f.name)); });
    return a;
  };
  static const gp::Descriptor* const cached_for = d;
  static const Array cached = resolve();
  return d == cached_for ? cached : resolve();
}

template <class X>
void MessageTo(const X& v, gp::Message* m);
template <class X>
void MessageFrom(const gp::Message& m, X* v);

template <class X>
void PutOne(gp::Message* m, const gp::FieldDescriptor* f, const X& v, bool repeated) {
  const gp::Reflection* r = m->GetReflection();
  const bool is64 =
      f->cpp_type() == gp::FieldDescriptor::CPPTYPE_INT64 || f->cpp_type() == gp::FieldDescriptor::CPPTYPE_UINT64;
  if constexpr (std::is_same_v<X, std::string>) {
    repeated ? r->AddString(m, f, v) : r->SetString(m, f, v);
  } else if constexpr (std::is_same_v<X, bool>) {
    repeated ? r->AddBool(m, f, v) : r->SetBool(m, f, v);
  } else if constexpr (std::is_integral_v<X> && std::is_signed_v<X>) {
    if (is64) {
      repeated ? r->AddInt64(m, f, v) : r->SetInt64(m, f, v);
    } else {
      repeated ? r->AddInt32(m, f, static_cast<int32_t>(v)) : r->SetInt32(m, f, static_cast<int32_t>(v));
    }
  } else if constexpr (std::is_integral_v<X>) {
    if (is64) {
      repeated ? r->AddUInt64(m, f, v) : r->SetUInt64(m, f, v);
    } else {
      repeated ? r->AddUInt32(m, f, static_cast<uint32_t>(v)) : r->SetUInt32(m, f, static_cast<uint32_t>(v));
    }
  } else if constexpr (std::is_floating_point_v<X>) {
    repeated ? r->AddDouble(m, f, v) : r->SetDouble(m, f, v);
  } else {
    MessageTo(v, repeated ? r->AddMessage(m, f) : r->MutableMessage(m, f));
  }
}

// Element `i` of a repeated field, or the field itself (i < 0).
template <class X>
void GetOne(const gp::Message& m, const gp::FieldDescriptor* f, int i, X* v) {
  const gp::Reflection* r = m.GetReflection();
  const bool is64 =
      f->cpp_type() == gp::FieldDescriptor::CPPTYPE_INT64 || f->cpp_type() == gp::FieldDescriptor::CPPTYPE_UINT64;
  if constexpr (std::is_same_v<X, std::string>) {
    *v = i < 0 ? r->GetString(m, f) : r->GetRepeatedString(m, f, i);
  } else if constexpr (std::is_same_v<X, bool>) {
    *v = i < 0 ? r->GetBool(m, f) : r->GetRepeatedBool(m, f, i);
  } else if constexpr (std::is_integral_v<X> && std::is_signed_v<X>) {
    *v = static_cast<X>(is64 ? (i < 0 ? r->GetInt64(m, f) : r->GetRepeatedInt64(m, f, i))
                             : (i < 0 ? r->GetInt32(m, f) : r->GetRepeatedInt32(m, f, i)));
  } else if constexpr (std::is_integral_v<X>) {
    *v = static_cast<X>(is64 ? (i < 0 ? r->GetUInt64(m, f) : r->GetRepeatedUInt64(m, f, i))
                             : (i < 0 ? r->GetUInt32(m, f) : r->GetRepeatedUInt32(m, f, i)));
  } else if constexpr (std::is_floating_point_v<X>) {
    *v = i < 0 ? r->GetDouble(m, f) : r->GetRepeatedDouble(m, f, i);
  } else {
    MessageFrom(i < 0 ? r->GetMessage(m, f) : r->GetRepeatedMessage(m, f, i), v);
  }
}

template <class X>
void MessageTo(const X& v, gp::Message* m) {
  if constexpr (requires { typename HandWired<X>::Message; }) {
    HandWired<X>::To(v, static_cast<typename HandWired<X>::Message*>(m));
  } else {
    const auto fields = FieldsIn<X>(m->GetDescriptor());
    size_t i = 0;
    query::ForEachField<X>([&](auto field) {
      const gp::FieldDescriptor* f = fields[i++];
      const auto& value = v.*(field.member);
      using M = std::remove_cvref_t<decltype(value)>;
      if constexpr (query::HasFields<M>) {
        if (field.name.empty()) {  // embedded: its fields are this message's
          MessageTo(value, m);
          return;
        }
      }
      if constexpr (std::is_same_v<M, TargetInfo>) {
        if (f->cpp_type() == gp::FieldDescriptor::CPPTYPE_STRING) {
          m->GetReflection()->SetString(m, f, value.name);
          PutOne(m, m->GetDescriptor()->FindFieldByName("target_info"), value, false);
          return;
        }
      }
      if constexpr (IsMap<M>::value) {  // a proto map: repeated entries of key and value
        for (const auto& [key, each] : value) {
          gp::Message* entry = m->GetReflection()->AddMessage(m, f);
          PutOne(entry, f->message_type()->map_key(), key, false);
          PutOne(entry, f->message_type()->map_value(), each, false);
        }
      } else if constexpr (IsVector<M>::value) {
        if (!f->is_repeated()) {  // the one value of a singular field
          if (!value.empty()) PutOne(m, f, value.front(), false);
          return;
        }
        for (const auto& e : value) PutOne(m, f, e, true);
      } else if constexpr (IsOptional<M>::value) {
        if (value) PutOne(m, f, *value, false);
      } else {
        PutOne(m, f, value, false);
      }
    });
  }
}

template <class X>
void MessageFrom(const gp::Message& m, X* v) {
  if constexpr (requires { typename HandWired<X>::Message; }) {
    *v = HandWired<X>::From(static_cast<const typename HandWired<X>::Message&>(m));
  } else {
    const auto fields = FieldsIn<X>(m.GetDescriptor());
    const gp::Reflection* r = m.GetReflection();
    size_t i = 0;
    query::ForEachField<X>([&](auto field) {
      const gp::FieldDescriptor* f = fields[i++];
      auto& value = v->*(field.member);
      using M = std::remove_cvref_t<decltype(value)>;
      if constexpr (query::HasFields<M>) {
        if (field.name.empty()) {
          MessageFrom(m, &value);
          return;
        }
      }
      if constexpr (std::is_same_v<M, TargetInfo>) {
        if (f->cpp_type() == gp::FieldDescriptor::CPPTYPE_STRING) {
          GetOne(m, m.GetDescriptor()->FindFieldByName("target_info"), -1, &value);
          return;
        }
      }
      if constexpr (IsMap<M>::value) {
        value.clear();
        for (int k = 0; k < r->FieldSize(m, f); ++k) {
          const gp::Message& entry = r->GetRepeatedMessage(m, f, k);
          typename M::key_type key{};
          GetOne(entry, f->message_type()->map_key(), -1, &key);
          GetOne(entry, f->message_type()->map_value(), -1, &value[key]);
        }
      } else if constexpr (IsVector<M>::value) {
        if (!f->is_repeated()) {
          value.clear();
          if (r->HasField(m, f)) GetOne(m, f, -1, &value.emplace_back());
          return;
        }
        const int n = r->FieldSize(m, f);
        value.resize(static_cast<size_t>(n));
        for (int k = 0; k < n; ++k) GetOne(m, f, k, &value[static_cast<size_t>(k)]);
      } else if constexpr (IsOptional<M>::value) {
        value.reset();
        if (r->HasField(m, f)) GetOne(m, f, -1, &value.emplace());
      } else {
        GetOne(m, f, -1, &value);
      }
    });
  }
}

template <class X>
std::string Check(const gp::Descriptor* d);

// What is wrong with carrying one E in field `f` ("" = nothing), whether it is repeated aside.
template <class E>
std::string CheckOne(const gp::FieldDescriptor* f) {
  using FD = gp::FieldDescriptor;
  if constexpr (std::is_same_v<E, std::string>) {
    if (f->cpp_type() != FD::CPPTYPE_STRING) return "a string";
  } else if constexpr (std::is_same_v<E, bool>) {
    if (f->cpp_type() != FD::CPPTYPE_BOOL) return "a bool";
  } else if constexpr (std::is_integral_v<E> && std::is_signed_v<E>) {
    if (f->cpp_type() != FD::CPPTYPE_INT64 && f->cpp_type() != FD::CPPTYPE_INT32) return "a signed integer";
    if (f->cpp_type() == FD::CPPTYPE_INT32 && sizeof(E) > 4) return "a 64-bit integer, the field is 32-bit";
  } else if constexpr (std::is_integral_v<E>) {
    if (f->cpp_type() != FD::CPPTYPE_UINT64 && f->cpp_type() != FD::CPPTYPE_UINT32) return "an unsigned integer";
    if (f->cpp_type() == FD::CPPTYPE_UINT32 && sizeof(E) > 4) return "a 64-bit integer, the field is 32-bit";
  } else if constexpr (std::is_floating_point_v<E>) {
    if (f->cpp_type() != FD::CPPTYPE_DOUBLE) return "a double";
  } else {
    if (f->cpp_type() != FD::CPPTYPE_MESSAGE) return "a message";
    return Check<E>(f->message_type());
  }
  return "";
}

// What is wrong with carrying X in messages of type `d` ("" = nothing).
template <class X>
std::string Check(const gp::Descriptor* d) {
  using FD = gp::FieldDescriptor;
  if constexpr (requires { typename HandWired<X>::Message; }) {
    const gp::Descriptor* want = HandWired<X>::Message::descriptor();
    return d == want ? "" : StrCat(d->full_name(), " is not ", want->full_name());
  } else {
    std::string problems;
    const auto fields = FieldsIn<X>(d);
    size_t i = 0;
    query::ForEachField<X>([&](auto field) {
      const FD* f = fields[i++];
      using M = std::remove_cvref_t<decltype(std::declval<X&>().*(field.member))>;
      using E = typename Element<M>::type;
      std::string what;
      if (field.name.empty()) {
        if constexpr (query::HasFields<M>) {
          what = Check<M>(d);
          if (!what.empty()) problems += StrCat(problems.empty() ? "" : "; ", what);
        } else {
          problems += StrCat(problems.empty() ? "" : "; ", "an unnamed field whose type has no field list");
        }
        return;
      }
      if constexpr (std::is_same_v<M, TargetInfo>) {
        if (f != nullptr && f->cpp_type() == FD::CPPTYPE_STRING) {
          const FD* whole = d->FindFieldByName("target_info");
          f = whole && !whole->is_repeated() && whole->cpp_type() == FD::CPPTYPE_MESSAGE ? whole : nullptr;
          if (f == nullptr) {
            problems += StrCat(problems.empty() ? "" : "; ", d->full_name(), ".", field.name,
                               ": a string, and no Target target_info beside it");
            return;
          }
        }
      }
      if constexpr (IsMap<M>::value) {
        if (f == nullptr || !f->is_map()) {
          what = f == nullptr ? "no such field" : "a map, the field is not one";
        } else {
          what = CheckOne<typename M::key_type>(f->message_type()->map_key());
          if (what.empty()) what = CheckOne<typename M::mapped_type>(f->message_type()->map_value());
        }
      } else if (f == nullptr) {
        what = "no such field";
      } else if (IsVector<M>::value && field.one && f->is_repeated()) {
        what = "the one value of a list, the field is repeated";
      } else if (IsVector<M>::value != f->is_repeated() && !(IsVector<M>::value && field.one)) {
        what = IsVector<M>::value ? "a list, the field is not repeated" : "one value, the field is repeated";
      } else if (IsOptional<M>::value && !f->has_presence()) {
        what = "optional, the field has no presence (declare it `optional`)";
      } else {
        what = CheckOne<E>(f);
      }
      if (!what.empty()) problems += StrCat(problems.empty() ? "" : "; ", d->full_name(), ".", field.name, ": ", what);
    });
    return problems;
  }
}

}  // namespace wire_internal

// `v` onto `m` (a message of the type whose fields are named as X's).
template <class X>
void ToWire(const X& v, google::protobuf::Message* m) {
  wire_internal::MessageTo(v, m);
}
template <class X>
void FromWire(const google::protobuf::Message& m, X* v) {
  wire_internal::MessageFrom(m, v);
}
// A hand-written conversion that can move a message's strings out (HandWired's Take).
template <class H>
concept TakesFromWire = requires {
  typename H::Message;
}
&&requires(typename H::Message& msg) { H::Take(msg); };
// FromWire, moving the message's strings out where X's conversion can (`m` is left cleared of them).
template <class X>
void TakeWire(google::protobuf::Message& m, X* v) {
  using H = wire_internal::HandWired<X>;
  if constexpr (TakesFromWire<H>) {
    *v = H::Take(static_cast<typename H::Message&>(m));
  } else {
    wire_internal::MessageFrom(m, v);
  }
}
template <class X>
std::string CheckWire(const google::protobuf::Descriptor* d) {
  return wire_internal::Check<X>(d);
}

// A verb's RPC (query/verbs.h: kMethod in its ServiceOf) : its path and its messages'
// prototypes; aborts naming what is wrong when the proto does not carry the verb's structs.
struct VerbWire {
  std::string path;  // "/symdex.v1.SymbolService/Inlined"
  int index = 0;     // among the service's methods
  const google::protobuf::Message* request = nullptr;
  const google::protobuf::Message* response = nullptr;
};
const VerbWire& WireOf(const char* service, const char* method,
                       std::string (*check)(const google::protobuf::Descriptor* req,
                                            const google::protobuf::Descriptor* resp));
// What a verb's RPC answers with: its Answer, or each Part of a stream.
template <class V>
struct WireAnswerOf {
  using type = typename V::Answer;
};
template <class V>
requires requires { typename V::Part; }
struct WireAnswerOf<V> {
  using type = typename V::Part;
};
template <class V>
using WireAnswer = typename WireAnswerOf<V>::type;

template <class V>
const VerbWire& WireOf() {
  return WireOf(query::ServiceOf<V>(), V::kMethod,
                [](const google::protobuf::Descriptor* req, const google::protobuf::Descriptor* resp) {
                  std::string a = CheckWire<typename V::Request>(req), b = CheckWire<WireAnswer<V>>(resp);
                  return a.empty() || b.empty() ? a + b : a + "; " + b;
                });
}

}  // namespace symdex::api
