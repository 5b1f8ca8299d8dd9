// Signed caches: keys, sign/check, and a LayeredCache that requires a trusted signature on read-only layers.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "hardening_util.hpp"
#include "ktune/cache/layered.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/cache/sha256.hpp"
#include "ktune/cache/signing.hpp"

using namespace ktune;
using namespace ktune::cache;
using namespace ktune::hardening;

namespace {

// A writable open of a signed file, as a hostile writer using ktune's own code would make it.
std::unique_ptr<CacheDb> open_signed_for_writing(const std::string& path) {
  OpenOptions o;
  o.allow_signed = true;
  return CacheDb::open(path, o);
}

SignatureCheck check(const std::string& path, const std::vector<PublicKey>& keys, bool hash_blobs = true) {
  OpenOptions o;
  o.read_only = true;
  return CacheDb::open(path, o)->check_signature(keys, hash_blobs);
}

}  // namespace

TEST_CASE("hardening: key files are private, never overwritten, and checked when read", "[hardening][signing]") {
  TempDir dir;
  Keys k = make_keys(dir, "k");
  struct stat st {};
  REQUIRE(::stat(k.secret.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK_THROWS_WITH(write_key_files(generate_secret_key(), k.secret, dir.file("other.pub")),
                    Catch::Contains("refusing to overwrite"));
  SecretKey s = read_secret_key(k.secret);
  PublicKey p = read_public_key(k.pub);
  CHECK(s.public_key().hex() == p.hex());
  CHECK(p.id().size() == 16);

  // A public key where a secret key is expected, a damaged secret key, garbage, a missing file.
  CHECK_THROWS_WITH(read_secret_key(k.pub), Catch::Contains("not a ktune secret key file"));
  std::string text;
  std::getline(std::ifstream(k.secret), text);
  text[40] = text[40] == 'a' ? 'b' : 'a';
  std::ofstream(dir.file("bad")) << text << "\n";
  REQUIRE(::chmod(dir.file("bad").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_secret_key(dir.file("bad")), Catch::Contains("damaged"));
  // An intact secret key that group or others may read is no secret: refused, naming the mode.
  std::getline(std::ifstream(k.secret), text);
  std::ofstream(dir.file("loose")) << text << "\n";
  REQUIRE(::chmod(dir.file("loose").c_str(), 0644) == 0);
  CHECK_THROWS_WITH(read_secret_key(dir.file("loose")), Catch::Contains("mode 644") && Catch::Contains("chmod 600"));
  REQUIRE(::chmod(dir.file("loose").c_str(), 0600) == 0);
  CHECK(read_secret_key(dir.file("loose")).public_key().hex() == p.hex());
  // keygen onto a free secret path but an existing public one writes nothing: no secret key beside a stranger's
  // public key.
  CHECK_THROWS_WITH(write_key_files(generate_secret_key(), dir.file("new.key"), k.pub),
                    Catch::Contains("refusing to overwrite"));
  CHECK(::stat(dir.file("new.key").c_str(), &st) != 0);
  std::ofstream(dir.file("junk.pub")) << "ktune-ed25519-public-key 12zz\n";
  CHECK_THROWS_WITH(read_public_key(dir.file("junk.pub")), Catch::Contains("64 hex digits"));
  CHECK_THROWS_WITH(read_public_key(dir.file("missing.pub")), Catch::Contains("missing.pub"));
  CHECK(read_public_keys(k.pub + ":" + k.pub + ",").size() == 2);
}

TEST_CASE("hardening: a signed file checks valid, keeps its journal mode, and names its signer",
          "[hardening][signing]") {
  TempDir dir;
  Keys k = make_keys(dir, "k"), other = make_keys(dir, "other");
  const std::string image = signed_image(dir, "image.db", &k);
  // Still a rollback-journal file, ready for a read-only filesystem.
  CHECK(raw_text(image, "PRAGMA journal_mode") == "delete");
  SignatureCheck c = check(image, {read_public_key(k.pub)});
  CHECK(c.ok());
  CHECK(c.key_id == read_public_key(k.pub).id());
  CHECK(c.binaries == 6);
  CHECK(c.tuning == 2);
  REQUIRE(c.rows);
  CHECK(c.rows->size() == 8);
  CHECK(check(image, {read_public_key(other.pub), read_public_key(k.pub)}).ok());  // any trusted key

  SignatureCheck untrusted = check(image, {read_public_key(other.pub)});
  CHECK(untrusted.result == SignatureCheck::Result::untrusted);
  CHECK_THAT(untrusted.detail, Catch::Contains(read_public_key(k.pub).id()) && Catch::Contains("none of them trusted"));

  const std::string plain = signed_image(dir, "plain.db", nullptr);
  SignatureCheck unsigned_ = check(plain, {read_public_key(k.pub)});
  CHECK(unsigned_.result == SignatureCheck::Result::unsigned_);
  CHECK_THAT(unsigned_.detail, Catch::Contains("no signature") && Catch::Contains("ktune cache sign"));
}

TEST_CASE("hardening: every kind of tampering with a signed file is refused", "[hardening][signing]") {
  TempDir dir;
  Keys k = make_keys(dir, "k");
  const std::vector<PublicKey> trusted{read_public_key(k.pub)};
  struct Tamper {
    const char* what;
    std::function<void(const std::string&)> apply;
    SignatureCheck::Result expected;
  } cases[] = {
      {"a metadata column changed",
       [](const std::string& p) {
         raw_exec(p, "UPDATE binaries SET entry_points = 'evil' WHERE digest = '" + sample_record(1).digest + "'");
       },
       SignatureCheck::Result::damaged},
      {"a metadata column changed and the row digest recomputed",
       [](const std::string& p) {
         raw_exec(p, "UPDATE binaries SET entry_points = 'evil' WHERE digest = '" + sample_record(1).digest + "'");
         reseal_binary_row(p, sample_record(1).digest);
       },
       SignatureCheck::Result::invalid},
      {"a blob replaced with its sha256 and row digest recomputed",
       [](const std::string& p) {
         std::vector<uint8_t> evil(sample_record(2).blob.size(), 0xcc);
         raw_exec(p, "UPDATE binaries SET blob = ?1 WHERE digest = '" + sample_record(2).digest + "'", &evil);
         raw_exec(p, "UPDATE binaries SET blob_sha256 = '" + sha256_hex(evil.data(), evil.size()) +
                         "' WHERE digest = '" + sample_record(2).digest + "'");
         reseal_binary_row(p, sample_record(2).digest);
       },
       SignatureCheck::Result::invalid},
      {"a blob byte flipped",
       [](const std::string& p) {
         std::vector<uint8_t> bad = sample_record(3).blob;
         bad[5] ^= 1;
         raw_exec(p, "UPDATE binaries SET blob = ?1 WHERE digest = '" + sample_record(3).digest + "'", &bad);
       },
       SignatureCheck::Result::damaged},
      {"a row added",
       [](const std::string& p) {
         open_signed_for_writing(p)->put_binary(sample_record(40));
       },
       SignatureCheck::Result::invalid},
      {"a row removed",
       [](const std::string& p) { raw_exec(p, "DELETE FROM binaries WHERE digest = '" + sample_record(0).digest + "'"); },
       SignatureCheck::Result::invalid},
      {"a tuning winner changed through ktune",
       [](const std::string& p) {
         TuningRecord t = sample_tuning(1);
         t.winner_config = "t16.s2.w1";
         open_signed_for_writing(p)->put_tuning(t);
       },
       SignatureCheck::Result::invalid},
      {"the signature bytes flipped",
       [](const std::string& p) {
         raw_exec(p, "UPDATE signatures SET signature = (CASE substr(signature, 1, 1) WHEN 'a' THEN 'b' ELSE 'a' "
                     "END) || substr(signature, 2)");
       },
       SignatureCheck::Result::invalid},
      {"the signature replaced by one from another file",
       [&dir, &k](const std::string& p) {
         const std::string donor = dir.file("donor.db");
         {
           auto db = CacheDb::open(donor, {});
           db->put_binary(sample_record(50));
           db->sign(read_secret_key(k.secret));
         }
         const std::string sig = raw_text(donor, "SELECT signature FROM signatures");
         const std::string man = raw_text(donor, "SELECT manifest_sha256 FROM signatures");
         raw_exec(p, "UPDATE signatures SET signature = '" + sig + "', manifest_sha256 = '" + man + "'");
       },
       SignatureCheck::Result::invalid},
      {"the signatures table emptied",
       [](const std::string& p) { raw_exec(p, "DELETE FROM signatures"); }, SignatureCheck::Result::unsigned_},
  };
  int n = 0;
  for (const Tamper& t : cases) {
    ++n;
    DYNAMIC_SECTION(t.what) {
      const std::string image = signed_image(dir, "image" + std::to_string(n) + ".db", &k);
      REQUIRE(check(image, trusted).ok());
      t.apply(image);
      SignatureCheck c = check(image, trusted);
      INFO(c.detail);
      CHECK(c.result == t.expected);
      CHECK_FALSE(c.ok());
      CHECK_FALSE(c.rows);
      // The runtime's layer check (no blob hashing) refuses it too, and says why.
      LayeredOptions lo;
      lo.trusted_keys = trusted;
      LayeredCache layered(image + "?ro:" + dir.file("user.db"), lo);
      auto refused = layered.refused();
      bool blob_only = t.expected == SignatureCheck::Result::damaged && std::string(t.what) == "a blob byte flipped";
      if (blob_only) {
        // A flipped blob byte leaves the manifest intact; the row is refused at read time instead.
        CHECK(refused.empty());
        CHECK(layered.get_binary(sample_record(3).digest).status == LookupStatus::damaged);
      } else {
        REQUIRE(refused.size() == 1);
        CHECK_THAT(refused[0], Catch::Contains("refused") && Catch::Contains("KTUNE_TRUSTED_KEYS"));
        CHECK(layered.get_binary(sample_record(4).digest).status == LookupStatus::miss);
      }
    }
  }
}

TEST_CASE("hardening: trusted keys gate read-only layers, the writable layer and signed files",
          "[hardening][signing]") {
  TempDir dir;
  Keys k = make_keys(dir, "k");
  const std::string image = signed_image(dir, "image.db", &k), plain = signed_image(dir, "plain.db", nullptr);
  LayeredOptions lo;
  lo.trusted_keys = {read_public_key(k.pub)};
  const std::string user = dir.file("user.db");
  {
    LayeredCache layered(image + "?ro:" + plain + "?ro:" + user, lo);
    auto layers = layered.layers();
    REQUIRE(layers.size() == 3);
    CHECK(layers[0].open);
    CHECK_THAT(layers[0].signature, Catch::Contains("signed by trusted key"));
    CHECK_FALSE(layers[1].open);
    CHECK(layers[1].refused);
    CHECK_THAT(layers[1].note, Catch::Contains("unsigned"));
    CHECK(layers[2].writable);  // this process's own cache needs no signature
    CHECK(layered.get_binary(sample_record(1).digest).status == LookupStatus::hit);
    CHECK(layered.get_tuning("xqa_decode", sample_tuning(1).problem_key, sample_tuning(1).device_fingerprint));
    CHECK(layered.put_binary(sample_record(30)));
  }
  // Without trusted keys nothing is required (compatibility), but a signed file is never the writable layer,
  // and is not touched at all (not even switched to WAL).
  {
    const auto before = read_bytes(image);
    LayeredCache layered(image + ":" + user, false);
    CHECK(read_bytes(image) == before);
    auto layers = layered.layers();
    CHECK_FALSE(layers[0].writable);
    CHECK_THAT(layers[0].note, Catch::Contains("signed"));
    CHECK(layers[1].writable);
  }
  // A row slipped into a verified layer after it was opened (a live file) is not served.
  {
    const std::string live = dir.file("live.db");
    std::filesystem::copy_file(image, live);
    LayeredCache layered(live + "?ro", lo);
    REQUIRE(layered.refused().empty());
    open_signed_for_writing(live)->put_binary(sample_record(41));
    BinaryLookup l = layered.get_binary(sample_record(41).digest);
    CHECK(l.status == LookupStatus::damaged);
    CHECK_THAT(l.detail, Catch::Contains("not covered by the file's trusted signature"));
    CHECK(layered.get_binary(sample_record(2).digest).status == LookupStatus::hit);
  }
}

TEST_CASE("hardening: signing refuses a damaged or v1 file", "[hardening][signing]") {
  TempDir dir;
  Keys k = make_keys(dir, "k");
  const std::string path = dir.file("k.db");
  {
    auto db = CacheDb::open(path, {});
    db->put_binary(sample_record(1));
  }
  raw_exec(path, "UPDATE binaries SET options = '-G' WHERE digest = '" + sample_record(1).digest + "'");
  CHECK_THROWS_WITH(sign_file(path, read_secret_key(k.secret)), Catch::Contains("refusing to sign"));
  // An exported file (rollback journal, what ships) that is refused stays in that journal mode: byte 18 of the
  // SQLite header says 1, not 2 (WAL).
  const std::string source = dir.file("source.db"), shipped = dir.file("shipped.db");
  CacheDb::open(source, {})->put_binary(sample_record(3));
  ktune::cache_export(source, shipped);
  raw_exec(shipped, "UPDATE binaries SET options = '-G'");
  auto header_byte_18 = [&] {
    std::ifstream f(shipped, std::ios::binary);
    char h[20] = {};
    f.read(h, sizeof h);
    return int(h[18]);
  };
  REQUIRE(header_byte_18() == 1);
  CHECK_THROWS_WITH(sign_file(shipped, read_secret_key(k.secret)), Catch::Contains("refusing to sign"));
  CHECK(header_byte_18() == 1);
  const std::string v1 = dir.file("v1.db");
  auto old = detail::open_at_schema_version(v1, 1);
  old->put_binary(sample_record(2));
  CHECK_THROWS_WITH(old->sign(read_secret_key(k.secret)), Catch::Contains("cannot hold a signature"));
  CHECK(old->check_signature({read_public_key(k.pub)}, true).result == SignatureCheck::Result::unsigned_);
}
