// `ktune_stress crash`: writers killed with SIGKILL at random points, R rounds; after every round the file
// must open (as the next process would), pass PRAGMA integrity_check and ktune verify, hold every operation a
// writer saw committed, and hold only whole entries (every row's metadata and blob exactly what its key
// generates: no row mixes two writers or two writes).
//
// Writers announce each operation on a pipe before ("intent") and after ("done") it: a done row must be
// there; an intent without its done may or may not be, but if it is, it is whole. Round kinds:
//   plain      2 writers: binaries, tuning upserts, removals, a shared key both insert, prune
//   migration  every 10th round (offset 3): writers open a fresh schema-v1 file of 300 rows (they race to
//              migrate it) and then write; afterwards the file is v2 with every v1 row intact
//   export     every 10th round (offset 7): one writer exports and signs copies while another writes; every
//              export file that exists opens and verifies, and a finished signature checks valid
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "ktune/cache/signing.hpp"
#include "stress_common.hpp"

namespace ktune::stress {
namespace {

namespace fs = std::filesystem;

void say(int fd, const std::string& line) {
  const std::string l = line + "\n";  // < PIPE_BUF: one atomic write
  ssize_t n;
  do {
    n = ::write(fd, l.data(), l.size());
  } while (n < 0 && errno == EINTR);
}

std::string drain(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  return out;
}

enum class Kind { plain, migration, exporting };

struct Paths {
  std::string db, dir, key, pub;
};

// A writer: runs until killed. Never returns normally in practice (the parent kills it); returns 0 after a
// safety cap of operations.
int writer(const Paths& paths, int round, int w, Kind kind, int fd) {
  std::mt19937 rng(static_cast<unsigned>(round * 131 + w * 7 + 1));
  if (kind == Kind::exporting && w == 0) {
    auto db = cache::CacheDb::open(paths.db, {});
    const cache::SecretKey key = cache::read_secret_key(paths.key);
    for (int n = 0; n < 1000; ++n) {
      const std::string dest = fmt::format("{}/export.r{}.{}.db", paths.dir, round, n);
      say(fd, "e " + dest);
      db->export_to(dest);
      say(fd, "E " + dest);
      cache::sign_file(dest, key);
      say(fd, "S " + dest);
    }
    return 0;
  }
  auto db = cache::CacheDb::open(paths.db, {});  // migration rounds: the writers race to migrate here
  std::vector<std::pair<std::string, size_t>> mine;
  std::map<std::string, int> seq;
  for (int i = 0; i < 100000; ++i) {
    const int r = static_cast<int>(rng() % 100);
    if (r < 55 || mine.empty()) {
      const std::string k = fmt::format("r{}w{}i{}", round, w, i);
      const size_t size = 256 + rng() % 3840;
      say(fd, fmt::format("b {} {}", k, size));
      db->put_binary(make_record(k, size));
      say(fd, fmt::format("B {} {}", k, size));
      mine.emplace_back(k, size);
    } else if (r < 80) {
      const std::string k = fmt::format("r{}w{}k{}", round, w, rng() % 4);
      const int s = ++seq[k];
      say(fd, fmt::format("t {} {}", k, s));
      db->put_tuning(make_tuning(k, fmt::format("t64.s{}.w4", s)));
      say(fd, fmt::format("T {} {}", k, s));
    } else if (r < 90) {
      const size_t at = rng() % mine.size();
      const auto [k, size] = mine[at];
      mine.erase(mine.begin() + static_cast<long>(at));
      say(fd, fmt::format("x {} {}", k, size));
      db->remove_binary(make_record(k, size).digest);
      say(fd, fmt::format("X {} {}", k, size));
    } else if (r < 97) {
      const std::string k = fmt::format("shared{}", rng() % 32);
      db->put_binary(make_record(k, 2048));  // both writers race for these; whole either way
      say(fd, fmt::format("B {} 2048", k));
    } else {
      db->prune({});
    }
  }
  return 0;
}

struct Expect {
  std::map<std::string, size_t> done_binaries;     // must be present and whole
  std::set<std::string> maybe_binaries;            // intent only: if present, whole
  std::set<std::string> removed;                   // must be absent
  std::map<std::string, std::pair<int, int>> tuning;  // key -> (done seq, highest intent seq)
  std::vector<std::string> exports_done, exports_signed;
  int64_t confirmed = 0;
};

void parse(const std::string& text, Expect& e) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string tag, k;
    l >> tag >> k;
    if (k.empty()) continue;  // a torn last line cannot happen (atomic writes), but be safe
    if (tag == "b") {
      e.maybe_binaries.insert(k);
    } else if (tag == "B") {
      size_t size = 0;
      l >> size;
      e.done_binaries[k] = size;
      e.removed.erase(k);
      ++e.confirmed;
    } else if (tag == "x") {
      e.done_binaries.erase(k);  // in flight: may be either
      e.maybe_binaries.insert(k);
    } else if (tag == "X") {
      e.removed.insert(k);
      ++e.confirmed;
    } else if (tag == "t" || tag == "T") {
      int s = 0;
      l >> s;
      auto& [done, intent] = e.tuning[k];
      intent = std::max(intent, s);
      if (tag == "T") {
        done = std::max(done, s);
        ++e.confirmed;
      }
    } else if (tag == "E") {
      e.exports_done.push_back(k);
      ++e.confirmed;
    } else if (tag == "S") {
      e.exports_signed.push_back(k);
      ++e.confirmed;
    }
  }
}

