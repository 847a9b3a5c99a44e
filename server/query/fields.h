// A value's fields, listed once, by name: what the wire (server/api/wire_fields.h puts each on the
// proto field of the same name and back) and the caller view (query/caller_view.cc finds every
// Instance in an answer to hide its address) walk. Inside struct T, SYMDEX_FIELDS(T, a, b, c)
// defines `static constexpr auto Fields()`: a tuple of Field{name, &T::member}. A type that
// cannot hold the list (a record of server/common) has it in a FieldsOf<T> specialization.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace symdex::query {

template <class T, class M>
struct Field {
  std::string_view name;  // "": the member's own fields are the message's (a struct embedded)
  M T::*member;
  bool one = false;  // a list carried as the one value of a singular field (an answer that names
                     // exactly one on the wire)
};

// T's field list: T::Fields(), or a specialization's for a type declared elsewhere.
template <class T>
struct FieldsOf {};
template <class T>
requires requires { T::Fields(); }
struct FieldsOf<T> {
  static constexpr auto Fields() { return T::Fields(); }
};

template <class T>
concept HasFields = requires {
  FieldsOf<T>::Fields();
};

// f(field) for each of T's fields, in their order.
template <class T, class F>
constexpr void ForEachField(F&& f) {
  std::apply([&](auto... field) { (f(field), ...); }, FieldsOf<T>::Fields());
}

template <class T>
inline constexpr size_t kFieldCount = std::tuple_size_v<decltype(FieldsOf<T>::Fields())>;

template <class T>
struct IsSharedConst : std::false_type {};
template <class T>
struct IsSharedConst<std::shared_ptr<const T>> : std::true_type {
  using type = T;
};

// fn(x) for every X inside `v`: v itself, members of listed types, elements of vectors, values
// of optionals, and what a shared_ptr to const points to — copied first, so that `fn` changes
// this value's copy and not the one others share.
template <class X, class T, class Fn>
void ForEachValueOf(T& v, Fn&& fn) {
  using U = std::remove_const_t<T>;
  if constexpr (std::is_same_v<U, X>) {
    fn(v);
  } else if constexpr (HasFields<U>) {
    ForEachField<U>([&](auto field) { ForEachValueOf<X>(v.*(field.member), fn); });
  } else if constexpr (requires {
                         typename U::value_type;
                         v.begin();
                       } &&
                       !std::is_same_v<U, std::string>) {
    for (auto& e : v) ForEachValueOf<X>(e, fn);
  } else if constexpr (requires {
                         v.has_value();
                         *v;
                       }) {
    if (v.has_value()) ForEachValueOf<X>(*v, fn);
  } else if constexpr (IsSharedConst<U>::value) {
    if (v == nullptr) return;
    auto own = std::make_shared<typename IsSharedConst<U>::type>(*v);
    ForEachValueOf<X>(*own, fn);
    v = std::move(own);
  }
}

}  // namespace symdex::query

// SYMDEX_FIELDS(T, a, b, ...): the field list of struct T (members a, b, ...), inside T.
#define SYMDEX_FIELDS(T, ...) \
  static constexpr auto Fields() { return std::make_tuple(SYMDEX_FOR_EACH_(SYMDEX_FIELD_, T, __VA_ARGS__)); }
#define SYMDEX_FIELD_(T, m) \
  ::symdex::query::Field<T, decltype(T::m)> { #m, &T::m }
#define SYMDEX_PARENS_ ()
#define SYMDEX_EXPAND_(...) SYMDEX_EXPAND3_(SYMDEX_EXPAND3_(SYMDEX_EXPAND3_(SYMDEX_EXPAND3_(__VA_ARGS__))))
#define SYMDEX_EXPAND3_(...) SYMDEX_EXPAND2_(SYMDEX_EXPAND2_(SYMDEX_EXPAND2_(SYMDEX_EXPAND2_(__VA_ARGS__))))
#define SYMDEX_EXPAND2_(...) SYMDEX_EXPAND1_(SYMDEX_EXPAND1_(SYMDEX_EXPAND1_(SYMDEX_EXPAND1_(__VA_ARGS__))))
#define SYMDEX_EXPAND1_(...) __VA_ARGS__
#define SYMDEX_FOR_EACH_(macro, T, ...) __VA_OPT__(SYMDEX_EXPAND_(SYMDEX_FOR_EACH_STEP_(macro, T, __VA_ARGS__)))
#define SYMDEX_FOR_EACH_STEP_(macro, T, a, ...) \
  macro(T, a) __VA_OPT__(, SYMDEX_FOR_EACH_AGAIN_ SYMDEX_PARENS_(macro, T, __VA_ARGS__))
#define SYMDEX_FOR_EACH_AGAIN_() SYMDEX_FOR_EACH_STEP_
