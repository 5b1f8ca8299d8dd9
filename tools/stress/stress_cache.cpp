// `ktune_stress cache`: N processes x M mixed operations on one cache file.
//
// Every process inserts binaries of its own (unique keys) and of a shared pool (the same 64 keys and bytes in
// every process: INSERT OR IGNORE races), looks up both, upserts tuning rows of its own (each key rewritten
// with an increasing sequence number: a lost update would leave an older one) and a contested set (all
// processes write the same 16 keys), runs find-by-columns lookups, counts and full verifies. Each process
// records what it committed; afterwards the parent checks that every committed row is there, whole and
// latest, that nothing else is, and that SQLite's integrity check and ktune's verify pass.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "ktune/cache/layered.hpp"
#include "stress_common.hpp"

namespace ktune::stress {
namespace {

constexpr int kShared = 64;
constexpr int kContested = 16;

std::string shared_key(int i) { return fmt::format("shared{}", i); }
size_t shared_size(int i) { return 1024 + 97 * static_cast<size_t>(i); }

struct ChildResult {
  std::vector<std::pair<std::string, size_t>> binaries;  // own, committed
  std::set<int> shared_inserted;
  std::map<std::string, int> tuning;  // own key -> last committed sequence number
  int64_t ops = 0, errors = 0, wrong = 0, verifies = 0, verify_issues = 0, lookups = 0, inserts = 0,
          tuning_writes = 0;
  std::string first_problem;
};

void write_result(const std::string& path, const ChildResult& r) {
  std::ofstream f(path);
  f << "ops " << r.ops << "\nerrors " << r.errors << "\nwrong " << r.wrong << "\nverifies " << r.verifies
    << "\nverify_issues " << r.verify_issues << "\nlookups " << r.lookups << "\ninserts " << r.inserts
    << "\ntuning_writes " << r.tuning_writes << "\n";
  for (const auto& [k, size] : r.binaries) f << "binary " << k << " " << size << "\n";
  for (int i : r.shared_inserted) f << "shared " << i << "\n";
  for (const auto& [k, seq] : r.tuning) f << "tuning " << k << " " << seq << "\n";
  if (!r.first_problem.empty()) f << "problem " << r.first_problem << "\n";
}

ChildResult read_result(const std::string& path) {
  ChildResult r;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    if (tag == "binary") {
      std::string k;
      size_t size = 0;
      in >> k >> size;
      r.binaries.emplace_back(k, size);
    } else if (tag == "shared") {
      int i = 0;
      in >> i;
      r.shared_inserted.insert(i);
    } else if (tag == "tuning") {
      std::string k;
      int seq = 0;
      in >> k >> seq;
      r.tuning[k] = seq;
    } else if (tag == "problem") {
      r.first_problem = line.substr(8);
    } else {
      int64_t v = 0;
      in >> v;
      if (tag == "ops") r.ops = v;
      else if (tag == "errors") r.errors = v;
      else if (tag == "wrong") r.wrong = v;
      else if (tag == "verifies") r.verifies = v;
      else if (tag == "verify_issues") r.verify_issues = v;
      else if (tag == "lookups") r.lookups = v;
      else if (tag == "inserts") r.inserts = v;
      else if (tag == "tuning_writes") r.tuning_writes = v;
    }
  }
  return r;
}

int child(const std::string& db_path, const std::string& result_path, int proc, int ops, int verify_every,
          unsigned seed) {
  ChildResult res;
  std::mt19937 rng(seed * 7919u + static_cast<unsigned>(proc));
  auto note = [&](const std::string& what) {
    if (res.first_problem.empty()) res.first_problem = what;
  };
  // Every process opens the file itself (the first ones create it concurrently).
  std::unique_ptr<cache::CacheDb> db;
  try {
    db = cache::CacheDb::open(db_path, {});
  } catch (const std::exception& e) {
    res.errors++;
    note(std::string("open: ") + e.what());
    write_result(result_path, res);
    return 1;
  }
  int own_seq = 0;
  for (int op = 0; op < ops; ++op) {
    res.ops++;
    const int r = static_cast<int>(rng() % 100);
    try {
      if (verify_every > 0 && op % verify_every == verify_every - 1) {
        res.verifies++;
        auto issues = db->verify();
        res.verify_issues += static_cast<int64_t>(issues.size());
        if (!issues.empty()) note("verify: " + issues[0].name + ": " + issues[0].problem);
      } else if (r < 25 && !res.binaries.empty()) {
        res.lookups++;
        const auto& [k, size] = res.binaries[rng() % res.binaries.size()];
        cache::BinaryLookup l = db->get_binary(make_record(k, size).digest);
        if (l.status != cache::LookupStatus::hit || !is_whole(l.record)) {
          res.wrong++;
          note("own binary " + k + " not served whole: " + l.detail);
        }
      } else if (r < 35) {
        res.lookups++;
        const int i = static_cast<int>(rng() % kShared);
        cache::BinaryLookup l = db->get_binary(make_record(shared_key(i), shared_size(i)).digest);
        if (l.status == cache::LookupStatus::damaged || (l.status == cache::LookupStatus::hit && !is_whole(l.record))) {
          res.wrong++;
          note("shared binary " + shared_key(i) + " damaged: " + l.detail);
        }
      } else if (r < 55 || res.binaries.empty()) {
        res.inserts++;
        const std::string k = fmt::format("p{}-b{}", proc, op);
        const size_t size = 512 + rng() % 16384;
        if (!db->put_binary(make_record(k, size))) {
          res.wrong++;
          note("own insert " + k + " reported already present");
        }
        res.binaries.emplace_back(k, size);
      } else if (r < 63) {
        res.inserts++;
        const int i = static_cast<int>(rng() % kShared);
        db->put_binary(make_record(shared_key(i), shared_size(i)));  // true for exactly one process
        res.shared_inserted.insert(i);
      } else if (r < 75) {
        res.tuning_writes++;
        std::string k;
        if (res.tuning.empty() || rng() % 2) {
          k = fmt::format("p{}-t{}", proc, res.tuning.size());
        } else {
          auto it = res.tuning.begin();
          std::advance(it, rng() % res.tuning.size());
          k = it->first;
        }
        const int seq = ++own_seq;
        db->put_tuning(make_tuning(k, fmt::format("t64.s{}.w4", seq)));
        res.tuning[k] = seq;
      } else if (r < 80) {
        res.tuning_writes++;
        db->put_tuning(make_tuning(fmt::format("contested{}", rng() % kContested), fmt::format("p{}-op{}", proc, op)));
      } else if (r < 88 && !res.tuning.empty()) {
        res.lookups++;
        auto it = res.tuning.begin();
        std::advance(it, rng() % res.tuning.size());
        auto t = db->get_tuning("stress", it->first, make_tuning(it->first, "").device_fingerprint);
        if (!t || t->winner_config != fmt::format("t64.s{}.w4", it->second)) {
          res.wrong++;
          note("own tuning " + it->first + " lost its last update");
        }
      } else if (r < 91) {
        res.lookups++;
        const std::string k = fmt::format("contested{}", rng() % kContested);
        std::string problem;
        auto t = db->get_tuning_checked("stress", k, make_tuning(k, "").device_fingerprint, &problem);
        if (!problem.empty() || (t && t->winner_config.rfind('p', 0) != 0)) {
          res.wrong++;
          note("contested tuning " + k + ": " + problem);
        }
      } else if (r < 95) {
        res.lookups++;
        const int i = static_cast<int>(rng() % kShared);
        const cache::BinaryRecord want = make_record(shared_key(i), shared_size(i));
        cache::BinaryLookup l = db->find_binary_any_compiler_version(want.source_digest, want.arch, want.compiler,
                                                                     want.options, want.ktune_version);
        if (l.status == cache::LookupStatus::damaged || (l.status == cache::LookupStatus::hit && !is_whole(l.record))) {
          res.wrong++;
          note("find_binary_any_compiler_version " + shared_key(i) + ": " + l.detail);
        }
      } else {
        db->counts();
      }
    } catch (const std::exception& e) {
      res.errors++;
      note(fmt::format("op {}: {}", op, e.what()));
    }
  }
  write_result(result_path, res);
  return res.errors || res.wrong || res.verify_issues ? 2 : 0;
}

}  // namespace

