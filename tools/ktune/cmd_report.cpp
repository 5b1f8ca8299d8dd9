// ktune report: a self-contained HTML page (charts per tuning key, rooflines, cache contents) from a cache.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

#include <fmt/format.h>

#include "args.hpp"
#include "commands.hpp"
#include "json_writer.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/runtime.hpp"
#include "report_html.hpp"

namespace ktune::cli {
namespace {

const char* kHelp = R"(usage: ktune report [--cache PATH] -o FILE [--family F] [--json]
  Writes one self-contained HTML page (inline CSS and JS, no network access, opens from a file) about the
  cache layers of PATH:
    - per tuning key: a chart of every candidate's median time (whisker: fastest..slowest sample), the winner
      marked, failed and pruned candidates shown with their reason;
    - per device: a roofline (FLOP per byte against achieved FLOP/s) with each key's winner, under the peak
      bandwidth / FLOP/s stored with the device fingerprint (rows that do not record bytes and FLOPs per
      call, written by older builds, get no point);
    - cache contents: layers, binaries by family and arch (counts, sizes, compiler versions), tuning rows by
      family and device.
  -o, --out FILE   the page to write ('-' for stdout); written to FILE.tmp.<pid> and renamed into place
  --cache PATH     ':'-separated search path (default: $KTUNE_CACHE, else $XDG_CACHE_HOME/ktune/ktune.db,
                   else ~/.cache/ktune/ktune.db); read only
  --family F       only this family's binaries and tuning rows
  --json           print a summary object instead of a sentence
  Exit status 1 when no layer of PATH exists. See docs/report.md.
)";

std::string random_nonce() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

void write_file(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
  ::chmod(path.c_str(), 0644);
}

}  // namespace

int cmd_report(const std::vector<std::string>& argv_in) {
  std::vector<std::string> argv = argv_in;
  for (auto& a : argv) {
    if (a == "--help" || a == "-h") return fmt::print("{}", kHelp), 0;
    if (a == "-o") a = "--out";
  }
  Args args(argv, {"cache", "out", "family"}, {"json"});
  if (!args.has("out") || args.get("out").empty()) throw UsageError("report needs -o FILE (the HTML page to write)");
  if (args.get("out") == "-" && args.has("json")) throw UsageError("--json prints to stdout: give -o FILE, not -");
  report::Input in;
  in.search_path = args.get("cache", default_cache_path());
  in.layers = cache_layers(in.search_path);
  bool any = false;
  for (const auto& l : in.layers) any = any || l.present;
  if (!any) {
    fmt::print(stderr, "ktune report: no cache file found in '{}' (give --cache PATH)\n", in.search_path);
    return 1;
  }
  if (args.has("family")) family_option(args);  // a family this build has, not an empty report
  const std::string family = args.get("family");
  in.binaries = cache_list(in.search_path, family);
  in.tuning = cache_list_tuning(in.search_path, family);
  in.generated_at = utc_now();
  in.ktune_version = version();
  report::Summary s;
  const std::string page = report::render_html(in, random_nonce(), &s);
  const std::string out = args.get("out");
  write_file(out, page);
  if (args.has("json")) {
    fmt::print("{}\n", JsonObject().str("out", out).num("bytes", static_cast<int64_t>(page.size()))
                           .num("tuning_keys", s.keys).num("unreadable", s.unreadable).num("candidates", s.candidates)
                           .num("roofline_points", s.roofline_points).num("devices", s.devices)
                           .num("binaries", s.binaries).dump());
  } else if (out != "-") {
    fmt::print("wrote {} ({:.1f} KiB): {} tuning keys ({} candidates, {} on a roofline{}) on {} device(s), {} binaries\n",
               out, page.size() / 1024.0, s.keys, s.candidates, s.roofline_points,
               s.unreadable ? fmt::format(", {} unreadable", s.unreadable) : std::string(), s.devices, s.binaries);
  }
  return 0;
}

}  // namespace ktune::cli
