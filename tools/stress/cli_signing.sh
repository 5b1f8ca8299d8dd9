#!/usr/bin/env bash
# The signed-cache workflow through the ktune CLI, as an image build and a deployment would run it:
# compile -> export -> keygen -> sign -> verify --pubkey; then tamper and check that verify fails.
#   tools/stress/cli_signing.sh build/bin/ktune
set -euo pipefail
ktune="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
problem="d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none"

if ! "$ktune" compile --family xqa_decode --arch sm_90a --problem "$problem" --cache "$tmp/work.db" >/dev/null; then
  echo "SKIPPED: ktune compile failed (no NVRTC here?)"
  exit 77
fi
"$ktune" cache export --cache "$tmp/work.db" --out "$tmp/image.db" >/dev/null
"$ktune" cache keygen --out "$tmp/ship.key" >/dev/null
[[ "$(stat -c %a "$tmp/ship.key")" == 600 ]] || { echo "secret key is not mode 0600"; exit 1; }

if "$ktune" cache verify --cache "$tmp/image.db" --pubkey "$tmp/ship.key.pub" >/dev/null; then
  echo "an unsigned file verified against a public key"; exit 1
fi
"$ktune" cache sign --cache "$tmp/image.db" --key "$tmp/ship.key"
"$ktune" cache verify --cache "$tmp/image.db" --pubkey "$tmp/ship.key.pub"
"$ktune" cache verify --cache "$tmp/image.db" --pubkey "$tmp/ship.key.pub" --json | grep -q '"signed": true'

# Another key's signature is not trusted.
"$ktune" cache keygen --out "$tmp/other.key" >/dev/null
if "$ktune" cache verify --cache "$tmp/image.db" --pubkey "$tmp/other.key.pub" >/dev/null; then
  echo "verified against a key that never signed it"; exit 1
fi

# A path with no cache behind it (a typo, a dangling link) checked nothing: not "signed".
ln -s "$tmp/gone.db" "$tmp/dangling.db"
for missing in "$tmp/typo.db" "$tmp/dangling.db"; do
  if "$ktune" cache verify --cache "$missing" --pubkey "$tmp/ship.key.pub" >/dev/null 2>&1; then
    echo "verified a cache that does not exist: $missing"; exit 1
  fi
  out="$("$ktune" cache verify --cache "$missing" --pubkey "$tmp/ship.key.pub" --json || true)"
  grep -q '"signed": false' <<<"$out"
done

# A row changed behind ktune's back: refused.
cp "$tmp/image.db" "$tmp/tampered.db"
if command -v sqlite3 >/dev/null; then
  sqlite3 "$tmp/tampered.db" "UPDATE binaries SET entry_points = 'evil'"
  if "$ktune" cache verify --cache "$tmp/tampered.db" --pubkey "$tmp/ship.key.pub" >/dev/null; then
    echo "a tampered file verified"; exit 1
  fi
fi
# An export under KTUNE_TRUSTED_KEYS takes only layers a trusted key signed: the signed image is exported (and
# the copy verifies once signed again), a tampered or unsigned layer is refused and nothing is written.
KTUNE_TRUSTED_KEYS="$tmp/ship.key.pub" "$ktune" cache export --cache "$tmp/image.db" --out "$tmp/reexport.db" >/dev/null
[[ -f "$tmp/reexport.db" ]] || { echo "a trusted export wrote nothing"; exit 1; }
for src in "$tmp/work.db" "$tmp/tampered.db"; do
  [[ $src != "$tmp/tampered.db" ]] || command -v sqlite3 >/dev/null || continue  # tampered only with sqlite3
  if KTUNE_TRUSTED_KEYS="$tmp/ship.key.pub" "$ktune" cache export --cache "$src?ro" --out "$tmp/laundered.db" >/dev/null 2>&1; then
    echo "export under KTUNE_TRUSTED_KEYS took $src"; exit 1
  fi
  [[ ! -e "$tmp/laundered.db" ]] || { echo "a refused export left $tmp/laundered.db"; exit 1; }
done
# A row whose blob is another kernel's, every digest recomputed (verify calls it DAMAGED: its blob does not define
# the symbols the row names): export leaves it out and counts it, sign and merge --from refuse the file.
cp "$tmp/work.db" "$tmp/misfiled.db"
python3 - "$tmp/misfiled.db" <<'PY'
import hashlib, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
cols = ("digest, family, name, arch, compiler, compiler_version, options, source_digest, ktune_version, "
        "schema_version, entry_points, blob_sha256, compile_ms, created_at, blob_size")
def text(v):
    if isinstance(v, float) and v == int(v):
        return str(int(v))
    return str(v)
