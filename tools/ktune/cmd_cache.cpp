// ktune cache ls|stats|verify|prune|export|merge — operator's view of the cache layers.
#include <map>
#include <optional>

#include <fmt/format.h>

#include "args.hpp"
#include "commands.hpp"
#include "file_stamps.hpp"
#include "json_writer.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/runtime.hpp"

namespace ktune::cli {
namespace {

const char* kHelp = R"(usage: ktune cache <ls|show|stats|check|verify|prune|export|merge|keygen|sign> [options]
  ls     [--family F] [--json]            one row per binary: readable name, arch, compiler, size, layer
  show   KEY [--json]                     tuning rows whose key contains KEY: every candidate and the winner
  stats  [--json]                         per layer: binaries, tuning rows, bytes; per family/arch counts;
                                          tuning rows per ktune version (a runtime uses only its own)
  check  --preset NAME|FILE [--arch A[,A...]] [--device NAME | --fingerprint FILE] [warmup's bucket options]
         [--json]                         coverage of a preset, no GPU needed: per key, whether the default and
                                          the tuned binary are in a layer (the runtime's lookup, KTUNE_JIT=0)
                                          and whether a tuning row exists for the device (--device: by name;
                                          --fingerprint: a fingerprint line or `ktune info --json` output;
                                          default: GPU 0 if any). --arch default: the fingerprint's arch, else
                                          every default arch. Exit 1 when a binary is missing
  verify [--pubkey P[:P2...]] [--load] [--json]
                                          SQLite integrity + SHA-256 of every blob and row digest, and every
                                          blob's binding symbol and entry points in its symbol table; exit 1
                                          naming bad entries. --pubkey: also require every layer to be signed by
                                          one of these keys over exactly its current rows (exit 1 otherwise).
                                          --load: also load every binary this machine can (host objects of this
                                          CPU, CUBINs of GPU 0's arch) as the runtime would; exit 1 naming those
                                          that fail, and any layer the runtime refuses (KTUNE_TRUSTED_KEYS
                                          without a valid signature, unusable), whose binaries are not loaded.
                                          A layer file that changes while it is verified fails the command
                                          (exit 1, no report: the checks read the layers more than once)
  prune  [--stale-compiler] [--stale-ktune] [--family F] [--json]
                                          delete damaged entries (and stale ones) from the writable layer
  export --out FILE [--json]              all intact entries of all layers into one new self-contained FILE
                                          to ship (compacted, rollback journal, no -wal/-shm)
  merge  --from FILE [--pubkey P[:P2...]] [--json]
                                          import the intact entries of FILE into the writable layer.
                                          --pubkey: FILE must be signed by one of these keys over exactly
                                          its rows, else nothing is imported (exit 1)
  keygen --out K [--json]                 new Ed25519 key pair: secret key K (mode 0600), public key K.pub
  sign   --key K [--json]                 sign the --cache FILE (one file, e.g. an export) with secret key K;
                                          runtimes with KTUNE_TRUSTED_KEYS=K.pub accept it as a read-only layer
All take --cache PATH (a ':'-separated search path; default $KTUNE_CACHE, else
$XDG_CACHE_HOME/ktune/ktune.db, else ~/.cache/ktune/ktune.db).
)";

std::string merge_json(const CacheMergeSummary& m) {
  return JsonObject().num("binaries_added", m.binaries_added).num("binaries_skipped", m.binaries_skipped)
      .num("tuning_added", m.tuning_added).num("tuning_updated", m.tuning_updated)
      .num("damaged_skipped", m.damaged_skipped).dump();
}

int ls(const Args& args, const std::string& cache) {
  auto entries = cache_list(cache, args.get("family"));
  if (args.has("json")) {
    std::vector<std::string> rows;
    for (const auto& e : entries)
      rows.push_back(JsonObject().str("name", e.name).str("family", e.family).str("arch", e.arch)
                         .str("compiler", e.compiler + " " + e.compiler_version).str("ktune", e.ktune_version)
                         .num("bytes", e.blob_size).real("compile_ms", e.compile_ms).str("digest", e.digest)
                         .str("layer", e.layer).dump());
    fmt::print("{}\n", JsonObject().num("count", static_cast<int64_t>(entries.size())).raw("binaries", json_array(rows)).dump());
    return 0;
  }
  for (const auto& e : entries)
    fmt::print("{:<90} {:>9} B  {} {}  {}  {}\n", e.name, e.blob_size, e.compiler, e.compiler_version,
               e.digest.substr(0, 12), e.layer);
  fmt::print("{} binaries\n", entries.size());
  return 0;
}

int stats(const Args& args, const std::string& cache) {
  auto layers = cache_layers(cache);
  std::map<std::string, int> per_family_arch, tuning_per_version;
  for (const auto& e : cache_list(cache)) per_family_arch[e.family + " " + e.arch]++;
  // A runtime uses only the rows its own version tuned (docs/cache_format.md, "Tuning version").
  for (const auto& t : cache_list_tuning(cache)) tuning_per_version[t.ktune_version]++;
  if (args.has("json")) {
    std::vector<std::string> rows;
    for (const auto& l : layers)
      rows.push_back(JsonObject().str("path", l.path).boolean("present", l.present).boolean("writable", l.writable)
                         .num("binaries", l.binaries).num("tuning", l.tuning).num("blob_bytes", l.blob_bytes)
                         .num("schema_version", l.schema_version).boolean("served", l.served)
                         .str("note", l.note).dump());
    JsonObject groups;
    for (const auto& [k, n] : per_family_arch) groups.num(k, n);
    JsonObject versions;
    for (const auto& [v, n] : tuning_per_version) versions.num(v, n);
    fmt::print("{}\n", JsonObject().raw("layers", json_array(rows)).raw("by_family_arch", groups.dump())
                           .str("ktune_version", version()).raw("tuning_by_ktune_version", versions.dump()).dump());
    return 0;
  }
  for (const auto& l : layers) {
    if (!l.present) {
      fmt::print("{}: absent{}{}\n", l.path, l.note.empty() ? "" : " — ", l.note);
      continue;
    }
    fmt::print("{} ({}, schema {}): {} binaries ({:.1f} MiB), {} tuning rows{}\n", l.path, l.writable ? "rw" : "ro",
               l.schema_version, l.binaries, l.blob_bytes / 1048576.0, l.tuning,
               l.served ? std::string() : " — not served under KTUNE_TRUSTED_KEYS: " + l.note);
  }
  for (const auto& [k, n] : per_family_arch) fmt::print("  {:<32} {}\n", k, n);
  for (const auto& [v, n] : tuning_per_version)
    fmt::print("  tuning rows of ktune {}: {} ({})\n", v, n,
               v == version() ? "this version" : fmt::format("not used by this version, {}", version()));
  return 0;
}

int verify(const Args& args, const std::string& cache) {
  // A verify that cannot stand for the files: exit 1 with why, and in JSON nothing intact or signed. `changed`:
  // the files that changed under it.
  const auto refuse = [&](const std::string& why, const std::vector<std::string>& changed) {
    if (args.has("json")) {
      JsonObject out;
      out.num("checked", int64_t{0}).num("damaged", int64_t{0}).boolean("intact", false);
      if (!changed.empty()) {
        std::vector<std::string> files;
        for (const auto& c : changed) files.push_back(json_quote(c));
        out.boolean("stable", false).raw("changed", json_array(files));
      }
      out.str("error", why);
      if (args.has("pubkey")) out.boolean("signed", false);
      fmt::print("{}\n", out.dump());
    } else {
      fmt::print(stderr, "ktune cache verify: {}\n", why);
    }
    return 1;
  };
  // A path with no cache file behind it (a typo, a dangling link) is no intact, signed cache: a shipping gate
  // that checked nothing, or only some of the layers it names, must not pass.
  if (const std::string why = missing_layers(cache); !why.empty()) return refuse(why + ": nothing there to verify", {});
  // The checks below read the layers in separate passes; stamps of the files around them say whether every pass
  // read the same files. One that changed in between (renamed over, rewritten, committed to) leaves a report no
  // single file matches, so none is given and the command fails.
  const std::vector<std::string> layer_paths = cache_layer_files(cache);
  const std::vector<FileStamp> stamps = stamp_layer_files(layer_paths);
  auto issues = cache_verify(cache);
  size_t total = cache_list(cache).size();
  const bool load = args.has("load");
  CacheLoadReport loads;
  if (load) loads = cache_verify_loads(cache);
  std::vector<CacheSignatureStatus> sigs;
  if (args.has("pubkey")) sigs = cache_verify_signatures(cache, args.get("pubkey"));
  if (const std::vector<std::string> changed = changed_files(stamps, stamp_layer_files(layer_paths)); !changed.empty())
    return refuse(fmt::format("{} changed while it was verified (the checks may have read different files); "
                              "nothing is reported: verify again once nothing writes the cache",
                              fmt::join(changed, ", ")),
                  changed);
  bool all_signed = true;
  for (const auto& s : sigs) all_signed = all_signed && s.valid;
  if (args.has("json")) {
    std::vector<std::string> rows, sig_rows;
    for (const auto& i : issues)
      rows.push_back(JsonObject().str("layer", i.layer).str("digest", i.digest).str("name", i.name)
                         .str("problem", i.problem).dump());
    for (const auto& s : sigs)
      sig_rows.push_back(JsonObject().str("layer", s.layer).str("result", s.result).boolean("valid", s.valid)
                             .str("key_id", s.key_id).num("binaries", s.binaries).num("tuning", s.tuning)
                             .str("detail", s.detail).dump());
    JsonObject out;
    out.num("checked", static_cast<int64_t>(total)).num("damaged", static_cast<int64_t>(issues.size()))
        .boolean("intact", issues.empty()).boolean("stable", true).raw("issues", json_array(rows));
    if (args.has("pubkey")) out.boolean("signed", all_signed).raw("signatures", json_array(sig_rows));
    if (load) {
      std::vector<std::string> failed;
      for (const auto& i : loads.failures)
        failed.push_back(JsonObject().str("layer", i.layer).str("digest", i.digest).str("name", i.name)
                             .str("problem", i.problem).dump());
      std::vector<std::string> refused;
      for (const auto& l : loads.refused_layers) refused.push_back(json_quote(l));
      out.num("loaded", loads.loaded).num("load_failed", loads.failed)
          .num("not_loadable_here", loads.not_loadable_here).str("load_targets", loads.targets)
          .raw("load_failures", json_array(failed)).raw("load_refused_layers", json_array(refused));
    }
    fmt::print("{}\n", out.dump());
  } else {
    for (const auto& i : issues) fmt::print("DAMAGED {} ({}) in {}: {}\n", i.name, i.digest, i.layer, i.problem);
    if (issues.empty()) fmt::print("{} binaries checked: all intact\n", total);
    else fmt::print("{} binaries checked: {} damaged\n", total, issues.size());
    for (const auto& s : sigs) fmt::print("{} signature {}: {}\n", s.valid ? "GOOD" : "BAD", s.result, s.detail);
    if (load) {
      for (const auto& i : loads.failures)
        fmt::print("LOAD FAILED {} ({}) in {}: {}\n", i.name, i.digest, i.layer, i.problem);
      for (const auto& l : loads.refused_layers)
        fmt::print("LOAD SKIPPED layer {} (a runtime of this environment serves none of its rows; nothing of it was "
                   "loaded)\n", l);
      fmt::print("load check ({}): {} loaded, {} failed, {} not loadable on this machine\n", loads.targets,
                 loads.loaded, loads.failed, loads.not_loadable_here);
    }
  }
  return issues.empty() && all_signed && loads.failed == 0 && loads.refused_layers.empty() ? 0 : 1;
}

int keygen(const Args& args) {
  if (!args.has("out")) throw UsageError("keygen needs --out FILE (the secret key; the public key goes to FILE.pub)");
  const std::string secret = args.get("out"), pub = secret + ".pub";
  const std::string id = cache_keygen(secret, pub);
  if (args.has("json"))
    fmt::print("{}\n", JsonObject().str("key_id", id).str("secret_key", secret).str("public_key", pub).dump());
  else
    fmt::print("key {}: secret key {} (keep it private), public key {} (ship it; KTUNE_TRUSTED_KEYS={})\n", id,
               secret, pub, pub);
  return 0;
}

int sign(const Args& args, const std::string& cache) {
  if (!args.has("key")) throw UsageError("sign needs --key FILE (a secret key from `ktune cache keygen`)");
  if (!args.has("cache")) throw UsageError("sign needs --cache FILE: the one cache file to sign (e.g. an export)");
  CacheSignatureInfo info = cache_sign(cache, args.get("key"));
  if (args.has("json"))
    fmt::print("{}\n", JsonObject().str("path", info.path).str("key_id", info.key_id)
                           .str("manifest_sha256", info.manifest_sha256).num("binaries", info.binaries)
                           .num("tuning", info.tuning).dump());
  else
    fmt::print("signed {} with key {}: {} binaries and {} tuning rows (manifest {})\n", info.path, info.key_id,
               info.binaries, info.tuning, info.manifest_sha256.substr(0, 16));
  return 0;
}

int show(const Args& args, const std::string& cache) {
  if (args.positional().empty()) throw UsageError("show needs a KEY (or part of one; see ktune cache ls)");
  const std::string& needle = args.positional()[0];
  std::vector<std::string> rows;
  int n = 0;
  for (const auto& t : cache_list_tuning(cache)) {
    if (t.problem_key.find(needle) == std::string::npos) continue;
    ++n;
    if (args.has("json")) {
      rows.push_back(JsonObject().str("family", t.family).str("key", t.problem_key).str("device", t.device_fingerprint)
                         .str("winner", t.winner_config).num("tuned_at", t.tuned_at)
                         .raw("detail", t.candidates_json.empty() ? "null" : t.candidates_json).dump());
      continue;
    }
    fmt::print("{} {}\n  device {}  ktune {}  winner {}\n  candidates: {}\n", t.family, t.problem_key,
               t.device_fingerprint, t.ktune_version, t.winner_config, t.candidates_json);
  }
  if (args.has("json")) fmt::print("{}\n", JsonObject().num("count", n).raw("tuning", json_array(rows)).dump());
  else if (n == 0) fmt::print("no tuning row matches '{}'\n", needle);
  return n ? 0 : 1;
}

}  // namespace

int cmd_cache(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] == "--help") {
    fmt::print("{}", kHelp);
    return argv.empty() ? 2 : 0;
  }
  std::string sub = argv[0];
  std::vector<std::string> rest(argv.begin() + 1, argv.end());
  for (const auto& a : rest)
    if (a == "--help") {
      fmt::print("{}", kHelp);
      return 0;
    }
  if (sub == "check") return cmd_cache_check(rest);
  // Each subcommand takes only the options it reads: one it would ignore (`export --family`) is an error, not a
  // filter silently skipped. `show KEY` is the one subcommand with a positional argument.
  struct Options {
    std::vector<std::string> valued, flags;
  };
  static const std::map<std::string, Options> kOptions = {
      {"ls", {{"cache", "family"}, {"json"}}},
      {"show", {{"cache"}, {"json"}}},
      {"stats", {{"cache"}, {"json"}}},
      {"verify", {{"cache", "pubkey"}, {"json", "load"}}},
      {"keygen", {{"out"}, {"json"}}},
      {"sign", {{"cache", "key"}, {"json"}}},
      {"prune", {{"cache", "family"}, {"json", "stale-compiler", "stale-ktune"}}},
      {"export", {{"cache", "out"}, {"json"}}},
      {"merge", {{"cache", "from", "pubkey"}, {"json"}}},
  };
  const auto options = kOptions.find(sub);
  if (options == kOptions.end())
    throw UsageError("unknown cache subcommand '" + sub +
                     "' (ls, show, stats, check, verify, prune, export, merge, keygen, sign)");
  Args args(rest, options->second.valued, options->second.flags, sub == "show" ? 1 : 0);
  std::string cache = args.get("cache", default_cache_path());
  if (sub == "ls") return ls(args, cache);
  if (sub == "show") return show(args, cache);
  if (sub == "stats") return stats(args, cache);
  if (sub == "verify") return verify(args, cache);
  if (sub == "keygen") return keygen(args);
  if (sub == "sign") return sign(args, cache);
  if (sub == "prune") {
    int n = cache_prune(cache, args.has("stale-compiler"), args.has("stale-ktune"), args.get("family"));
    if (args.has("json")) fmt::print("{}\n", JsonObject().num("removed", n).dump());
    else fmt::print("removed {} entries\n", n);
    return 0;
  }
  if (sub == "export") {
    if (!args.has("out")) throw UsageError("export needs --out FILE");
    auto m = cache_export(cache, args.get("out"));
    if (args.has("json")) fmt::print("{}\n", merge_json(m));
    else fmt::print("exported {} binaries and {} tuning rows to {} ({} damaged skipped)\n", m.binaries_added,
                    m.tuning_added, args.get("out"), m.damaged_skipped);
    return 0;
  }
  if (sub == "merge") {
    if (!args.has("from")) throw UsageError("merge needs --from FILE");
    std::optional<std::string> pubkeys;
    if (args.has("pubkey")) pubkeys = args.get("pubkey");
    auto m = cache_merge(cache, args.get("from"), pubkeys);
    if (args.has("json")) fmt::print("{}\n", merge_json(m));
    else fmt::print("merged: {} binaries added, {} already present, {} tuning rows, {} damaged skipped\n",
                    m.binaries_added, m.binaries_skipped, m.tuning_added + m.tuning_updated, m.damaged_skipped);
    return 0;
  }
  throw UsageError("cache " + sub + ": not handled");  // kOptions lists only handled subcommands
}

}  // namespace ktune::cli
