// Fuzz target: the cache entry loader. The input is written as a database file and opened the ways the
// runtime and the CLI open one (read-only immutable, then LayeredCache), then listed, looked up, verified and
// signature-checked. Properties: only CacheError escapes; a hit's blob always hashes to its blob_sha256 and
// has its recorded size (the store never hands out a damaged blob); nothing crashes or leaks.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ktune/cache/layered.hpp"
#include "ktune/cache/sha256.hpp"
#include "ktune/cache/signing.hpp"
#include "ktune/cache/store.hpp"

namespace {

const std::string& scratch_path() {
  static const std::string p = "/tmp/ktune-fuzz-cache-" + std::to_string(::getpid()) + ".db";
  return p;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n <= 0) std::abort();
    data += n;
    size -= static_cast<size_t>(n);
  }
  ::close(fd);
}

void check_hit(const ktune::cache::BinaryLookup& l) {
  if (l.status != ktune::cache::LookupStatus::hit) {
    if (!l.record.blob.empty()) std::abort();  // a damaged lookup never carries a blob
    return;
  }
  if (ktune::cache::sha256_hex(l.record.blob.data(), l.record.blob.size()) != l.record.blob_sha256) std::abort();
}

const std::vector<ktune::cache::PublicKey>& keys() {
  static const std::vector<ktune::cache::PublicKey> k = [] {
    ktune::cache::PublicKey p;
    for (size_t i = 0; i < p.bytes.size(); ++i) p.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
    return std::vector<ktune::cache::PublicKey>{p};
  }();
  return k;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = scratch_path();
  write_file(path, data, size);
  using namespace ktune::cache;
  try {
    OpenOptions o;
    o.read_only = true;
    o.immutable = true;
    auto db = CacheDb::open(path, o);
    for (const auto& info : db->list_binaries()) {
      check_hit(db->get_binary(info.digest));
      BinaryExpectation e;
      e.arch = info.arch;
      check_hit(db->get_binary(info.digest, e));
      check_hit(db->find_binary_any_compiler_version(info.source_digest, info.arch, info.compiler, info.options,
                                                     info.ktune_version));
    }
    for (const auto& t : db->list_tuning()) db->get_tuning(t.family, t.problem_key, t.device_fingerprint);
    db->verify();
    db->counts();
    db->signatures();
    SignatureCheck c = db->check_signature(keys(), true);
    if (c.ok() && !c.rows) std::abort();
  } catch (const CacheError&) {
  }
  try {
    LayeredOptions lo;
    lo.force_read_only = true;
    lo.trusted_keys = keys();
    LayeredCache layered(path + "?ro", lo);  // never throws for a bad layer: it is skipped with a note
    check_hit(layered.get_binary("0000"));
  } catch (const CacheError&) {
  }
  return 0;
}
