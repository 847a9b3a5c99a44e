#!/bin/busybox sh
# /init of the e2e initramfs (tests/e2e/qemu_kprobes.py builds it). Runs inside the guest.
#
# The console (ttyS0 on x86_64, ttyAMA0 on arm64) gets the kernel log and this script's progress;
# the host driver talks to us over a second channel, named in /e2e.conf: CTL_TTY=/dev/ttyS1 (a
# second UART, x86_64) or CTL_PORT=NAME (a virtio-serial port, arm64: the virt machine has one
# UART; its modules are loaded first). Everything we send there is framed:
#   @@E2E <TAG> ...      one-line messages (READY, MOD, RESULT, ...)
#   @@E2E BEGIN <name> / base64 lines / @@E2E END <name> <sha256 of the decoded bytes>
# and every line we read is a command from the host: PROBE <kprobe_events line>, LIST, ENABLE,
# TRACES, ARMSYSRQ, REGS, SH, QUIT. The protocol is strictly request/response, so nothing is lost
# when a side is slow.
/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /tmp && mount -t tmpfs tmpfs /tmp

CTL_TTY=""
CTL_PORT=""
ROOT_DEV=""
. /e2e.conf
fatal() { echo "e2e-init: $*"; [ -n "$CTL" ] && echo "@@E2E FATAL $*" >"$CTL"; poweroff -f; }

# --- modules (in dependency order, as listed by the host) ------------------------------
# All of them before the channel: on arm64 it needs some (virtio_pci, virtio_console).
: >/tmp/modules.result
while read -r m; do
  [ -n "$m" ] || continue
  if out=$(insmod "/lib/modules/$m.ko" 2>&1); then echo "MOD $m ok" >>/tmp/modules.result
  else echo "MOD $m FAIL $(echo "$out" | tr '\n' ' ')" >>/tmp/modules.result
  fi
done </modules.order

# --- the control channel ---------------------------------------------------------------
CTL=""
if [ -n "$CTL_PORT" ]; then
  # /dev/vportNpM of the port named $CTL_PORT (devtmpfs makes the node; no udev, no symlink)
  i=0
  while [ -z "$CTL" ] && [ $i -lt 300 ]; do
    for d in /sys/class/virtio-ports/*; do
      [ "$(cat "$d/name" 2>/dev/null)" = "$CTL_PORT" ] && [ -c "/dev/${d##*/}" ] && CTL=/dev/${d##*/}
    done
    [ -n "$CTL" ] || { sleep 0.1; i=$((i + 1)); }
  done
  [ -n "$CTL" ] || { cat /tmp/modules.result; fatal "no virtio-serial port named $CTL_PORT"; }
else
  CTL=$CTL_TTY
  [ -c "$CTL" ] || { CTL=""; fatal "no $CTL_TTY"; }
  stty -F "$CTL" raw -echo -echoe -echok -echoctl -echoke -icrnl -onlcr -opost 2>/dev/null ||
    stty -F "$CTL" raw -echo || fatal "stty $CTL failed"
fi
exec 3<>"$CTL"
say() { echo "@@E2E $*" >&3; }
die() { echo "e2e-init: $*"; say "FATAL $*"; poweroff -f; }

# Send file $2 framed as $1: base64 with a checksum the host verifies.
send_file() {
  say "BEGIN $1"
  base64 "$2" >&3
  say "END $1 $(sha256sum "$2" | cut -d' ' -f1)"
}

say "BOOTED $(cat /proc/sys/kernel/osrelease)"
while read -r line; do say "$line"; done </tmp/modules.result

