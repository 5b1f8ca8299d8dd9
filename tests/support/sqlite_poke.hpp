// Direct edits of a cache file, bypassing ktune, to simulate damage.
#pragma once

#include <sqlite3.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace ktune::test {

// Flips one bit of the stored blob of every row whose name contains `name_part` (or of all rows). Returns
// the number of rows changed.
inline int flip_blob_byte(const std::string& db_path, const std::string& name_part = "", size_t offset = 100) {
  sqlite3* db = nullptr;
  if (sqlite3_open(db_path.c_str(), &db) != SQLITE_OK) throw std::runtime_error("open " + db_path);
  sqlite3_busy_timeout(db, 10000);
  std::vector<std::pair<std::string, std::vector<unsigned char>>> rows;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT digest, blob FROM binaries WHERE instr(name, ?1) > 0", -1, &st, nullptr);
  sqlite3_bind_text(st, 1, name_part.c_str(), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(st) == SQLITE_ROW) {
    auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(st, 1));
    int n = sqlite3_column_bytes(st, 1);
    rows.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), std::vector<unsigned char>(p, p + n));
  }
  sqlite3_finalize(st);
  for (auto& [digest, blob] : rows) {
    blob[offset % blob.size()] ^= 0x01;
    sqlite3_prepare_v2(db, "UPDATE binaries SET blob = ?1 WHERE digest = ?2", -1, &st, nullptr);
    sqlite3_bind_blob(st, 1, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, digest.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_step(st);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return static_cast<int>(rows.size());
}

}  // namespace ktune::test
