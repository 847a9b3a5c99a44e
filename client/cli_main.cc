// symdex's command line: the verbs, their options and the exit code. main() (symdex_main.cc)
// only calls Main; a test program (tests/hardening/fault_main.cc) calls it too, so the program
// it tests is this one.
#include <fmt/core.h>
#include <sys/stat.h>

#include "client/cli_common.h"
#include "client/help_topics.h"

namespace {

// The first argument that is neither an option nor an option's value: the verb the user meant,
// or "" when there is none.
std::string FirstPositional(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") return i + 1 < argc ? argv[i + 1] : "";
    if (!a.starts_with("-") || a == "-") return a;
    if (a.find('=') != std::string::npos) continue;
    const CLI::Option* opt = app.get_option_no_throw(a);
    if (opt != nullptr && opt->get_expected_max() > 0) ++i;  // skip its value (flags expect none)
  }
  return "";
}

}  // namespace

namespace symdex::cli {

int Main(int argc, char** argv) {
  // Nothing symdex creates is for other users: the index and its maps hold live addresses (they
  // are created 0640 explicitly; this also covers SQLite's own temporary files and `jit export`).
  ::umask(::umask(0) | 027);
  CLI::App app{
      "symdex - kernel symbol disambiguation.\n"
      "Indexes /proc/kallsyms (or an offline System.map + modules) into SQLite and answers which\n"
      "of the kernel's same-named functions is which, with the kprobe target for each."};
  app.name("symdex");
  app.set_version_flag("--version", "symdex " + symdex::query::VersionText(SYMDEX_VERSION));
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions g;
  app.add_option("--db", g.db,
                 "SQLite index to use (default: $SYMDEX_DB, /var/lib/symdex/index.db as "
                 "root, else $XDG_STATE_HOME/symdex/index.db)");
  app.add_flag("--json", g.json, "Machine-readable JSON on stdout (errors too)");
  app.add_option("--connect", g.connect,
                 "Ask symdexd at unix:PATH or HOST:PORT (default: /run/symdex/symdex.sock when a daemon answers "
                 "there and no --db/$SYMDEX_DB is given; otherwise the index is opened directly)");
  app.add_flag("--local", g.local, "Never use the daemon: open the index directly");
  app.add_option("--tls-ca", g.tls_ca, "TCP --connect: verify the daemon with this CA bundle (PEM)");
  app.add_option("--tls-cert", g.tls_cert, "TCP --connect: client certificate (PEM), for daemons that ask");
  app.add_option("--tls-key", g.tls_key, "TCP --connect: key of --tls-cert");
  app.add_option("--tls-server-name", g.tls_server_name, "TCP --connect: name to expect in the daemon's certificate");
  app.add_option("--timeout", g.timeout,
                 "Through a daemon: give up after SECONDS (DEADLINE_EXCEEDED, exit 3). Default 60, and 900 for "
                 "calls by build-ID, which may wait while a fleet replica fetches and indexes that kernel first")
      ->check(CLI::PositiveNumber);
  app.footer(
      "Examples:\n"
      "  symdex index                         index this host (needs root or CAP_SYSLOG)\n"
      "  symdex which name_show               every name_show with its kprobe target\n"
      "  symdex dups --module uio             duplicated names that touch module uio\n"
      "  symdex index --system-map /boot/System.map-6.1.0-28-cloud-amd64 \\\n"
      "               --modules-dir /lib/modules/6.1.0-28-cloud-amd64   index an offline kernel\n"
      "  symdex status --json                 what is indexed, from where, with which problems\n"
      "  symdex jit ingest . && symdex jit addr --pid 4242 0x7f6d5bf891d0   JIT frames (see 'symdex jit --help')\n"
      "\n" +
      ExitCodesFooter());

  int exit_code = 0;
  AddIndexCommand(app, g, exit_code);
  AddWhichCommands(app, g, exit_code);
  AddListingCommands(app, g, exit_code);
  AddStatusCommand(app, g, exit_code);
  AddResolveCommand(app, g, exit_code);
  AddKprobeCommands(app, g, exit_code);
  AddKallsymsCommands(app, g, exit_code);
  AddAddrCommands(app, g, exit_code);
  AddFramesCommand(app, g, exit_code);
  AddDecodeCommand(app, g, exit_code);
  AddPprofCommand(app, g, exit_code);
  AddHelpCommand(app, exit_code);
  AddJitCommands(app, g, exit_code);
  AddBuildIdCommand(app, g, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 says only "A subcommand is required" for `symdex frobnicate`: name the bad verb.
    if (app.get_subcommands().empty()) {
      const std::string verb = FirstPositional(app, argc, argv);
      if (!verb.empty() && app.get_subcommands([&](CLI::App* sub) { return sub->check_name(verb); }).empty()) {
        fmt::print(stderr, "symdex: unknown command '{}'; see 'symdex --help'\n", verb);
        return kAmbiguous;
      }
    }
    app.exit(e);
    return kAmbiguous;
  }
  return exit_code;
}

}  // namespace symdex::cli