def row_digest(values):  # docs/cache_format.md: sha256 over length-prefixed fields after a version tag
    h = hashlib.sha256()
    for f in ["ktune-binary-row-v2"] + [text(v) for v in values]:
        b = f.encode()
        h.update(f"{len(b)}:".encode() + b)
    return h.hexdigest()
a, b = db.execute(f"SELECT {cols}, row_digest, blob FROM binaries ORDER BY digest LIMIT 2").fetchall()
assert row_digest(a[:15]) == a[15], "row digest formula"
blob = b[16]
values = list(a[:15])
values[11], values[14] = hashlib.sha256(blob).hexdigest(), len(blob)
db.execute("UPDATE binaries SET blob = ?, blob_sha256 = ?, blob_size = ?, row_digest = ? WHERE digest = ?",
           (blob, values[11], len(blob), row_digest(values), a[0]))
db.commit()
PY
if "$ktune" cache verify --cache "$tmp/misfiled.db" >/dev/null; then echo "verify passed a misfiled blob"; exit 1; fi
out="$("$ktune" cache export --cache "$tmp/misfiled.db" --out "$tmp/misfiled-export.db")"
grep -q "(1 damaged skipped)" <<<"$out" || { echo "export kept or did not count the misfiled row: $out"; exit 1; }
"$ktune" cache verify --cache "$tmp/misfiled-export.db" >/dev/null
if "$ktune" cache sign --cache "$tmp/misfiled.db" --key "$tmp/ship.key" >/dev/null 2>&1; then
  echo "signed a file with a misfiled blob"; exit 1
fi
if "$ktune" cache merge --cache "$tmp/from-misfiled.db" --from "$tmp/misfiled.db" >/dev/null 2>&1; then
  echo "merged a file with a misfiled blob"; exit 1
fi
# Under KTUNE_TRUSTED_KEYS the layer summaries say which layers a trusting runtime does not serve, and `cache
# check` counts only the rows it would use: none of an unsigned layer's.
out="$(KTUNE_TRUSTED_KEYS="$tmp/other.key.pub" "$ktune" cache stats --cache "$tmp/image.db?ro")"
grep -q "not served under KTUNE_TRUSTED_KEYS: refused" <<<"$out" || { echo "stats hid a refused layer: $out"; exit 1; }
if "$ktune" warmup --preset llama-3.1-8b --arch host --max-batch 1 --max-seq-len 128 --cache "$tmp/user.db" >/dev/null 2>&1; then
  check() { KTUNE_CACHE="$tmp/image.db?ro:$tmp/user.db" "$ktune" cache check --preset llama-3.1-8b --arch host \
              --max-batch 1 --max-seq-len 128 || true; }
  check | grep -q "tuned t" || { echo "check without trust missed user.db's tuning row"; exit 1; }
  out="$(KTUNE_TRUSTED_KEYS="$tmp/ship.key.pub" check)"
  grep -q "no tuning row" <<<"$out" || { echo "check under KTUNE_TRUSTED_KEYS counted an unsigned row: $out"; exit 1; }
fi
# ktune itself never writes into a signed file (a write would void the signature): a merge into it is refused.
"$ktune" compile --family xqa_decode --arch sm_80 --problem "$problem" --cache "$tmp/more.db" >/dev/null
if "$ktune" cache merge --cache "$tmp/image.db" --from "$tmp/more.db" >/dev/null 2>&1; then
  echo "merged into a signed file"; exit 1
fi
"$ktune" cache verify --cache "$tmp/image.db" --pubkey "$tmp/ship.key.pub" >/dev/null
# merge --pubkey imports a validly signed source and refuses an unsigned or tampered one.
"$ktune" cache merge --cache "$tmp/from-signed.db" --from "$tmp/image.db" --pubkey "$tmp/ship.key.pub" >/dev/null
for src in "$tmp/more.db" "$tmp/tampered.db"; do
  [[ -f "$src" ]] || continue
  if "$ktune" cache merge --cache "$tmp/from-bad.db" --from "$src" --pubkey "$tmp/ship.key.pub" >/dev/null 2>&1; then
    echo "merge --pubkey imported $src"; exit 1
  fi
  [[ ! -e "$tmp/from-bad.db" ]] || { echo "a refused merge --pubkey created its destination"; exit 1; }
done
# An export of a path with a missing layer creates nothing, not even the destination's folders.
if "$ktune" cache export --cache "$tmp/typo.db" --out "$tmp/newdir/sub/out.db" >/dev/null 2>&1; then
  echo "exported a path with a missing layer"; exit 1
fi
[[ ! -e "$tmp/newdir" ]] || { echo "a refused export created $tmp/newdir"; exit 1; }
echo "cli signing workflow: ok"
