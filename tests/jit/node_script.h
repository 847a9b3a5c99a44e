// The Node workload the JIT tests run under `node --perf-prof --interpreted-frames-native-stack`:
// 50 named functions, each called 2000 times — enough for V8 to log a trampoline per function.
#pragma once

namespace symdex::testing {

inline constexpr char kNodeJitScript[] = R"JS(
const fns = [];
for (let i = 0; i < 50; i++) {
  fns.push(new Function(`return function fn_${i}(x) { return x * ${i} + 1; }`)());
}
let sum = 0;
for (let round = 0; round < 2000; round++) for (const f of fns) sum += f(round);
console.log(sum);
)JS";

}  // namespace symdex::testing
