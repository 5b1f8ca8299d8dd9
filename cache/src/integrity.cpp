// Row digests (schema v2): each row's own checksum over all of its columns, checked on every read, so a byte
// changed in a metadata column (entry_points, arch, compiler_version, options, a tuning winner) is detected
// exactly like a byte changed in a blob.
#include <fmt/format.h>

#include "ktune/cache/sha256.hpp"
#include "store_impl.hpp"

namespace ktune::cache::detail {
namespace {

class RowHasher {
 public:
  explicit RowHasher(std::string_view tag) { field(tag); }
  RowHasher& field(std::string_view v) {
    const std::string len = fmt::format("{}:", v.size());
    h_.update(len);
    h_.update(v);
    return *this;
  }
  RowHasher& field(int64_t v) { return field(fmt::format("{}", v)); }
  // Shortest text that reads back as the same double (SQLite REAL columns keep all 64 bits).
  RowHasher& field(double v) { return field(fmt::format("{}", v)); }
  std::string hex() const { return h_.hex_digest(); }

 private:
  Sha256 h_;
};

}  // namespace

std::string binary_columns_with_row_digest(int schema_version) {
  return fmt::format("{}, {}", kBinaryColumns, schema_version >= 2 ? "row_digest" : "''");
}

std::string binary_row_digest(const BinaryRecord& r, const std::string& blob_sha256, int64_t blob_size) {
  return RowHasher("ktune-binary-row-v2")
      .field(r.digest)
      .field(r.family)
      .field(r.name)
      .field(r.arch)
      .field(r.compiler)
      .field(r.compiler_version)
      .field(r.options)
      .field(r.source_digest)
      .field(r.ktune_version)
      .field(static_cast<int64_t>(r.schema_version))
      .field(r.entry_points)
      .field(blob_sha256)
      .field(r.compile_ms)
      .field(r.created_at)
      .field(blob_size)
      .hex();
}

std::string tuning_row_digest(const TuningRecord& r) {
  return RowHasher("ktune-tuning-row-v2")
      .field(r.family)
      .field(r.problem_key)
      .field(r.device_fingerprint)
      .field(r.ktune_version)
      .field(r.winner_config)
      .field(r.candidates_json)
      .field(r.tuned_at)
      .hex();
}

namespace {

std::string check_allowed(const CacheDb::Impl& db, const std::string& row_digest) {
  if (db.allowed_rows && !db.allowed_rows->count(row_digest))
    return "the row is not covered by the file's trusted signature (added or changed after signing)";
  return {};
}

}  // namespace

std::string check_binary_row(const CacheDb::Impl& db, const BinaryRecord& r, int64_t blob_size) {
  if (db.schema_version < 2) return {};
  if (r.row_digest.empty()) return "the row has no row digest (written behind ktune's back)";
  const std::string actual = binary_row_digest(r, r.blob_sha256, blob_size);
  if (actual != r.row_digest)
    return fmt::format("metadata columns hash to row digest {} but {} was written (a column was changed or damaged)",
                       actual, r.row_digest);
  return check_allowed(db, r.row_digest);
}

std::string check_tuning_row(const CacheDb::Impl& db, const TuningRecord& r) {
  if (db.schema_version < 2) return {};
  if (r.row_digest.empty()) return "the tuning row has no row digest (written behind ktune's back)";
  const std::string actual = tuning_row_digest(r);
  if (actual != r.row_digest)
    return fmt::format("tuning columns hash to row digest {} but {} was written (a column was changed or damaged)",
                       actual, r.row_digest);
  return check_allowed(db, r.row_digest);
}

std::string check_expectation(const BinaryRecord& r, const BinaryExpectation& e) {
  const auto differs = [](const std::string& want, const std::string& got) { return !want.empty() && want != got; };
  const auto say = [](const char* column, const std::string& got, const std::string& want) {
    return fmt::format("column {} is '{}' but '{}' was asked for under this digest", column, got, want);
  };
  if (differs(e.family, r.family)) return say("family", r.family, e.family);
  if (differs(e.arch, r.arch)) return say("arch", r.arch, e.arch);
  if (differs(e.compiler, r.compiler)) return say("compiler", r.compiler, e.compiler);
  if (differs(e.compiler_version, r.compiler_version)) return say("compiler_version", r.compiler_version, e.compiler_version);
  if (differs(e.options, r.options)) return say("options", r.options, e.options);
  if (differs(e.source_digest, r.source_digest)) return say("source_digest", r.source_digest, e.source_digest);
  if (differs(e.ktune_version, r.ktune_version)) return say("ktune_version", r.ktune_version, e.ktune_version);
  if (e.schema_version != 0 && e.schema_version != r.schema_version)
    return say("schema_version", std::to_string(r.schema_version), std::to_string(e.schema_version));
  return {};
}

}  // namespace ktune::cache::detail
