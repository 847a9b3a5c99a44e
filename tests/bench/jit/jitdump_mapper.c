/* jitdump_mapper: stand in for a JIT runtime so `perf record -k 1` + `perf inject -j` process a
 * big jitdump. Used by tests/bench/jit_ingest.sh, which compiles it with `cc` at run time.
 *
 *   jitdump_mapper TEMPLATE [SLEEP_MS]
 *
 * TEMPLATE is a jitdump (little-endian, host byte order) such as the synthetic 100 MB one
 * jit_ingest.sh generates. The program does what the V8 / JVMTI agents do:
 *   1. opens ./jit-<its pid>.dump and writes the template's header with this pid and the
 *      CLOCK_MONOTONIC time (the clock `perf record -k 1` stamps samples with);
 *   2. mmaps the dump PROT_READ|PROT_EXEC, MAP_PRIVATE: the marker whose PERF_RECORD_MMAP tells
 *      `perf inject -j` to read the dump;
 *   3. writes every template record with its timestamp replaced by CLOCK_MONOTONIC at the time of
 *      writing (so all fall inside the recording, after the marker), and CODE_LOAD's pid/tid
 *      replaced by this pid (code_index, names, code, DEBUG_INFO, UNWINDING_INFO are kept);
 *   4. sleeps SLEEP_MS (default 100) with the marker mapped, munmaps, exits.
 * Prints the dump's name on stdout and "records loads bytes" on stderr.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { kMagic = 0x4A695444, kHeaderKnown = 40, kPrefix = 16, kCodeLoad = 0 };

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int out_fd;
static char buf[1 << 22];
static size_t used;

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void flush(void) {
  size_t off = 0;
  while (off < used) {
    ssize_t n = write(out_fd, buf + off, used - off);
    if (n <= 0) die("write");
    off += (size_t)n;
  }
  used = 0;
}

static void append(const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    if (used == sizeof buf) flush();
    size_t k = sizeof buf - used < n ? sizeof buf - used : n;
    memcpy(buf + used, c, k);
    used += k, c += k, n -= k;
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s TEMPLATE_JITDUMP [SLEEP_MS]\n", argv[0]);
    return 2;
  }
  long sleep_ms = argc > 2 ? atol(argv[2]) : 100;
  int in = open(argv[1], O_RDONLY);
  if (in < 0) die(argv[1]);
  struct stat st;
  if (fstat(in, &st) != 0) die("fstat");
  size_t len = (size_t)st.st_size;
  const unsigned char *t = mmap(NULL, len, PROT_READ, MAP_PRIVATE, in, 0);
  if (t == MAP_FAILED) die("mmap template");
  uint32_t magic, hsize;
  if (len < kHeaderKnown) goto bad;
  memcpy(&magic, t, 4);
  memcpy(&hsize, t + 8, 4);
  if (magic != kMagic || hsize < kHeaderKnown || hsize > len) goto bad;

  uint32_t pid = (uint32_t)getpid();
  char name[64];
  snprintf(name, sizeof name, "jit-%u.dump", pid);
  out_fd = open(name, O_CREAT | O_TRUNC | O_RDWR, 0644);
  if (out_fd < 0) die(name);

  unsigned char header[4096];
  if (hsize > sizeof header) goto bad;
  memcpy(header, t, hsize);
  uint64_t now = mono_ns();
  memcpy(header + 20, &pid, 4);
  memcpy(header + 24, &now, 8);
  append(header, hsize);
  flush();

  long page = sysconf(_SC_PAGESIZE);
  void *marker = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE, out_fd, 0);
  if (marker == MAP_FAILED) die("mmap marker");

  size_t off = hsize;
  unsigned long records = 0, loads = 0;
  while (off + kPrefix <= len) {
    unsigned char pre[24];
    uint32_t id, size;
    memcpy(&id, t + off, 4);
    memcpy(&size, t + off + 4, 4);
    if (size < kPrefix || size > len - off) break; /* incomplete tail: stop like a reader would */
    size_t head = size < sizeof pre ? size : sizeof pre;
    memcpy(pre, t + off, head);
    now = mono_ns();
    memcpy(pre + 8, &now, 8);
    if (id == kCodeLoad && head >= 24) {
      memcpy(pre + 16, &pid, 4); /* pid */
      memcpy(pre + 20, &pid, 4); /* tid */
      loads++;
    }
    append(pre, head);
    append(t + off + head, size - head);
    off += size;
    records++;
  }
  flush();

  struct timespec nap = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
  nanosleep(&nap, NULL);
  munmap(marker, (size_t)page);
  if (close(out_fd) != 0) die("close");
  printf("%s\n", name);
  fprintf(stderr, "%lu %lu %zu\n", records, loads, off);
  return 0;
bad:
  fprintf(stderr, "%s: not a little-endian jitdump this program understands\n", argv[1]);
  return 1;
}
