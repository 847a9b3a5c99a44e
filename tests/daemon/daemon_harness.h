// Running a real symdexd for tests: start (fork/exec), wait until it answers, stop with SIGTERM
// and check it exited cleanly.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tests/unit/test_util.h"

namespace symdex::testing {

class DaemonProcess {
 public:
  // Starts SYMDEXD_BIN with `args`; its stderr goes to `log_path`. Waits until `wait_for`
  // ("unix:PATH" or "HOST:PORT") accepts connections (up to 120 s); empty = don't wait.
  DaemonProcess(const std::vector<std::string>& args, const std::string& log_path, const std::string& wait_for);
  ~DaemonProcess();  // SIGKILL if still running
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  bool ready() const { return ready_; }
  pid_t pid() const { return pid_; }
  // Sends `sig` and waits (up to timeout_s) for the exit; returns the exit status (-1: still running
  // after the timeout, then killed; 128+N: killed by signal N).
  int Stop(int sig = 15, double timeout_s = 120);
  // Waits for the process to exit on its own; same return convention (0 s: just check).
  int Wait(double timeout_s);
  bool running() { return Wait(0) == -1 && pid_ > 0; }
  // The exit status once reaped (by Wait or Stop).
  std::optional<int> exit_status() const { return exit_status_; }
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  bool ready_ = false;
  std::optional<int> exit_status_;
};

// Whether something accepts a connection at "unix:PATH" or "HOST:PORT".
bool Accepts(const std::string& address);

// Polls `cond` every 50 ms until it holds; false if it still does not after `seconds`. The
// default is a ceiling for a loaded machine under ASan, not a time anything is expected to take:
// tests wait for what they look for, never for a guessed while.
bool WaitUntil(const std::function<bool()>& cond, double seconds = 120);

}  // namespace symdex::testing