struct Totals {
  int64_t rounds = 0, kills = 0, writers_exited_early = 0, open_failures = 0, verify_failures = 0,
          integrity_failures = 0, lost = 0, torn = 0, resurrected = 0, stale_tuning = 0, rows_checked = 0,
          confirmed = 0, migrations_checked = 0, v1_rows_lost = 0, exports_checked = 0, bad_exports = 0,
          signatures_checked = 0, bad_signatures = 0, stray_temp_files = 0,
          refused_after_killed_sign = 0;
  std::string first_problem;
  void problem(const std::string& p) {
    if (first_problem.empty()) first_problem = p;
  }
};

void check_round(const Paths& paths, int round, const Expect& e, Kind kind, const std::vector<std::string>& v1_keys,
                 const std::vector<cache::PublicKey>& trusted, Totals& t) {
  std::unique_ptr<cache::CacheDb> db;
  try {
    db = cache::CacheDb::open(paths.db, {});
  } catch (const std::exception& ex) {
    ++t.open_failures;
    t.problem(std::string("open after kill: ") + ex.what());
    return;
  }
  if (integrity_check(paths.db) != "ok") {
    ++t.integrity_failures;
    t.problem("integrity_check: " + integrity_check(paths.db));
  }
  auto issues = db->verify();
  if (!issues.empty()) {
    ++t.verify_failures;
    t.problem("verify: " + issues[0].name + ": " + issues[0].problem);
  }
  for (const auto& [k, size] : e.done_binaries) {
    cache::BinaryLookup l = db->get_binary(make_record(k, size).digest);
    if (l.status == cache::LookupStatus::miss) {
      ++t.lost;
      t.problem("committed binary lost: " + k);
    } else if (l.status != cache::LookupStatus::hit || !is_whole(l.record)) {
      ++t.torn;
      t.problem("committed binary not whole: " + k + " " + l.detail);
    }
  }
  for (const auto& k : e.removed) {
    for (const auto& info : db->list_binaries("stress"))
      if (info.name == "stress/sm_90a/" + k) {
        ++t.resurrected;
        t.problem("removed binary is back: " + k);
      }
  }
  // Every row, whoever wrote it and however far its writer got: whole.
  for (const auto& info : db->list_binaries()) {
    ++t.rows_checked;
    cache::BinaryLookup l = db->get_binary(info.digest);
    if (l.status != cache::LookupStatus::hit || !is_whole(l.record)) {
      ++t.torn;
      t.problem("row not whole: " + info.name + " " + l.detail);
    }
  }
  for (const auto& [k, seqs] : e.tuning) {
    auto row = db->get_tuning("stress", k, make_tuning(k, "").device_fingerprint);
    int got = 0;
    if (row && std::sscanf(row->winner_config.c_str(), "t64.s%d.w4", &got) != 1) got = -1;
    if (seqs.first > 0 && !row) {
      ++t.lost;
      t.problem("committed tuning row lost: " + k);
    } else if (row && (got < seqs.first || got > seqs.second)) {
      ++t.stale_tuning;
      t.problem(fmt::format("tuning {} holds seq {} (done {}, intent {})", k, got, seqs.first, seqs.second));
    }
  }
  if (kind == Kind::migration) {
    ++t.migrations_checked;
    if (db->schema_version() != cache::kCacheSchemaVersion) t.problem("migration round: file not at v2");
    for (const auto& k : v1_keys) {
      cache::BinaryLookup l = db->get_binary(make_record(k, 1500).digest);
      if (l.status != cache::LookupStatus::hit || !is_whole(l.record)) {
        ++t.v1_rows_lost;
        t.problem("v1 row lost in migration: " + k);
      }
    }
  }
  if (kind == Kind::exporting) {
    std::set<std::string> done(e.exports_done.begin(), e.exports_done.end());
    std::set<std::string> signed_(e.exports_signed.begin(), e.exports_signed.end());
    for (const auto& entry : fs::directory_iterator(paths.dir)) {
      const std::string p = entry.path().string();
      if (p.find(fmt::format("/export.r{}.", round)) == std::string::npos) continue;  // this round's
      if (p.find(".tmp.") != std::string::npos || p.size() < 3 || p.substr(p.size() - 3) != ".db") {
        ++t.stray_temp_files;  // an export killed before its link: never at the destination name
        continue;
      }
      ++t.exports_checked;
      try {
        cache::OpenOptions ro;
        ro.read_only = true;
        auto x = cache::CacheDb::open(p, ro);
        if (!x->verify().empty()) throw cache::CacheError("verify failed");
        cache::SignatureCheck c = x->check_signature(trusted, true);
        ++t.signatures_checked;
        // Signed: valid. Killed mid-signing: unsigned. Never invalid or damaged.
        if (!(c.ok() || (c.result == cache::SignatureCheck::Result::unsigned_ && !signed_.count(p)))) {
          ++t.bad_signatures;
          t.problem("export signature: " + c.detail);
        }
      } catch (const std::exception& ex) {
        // A signer killed after the export finished can leave its commit in a -wal that only a writer can
        // recover: a lock-free reader refuses the file by name (never serves it without that commit), and the
        // next `ktune cache sign` recovers it. Any other failure, or this one for a file not being signed, is bad.
        const bool killed_while_signing = done.count(p) && !signed_.count(p) &&
                                          std::string(ex.what()).find("cannot be read without locking") !=
                                              std::string::npos;
        if (killed_while_signing) {
          ++t.refused_after_killed_sign;
          continue;
        }
        ++t.bad_exports;
        t.problem("export " + p + ": " + ex.what());
      }
    }
    for (const auto& p : done)
      if (!fs::exists(p)) {
        ++t.lost;
        t.problem("finished export missing: " + p);
      }
  }
  t.confirmed += e.confirmed;
}

}  // namespace