# --- a Debian root for the tracers (ROOT_DEV in /e2e.conf: tests/e2e/qemu_tracers.py) ----
# Mounted read-only at /troot with this guest's /proc, /sys (tracefs, debugfs, BTF), /dev and a
# /tmp of its own; SH runs a script there.
if [ -n "${ROOT_DEV:-}" ]; then
  i=0
  while [ ! -b "$ROOT_DEV" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  mkdir -p /troot
  mount -o ro "$ROOT_DEV" /troot || die "cannot mount $ROOT_DEV"
  mount -t tmpfs tmpfs /troot/tmp
  mount -o bind /proc /troot/proc
  mount -o rbind /sys /troot/sys
  mount -o bind /dev /troot/dev
  say "ROOT $(cat /troot/etc/debian_version)"
fi

# --- capture what 'symdex index --sysroot' reads ---------------------------------------
C=/tmp/cap
mkdir -p $C/proc/sys/kernel $C/sys/kernel
cat /proc/kallsyms >$C/proc/kallsyms
cat /proc/modules >$C/proc/modules
cat /proc/sys/kernel/osrelease >$C/proc/sys/kernel/osrelease
cat /proc/sys/kernel/kptr_restrict >$C/proc/sys/kernel/kptr_restrict
cat /sys/kernel/notes >$C/sys/kernel/notes
# shellcheck disable=SC2013,SC2045  # module and section names contain no blanks
for m in $(cut -d' ' -f1 /proc/modules); do
  mkdir -p "$C/sys/module/$m/sections" "$C/sys/module/$m/notes"
  for f in $(ls -A "/sys/module/$m/sections"); do
    cat "/sys/module/$m/sections/$f" >"$C/sys/module/$m/sections/$f"
  done
  [ -r "/sys/module/$m/notes/.note.gnu.build-id" ] &&
    cat "/sys/module/$m/notes/.note.gnu.build-id" >"$C/sys/module/$m/notes/.note.gnu.build-id"
done
# What the kernel itself says about probing, to judge symdex's verdicts against (not read by
# 'symdex index': outside the paths a sysroot has).
mkdir -p $C/verdicts
cat /sys/kernel/tracing/available_filter_functions >$C/verdicts/available_filter_functions
cat /sys/kernel/debug/kprobes/blacklist >$C/verdicts/kprobes_blacklist
tar -C $C -czf /tmp/cap.tgz . || die "tar failed"
send_file capture /tmp/cap.tgz
say "READY"

# --- commands from the host -----------------------------------------------------------
T=/sys/kernel/tracing
L=/sys/kernel/debug/kprobes/list
n=0
while read -r cmd arg <&3; do
  case $cmd in
    PROBE)
      n=$((n + 1))
      echo >$T/error_log 2>/dev/null  # clear, so the log below belongs to this write
      cat $L >/tmp/l.old
      if echo "$arg" >>$T/kprobe_events 2>/tmp/err; then
        # the kprobes/list entry this write added (list lines carry no event names)
        cat $L >/tmp/l.new
        if [ -s /tmp/l.old ]; then new=$(grep -vxF -f /tmp/l.old /tmp/l.new | tr '\n' '|')
        else new=$(tr '\n' '|' </tmp/l.new)
        fi
        say "RESULT $n OK $new"
      else
        err=$(sed 's/^.*write error: //' /tmp/err | tr '\n' ' ')
        log=$(tr '\n' '|' <$T/error_log)
        say "RESULT $n FAIL errno=$err error_log=$log"
      fi
      ;;
    VALUES)  # arm group $arg, run the triggers tests/e2e/probe_values.py knows, send the trace
      echo >$T/trace
      if echo 1 >"$T/events/$arg/enable" 2>/tmp/err; then
        echo marker >/tmp/symdex-e2e-marker
        cat /tmp/symdex-e2e-marker >/dev/null
        dd if=/e2e.conf of=/dev/null bs=1234 count=1 2>/dev/null
        cat /sys/class/rtc/rtc0/name >/dev/null 2>&1
        cat /sys/class/net/lo/type >/dev/null 2>&1
        echo 0 >"$T/events/$arg/enable"
      fi
      cat $T/trace >/tmp/values
      # gone again: kprobes/list is judged later, where a disabled probe at a checked address
      # would read as one the kernel did not arm
      for d in "$T/events/$arg"/*; do
        [ -d "$d" ] && echo "-:$arg/${d##*/}" >>$T/kprobe_events
      done
      send_file values /tmp/values
      say "DONE VALUES $(tr '\n' ' ' </tmp/err 2>/dev/null)"
      : >/tmp/err
      ;;
    LIST)
      cat $T/kprobe_events >/tmp/kprobe_events
      send_file kprobe_events /tmp/kprobe_events
      cat $L >/tmp/kprobes_list
      send_file kprobes_list /tmp/kprobes_list
      say "DONE LIST"
      ;;
    ENABLE)  # arm every probe of group $arg, so the kernel really places them
      if echo 1 >"$T/events/$arg/enable" 2>/tmp/err; then say "DONE ENABLE ok"
      else say "DONE ENABLE FAIL $(tr '\n' ' ' </tmp/err)"
      fi
      ;;
    TRACES)  # $arg: function names whose every copy the function tracer records, with a stack
      echo 1 >$T/options/sym-offset
      echo 1 >$T/options/sym-addr  # the truth `symdex decode` is checked against: each frame's address
      for f in $arg; do echo "$f" >>$T/set_ftrace_filter 2>/dev/null; done
      echo 1 >$T/options/func_stack_trace
      echo function >$T/current_tracer
      # Read sysfs attributes: the *_show functions of many drivers (duplicated names) run, and
      # each cat is an exec (fs/binfmt_elf.c's duplicated names, which call one another). (Not
      # /sys/kernel/tracing: reading trace_pipe would consume the trace.)
      timeout 60 sh -c 'for f in /sys/class/*/*/* /sys/bus/*/devices/*/* /sys/module/*/* /sys/kernel/mm/*/*; do
        [ -f "$f" ] && [ -r "$f" ] && cat "$f" >/dev/null 2>&1; done'
      echo 0 >$T/tracing_on  # (changing the tracer would empty the buffer)
      cat $T/trace | gzip >/tmp/ftrace.gz
      echo nop >$T/current_tracer
      echo 0 >$T/options/func_stack_trace
      echo 1 >$T/tracing_on
      send_file ftrace /tmp/ftrace.gz
      # Stack dumps as a kernel prints them: sysrq l (CPUs), t (every task), and /proc/PID/stack.
      dmesg -c >/dev/null
      echo l >/proc/sysrq-trigger
      echo t >/proc/sysrq-trigger
      dmesg | gzip >/tmp/dmesg.gz
      send_file dmesg /tmp/dmesg.gz
      for p in /proc/[0-9]*; do echo "== $p"; cat "$p/stack" 2>/dev/null; done | gzip >/tmp/stacks.gz
      send_file stacks /tmp/stacks.gz
      say "DONE TRACES"
      ;;
    ARMSYSRQ)  # the host is about to send sysrq keys after a serial break on the console
      echo 1 >/proc/sys/kernel/sysrq  # Debian's default mask (0x1b6) has no dumps (0x8)
      dmesg -c >/dev/null
      # A task that spends its time in the kernel (zeroing 1 MiB per read), so the UART's
      # interrupt most likely lands in kernel context; the host checks and asks again if not.
      dd if=/dev/zero of=/dev/null bs=1M count=1000000 2>/dev/null &
      KERNEL_BUSY=$!
      say "DONE ARMSYSRQ"
      ;;
    REGS)  # after the host's sysrq keys, the last one 'h': the log once its help line is there
      # (the keys are handled one after the other, so the dumps before it are complete)
      i=0
      while ! dmesg | grep -q 'sysrq: HELP' && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
      kill "$KERNEL_BUSY" 2>/dev/null
      wait "$KERNEL_BUSY" 2>/dev/null
      dmesg | gzip >/tmp/regs.gz
      send_file regs /tmp/regs.gz
      say "DONE REGS"
      ;;
    SH)  # $arg: a script, base64; run in the Debian root, its output and exit code sent back
      echo "$arg" | base64 -d >/troot/tmp/cmd.sh
      chroot /troot /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8 \
        /bin/sh /tmp/cmd.sh >/troot/tmp/out 2>&1
      rc=$?
      send_file out /troot/tmp/out
      say "DONE SH $rc"
      ;;
    QUIT)
      say "BYE"
      break
      ;;
    '') ;;
    *) say "UNKNOWN $cmd" ;;
  esac
done
sync
poweroff -f