int run_cache_stress(Options& o) {
  const int procs = o.num("procs", 16), ops = o.num("ops", 1000), verify_every = o.num("verify-every", 250);
  const unsigned seed = static_cast<unsigned>(o.num("seed", 1));
  const std::string json = o.str("json", "");
  std::string dir = o.str("dir", "");
  const bool keep = o.flag("keep");
  o.done();
  if (dir.empty()) dir = temp_dir("cache");
  const std::string db_path = dir + "/shared/ktune.db";  // the directory too is created by the racing openers

  const double t0 = now_seconds();
  std::vector<pid_t> pids;
  for (int p = 0; p < procs; ++p)
    pids.push_back(spawn([&, p] {
      return child(db_path, fmt::format("{}/result.{}", dir, p), p, ops, verify_every, seed);
    }));
  Report rep("cache");
  int crashed = 0;
  for (pid_t pid : pids) {
    int rc = wait_for(pid);
    if (rc != 0 && rc != 2) ++crashed;  // 2: the child counted problems itself (reported below)
  }
  const double elapsed = now_seconds() - t0;

  ChildResult total;
  std::vector<ChildResult> results;
  std::set<int> shared_inserted;
  for (int p = 0; p < procs; ++p) {
    results.push_back(read_result(fmt::format("{}/result.{}", dir, p)));
    const ChildResult& r = results.back();
    total.ops += r.ops;
    total.errors += r.errors;
    total.wrong += r.wrong;
    total.verifies += r.verifies;
    total.verify_issues += r.verify_issues;
    total.lookups += r.lookups;
    total.inserts += r.inserts;
    total.tuning_writes += r.tuning_writes;
    shared_inserted.insert(r.shared_inserted.begin(), r.shared_inserted.end());
    if (!r.first_problem.empty()) rep.fail(fmt::format("process {}: {}", p, r.first_problem));
  }

  int64_t lost_binaries = 0, broken_binaries = 0, lost_tuning = 0, stale_tuning = 0, bad_contested = 0, extra = 0;
  int64_t rows_binaries = 0, rows_tuning = 0;
  std::string integrity = integrity_check(db_path);
  size_t verify_issues_after = 0;
  try {
    auto db = cache::CacheDb::open(db_path, {});
    std::set<std::string> expected_digests;
    for (const auto& r : results) {
      for (const auto& [k, size] : r.binaries) {
        const cache::BinaryRecord want = make_record(k, size);
        expected_digests.insert(want.digest);
        cache::BinaryLookup l = db->get_binary(want.digest);
        if (l.status == cache::LookupStatus::miss) ++lost_binaries;
        else if (l.status != cache::LookupStatus::hit || !is_whole(l.record) || l.record.blob.size() != size)
          ++broken_binaries;
      }
      for (const auto& [k, seq] : r.tuning) {
        auto t = db->get_tuning("stress", k, make_tuning(k, "").device_fingerprint);
        if (!t) ++lost_tuning;
        else if (t->winner_config != fmt::format("t64.s{}.w4", seq)) ++stale_tuning;
      }
    }
    for (int i : shared_inserted) {
      const cache::BinaryRecord want = make_record(shared_key(i), shared_size(i));
      expected_digests.insert(want.digest);
      cache::BinaryLookup l = db->get_binary(want.digest);
      if (l.status == cache::LookupStatus::miss) ++lost_binaries;
      else if (l.status != cache::LookupStatus::hit || !is_whole(l.record)) ++broken_binaries;
    }
    for (const auto& info : db->list_binaries()) {
      ++rows_binaries;
      if (!expected_digests.count(info.digest)) ++extra;
    }
    for (const auto& t : db->list_tuning()) {
      ++rows_tuning;
      if (t.problem_key.rfind("contested", 0) == 0 && t.winner_config.rfind('p', 0) != 0) ++bad_contested;
    }
    auto issues = db->verify();
    verify_issues_after = issues.size();
    if (!issues.empty()) rep.fail("verify after the run: " + issues[0].name + ": " + issues[0].problem);
  } catch (const std::exception& e) {
    rep.fail(std::string("checking the file after the run: ") + e.what());
  }

  rep.count("processes", procs);
  rep.count("operations", total.ops);
  rep.count("lookups", total.lookups);
  rep.count("binary_inserts", total.inserts);
  rep.count("tuning_writes", total.tuning_writes);
  rep.count("verifies_during_run", total.verifies);
  rep.count("rows_binaries", rows_binaries);
  rep.count("rows_tuning", rows_tuning);
  rep.count("errors", total.errors, true);
  rep.count("wrong_results", total.wrong, true);
  rep.count("processes_crashed", crashed, true);
  rep.count("verify_issues_during_run", total.verify_issues, true);
  rep.count("lost_binaries", lost_binaries, true);
  rep.count("broken_binaries", broken_binaries, true);
  rep.count("lost_tuning_rows", lost_tuning, true);
  rep.count("lost_tuning_updates", stale_tuning, true);
  rep.count("bad_contested_rows", bad_contested, true);
  rep.count("unexpected_rows", extra, true);
  rep.count("verify_issues_after", static_cast<int64_t>(verify_issues_after), true);
  rep.text("integrity_check", integrity, "ok");
  rep.count("ops_per_second", static_cast<int64_t>(total.ops / std::max(elapsed, 1e-3)));
  const int rc = rep.finish(json, elapsed);
  if (!keep && rc == 0) std::filesystem::remove_all(dir);
  else fmt::print("  files kept in {}\n", dir);
  return rc;
}

}  // namespace ktune::stress