int run_crash(Options& o) {
  const int rounds = o.num("rounds", 100), writers = o.num("writers", 2), max_ms = o.num("max-delay-ms", 100);
  const int per_file = o.num("rounds-per-file", 25);
  const unsigned seed = static_cast<unsigned>(o.num("seed", 1));
  const std::string json = o.str("json", "");
  std::string dir = o.str("dir", "");
  const bool keep = o.flag("keep");
  o.done();
  if (dir.empty()) dir = temp_dir("crash");
  Paths paths;
  paths.dir = dir;
  paths.key = dir + "/sign.key";
  paths.pub = dir + "/sign.key.pub";
  cache::write_key_files(cache::generate_secret_key(), paths.key, paths.pub);
  const std::vector<cache::PublicKey> trusted{cache::read_public_key(paths.pub)};

  std::mt19937 rng(seed);
  Totals t;
  const double t0 = now_seconds();
  for (int round = 0; round < rounds; ++round) {
    const Kind kind = round % 10 == 3 ? Kind::migration : round % 10 == 7 ? Kind::exporting : Kind::plain;
    std::vector<std::string> v1_keys;
    if (kind == Kind::migration) {
      paths.db = fmt::format("{}/migrate.r{}.db", dir, round);
      auto v1 = cache::detail::open_at_schema_version(paths.db, 1);
      for (int i = 0; i < 300; ++i) {
        v1_keys.push_back(fmt::format("v1r{}n{}", round, i));
        v1->put_binary(make_record(v1_keys.back(), 1500));
        v1->put_tuning(make_tuning(fmt::format("v1r{}t{}", round, i % 20), "t64.s1.w4"));
      }
    } else {
      paths.db = fmt::format("{}/main.{}.db", dir, round / std::max(per_file, 1));
      cache::CacheDb::open(paths.db, {});  // exists before the writers start
    }

    std::vector<pid_t> pids;
    std::vector<int> read_ends;
    for (int w = 0; w < writers; ++w) {
      int fds[2];
      if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
      pid_t pid = spawn([&, w, fds] {
        ::close(fds[0]);
        return writer(paths, round, w, kind, fds[1]);
      });
      ::close(fds[1]);
      pids.push_back(pid);
      read_ends.push_back(fds[0]);
    }
    // Kill each writer at its own random moment.
    std::vector<int> delays;
    // Export rounds run longer (an export verifies, copies, compacts and fsyncs) so some finish and some die
    // at each step.
    const int span = kind == Kind::exporting ? 4 * max_ms : max_ms;
    for (int w = 0; w < writers; ++w) delays.push_back(1 + static_cast<int>(rng() % static_cast<unsigned>(span)));
    std::sort(delays.begin(), delays.end());
    int waited = 0;
    for (int w = 0; w < writers; ++w) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delays[static_cast<size_t>(w)] - waited));
      waited = delays[static_cast<size_t>(w)];
      ::kill(pids[static_cast<size_t>(w)], SIGKILL);
    }
    Expect e;
    for (int w = 0; w < writers; ++w) {
      const int status = wait_for(pids[static_cast<size_t>(w)]);
      if (status == 128 + SIGKILL) ++t.kills;
      else {
        ++t.writers_exited_early;
        t.problem(fmt::format("round {} writer {} exited with {} before the kill", round, w, status));
      }
      parse(drain(read_ends[static_cast<size_t>(w)]), e);
      ::close(read_ends[static_cast<size_t>(w)]);
    }
    ++t.rounds;
    check_round(paths, round, e, kind, v1_keys, trusted, t);
  }
  const double elapsed = now_seconds() - t0;

  Report rep("crash");
  rep.count("rounds", t.rounds);
  rep.count("writers_killed_with_sigkill", t.kills);
  rep.count("operations_confirmed_committed", t.confirmed);
  rep.count("rows_checked_whole", t.rows_checked);
  rep.count("migration_rounds_checked", t.migrations_checked);
  rep.count("exports_checked", t.exports_checked);
  rep.count("export_signatures_checked", t.signatures_checked);
  rep.count("stray_export_temp_files", t.stray_temp_files);
  rep.count("exports_refused_after_killed_sign", t.refused_after_killed_sign);
  rep.count("writers_exited_before_kill", t.writers_exited_early, true);
  rep.count("open_failures_after_kill", t.open_failures, true);
  rep.count("integrity_check_failures", t.integrity_failures, true);
  rep.count("verify_failures", t.verify_failures, true);
  rep.count("lost_committed", t.lost, true);
  rep.count("torn_rows", t.torn, true);
  rep.count("removed_rows_back", t.resurrected, true);
  rep.count("tuning_rows_out_of_order", t.stale_tuning, true);
  rep.count("v1_rows_lost_in_migration", t.v1_rows_lost, true);
  rep.count("bad_exports", t.bad_exports, true);
  rep.count("bad_signatures", t.bad_signatures, true);
  if (!t.first_problem.empty()) rep.fail("first problem: " + t.first_problem);
  const int rc = rep.finish(json, elapsed);
  if (!keep && rc == 0) fs::remove_all(dir);
  else fmt::print("  files kept in {}\n", dir);
  return rc;
}

}  // namespace ktune::stress
