#!/usr/bin/env bash
# Installs every Debian 12 package symdex needs to build, test and benchmark.
# Idempotent and non-interactive: safe to run on every CI run and every fresh machine.
set -euo pipefail

PKGS=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang-14 libclang-rt-14-dev llvm-14 lld-14 clang-format-14
  # libraries
  libelf-dev libdw-dev libdebuginfod-dev libsqlite3-dev sqlite3
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libabsl-dev
  libssl-dev libcli11-dev libfmt-dev nlohmann-json3-dev libzstd-dev liblzma-dev zlib1g-dev
  # metrics endpoint (server/metrics): cpp-httplib; ab for tests/bench/metrics_bench.sh
  libcpp-httplib-dev apache2-utils
  # tests
  libgtest-dev libgmock-dev libbenchmark-dev binutils elfutils xz-utils zstd gzip python3 debuginfod curl
  # benchmarks (libarchive-tools: bsdtar, which `debuginfod -U` runs to read .deb archives)
  bc time python3-drgn libarchive-tools
  # daemon: the README's Python client (stubs from protoc + grpc_python_plugin), TLS test certificates
  python3-grpcio python3-protobuf openssl
  # fleet (deploy/, tests/fleet): the consistent-hash proxies, run as the user by fleet-up.sh;
  # python3-yaml for the kustomize check (kubectl itself is not a Debian package)
  nginx-light haproxy python3-yaml
  # end-to-end: the Debian kernel booted under qemu (TCG); qemu-system-arm boots the arm64 one
  # (qemu-system-aarch64; its busybox-static:arm64 comes from tests/corpus/fetch-debian-kernel.sh)
  qemu-system-x86 qemu-system-arm busybox-static cpio
  # the miniature arm64 kernel of the unit tests (tests/unit/arm64_fixture.cc) is compiled and
  # linked at test time
  gcc-aarch64-linux-gnu
  # JIT tests and benchmark (perf record / perf inject -j); perf record -g for `symdex decode`
  linux-perf
  # the tracers' forms of probe arguments, compiled by the tools themselves
  # (tests/integration/check_tracer_fetches.sh: bpftrace --emit-elf; clang -target bpf against
  # libbpf's headers and the vmlinux.h bpftool writes from a kernel's BTF)
  bpftrace libbpf-dev bpftool
  # `go tool pprof` reads the profiles `symdex pprof` writes (tests); the cilium/ebpf loader of
  # the tracers' guest is built with Debian's cilium/ebpf (tests/e2e/qemu_tracers.py)
  golang-go golang-github-cilium-ebpf-dev
  # the .deb: lintian checks it, debootstrap makes the clean chroot it is installed into (tests);
  # bash-completion runs its completion script (tests/package/completion_test.sh)
  lintian debootstrap bash-completion
  # the arm64 tracers' guest's loaders, cross-built against its root's libbpf
  # (tests/e2e/qemu_tracers.py; the root itself: tests/e2e/tracers-root.sh arm64)
  libc6-dev-arm64-cross linux-libc-dev-arm64-cross
  # the container image (deploy/image/build.sh): buildah builds it, podman runs it in the tests;
  # runc, the runtime that takes cgroup v1 hosts (tests/package/image.sh)
  buildah podman runc
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The JIT tests run real `node --perf-prof`; keep a node that is already on PATH (the image's),
# otherwise take Debian's.
if ! command -v node >/dev/null 2>&1; then
  dpkg-query -W -f='${Status}' nodejs 2>/dev/null | grep -q "install ok installed" || missing+=(nodejs)
fi
if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# nginx and haproxy start their system services from postinst. On a host booted with systemd
# that is Debian's normal behaviour and left alone; in a container (PID 1 not systemd) without
# a policy-rc.d, invoke-rc.d would start root daemons (nginx on :80) that nothing here uses and
# nothing stops: deny service starts for this install only. (nginx's postinst also just skips
# the start when :80 is taken, so neither case fails the install.)
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ] && [ "$(cat /proc/1/comm 2>/dev/null)" != systemd ]; then
  printf '#!/bin/sh\n# scripts/setup-deps.sh: no service starts during its apt-get install\nexit 101\n' |
    $SUDO tee "$policy" >/dev/null && $SUDO chmod 0755 "$policy" && own_policy=1
fi
# shellcheck disable=SC2317  # run by the EXIT trap
drop_policy() { if [ "$own_policy" = 1 ]; then $SUDO rm -f "$policy"; fi; }
trap drop_policy EXIT
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
