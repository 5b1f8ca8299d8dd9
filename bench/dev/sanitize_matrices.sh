#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck and synccheck over the GPU matrices of the families a kernel change
# touched, side by side on the one GPU (memcheck, racecheck and, with SYNC_SHARDS, synccheck sharded with
# KTUNE_TEST_SHARD), with the pack of bench/run_h200.sh. H200:
#   OUT=... LIMIT=SECONDS [RACE_SHARDS=4] [SYNC_SHARDS=1] [RACE_APART="case;case"] bash bench/dev/sanitize_matrices.sh xqa sparse_mla
# Writes one log per process, <tool>-<tag>[-shard].txt, into $OUT/sanitizer-logs.tgz, and prints each process's summary
# line and exit status (0 = clean) and the distinct racecheck report sites (kernel + offsets). Racecheck is
# the slowest: over xqa and sparse_mla (14 processes on one GPU) it needed more than 320 s on an H100; give LIMIT 500.
# RACE_APART names test cases (exact names, ';' between them) that racecheck runs each in a process of its own and
# leaves out of its shards: a case that is not sharded otherwise runs in every shard (at sparse MLA: "sparse_mla_decode
# reads q through token and head strides" and "sparse_mla_decode with a null lse writes the same out, bit for bit").
# A comma in a name is escaped here (Catch2 reads an unescaped one as "or" between two names).
set -uo pipefail
: "${OUT:?set OUT to a folder for the logs}"
PACK=${PACK:-h200pack}
P=$PWD/$PACK
LIMIT=${LIMIT:-400}
for z in "$P"/*.db.gz; do [[ -e ${z%.gz} ]] || gunzip -k "$z"; done
# A writable copy of the pack's cache, JIT allowed: the tests beside the matrices compile the few kernels the pack
# does not hold (with KTUNE_JIT=0 they fail on the miss, which is not what is being checked).
DB=/tmp/ktune-sanitize-matrices.db
rm -f "$DB" "$DB-wal" "$DB-shm" && cp "$P/all.db" "$DB"
export LD_LIBRARY_PATH=$P/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64 KTUNE_CACHE=$DB
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), pack $(cat "$P/commit.txt" 2>/dev/null || echo ?)"
declare -A pids
run() {  # run NAME TOOL SHARD SPEC
  KTUNE_TEST_SHARD=$3 timeout --signal=INT --kill-after=5 "$LIMIT" "$CS" --tool "$2" --error-exitcode 9 \
    "$P/bin/ktune_tests" "$4" >"$OUT/$1.txt" 2>&1 &
  pids[$1]=$!
}
IFS=';' read -r -a apart <<< "${RACE_APART:-}"
for i in "${!apart[@]}"; do apart[$i]=${apart[$i]//,/\\,}; done
for tag in "$@"; do
  for s in 0 1; do run "memcheck-$tag-$s" memcheck "$s/2" "[gpu][$tag]"; done
  for ((s = 0; s < ${SYNC_SHARDS:-1}; ++s)); do run "synccheck-$tag-$s" synccheck "$s/${SYNC_SHARDS:-1}" "[gpu][$tag]"; done
  spec="[gpu][$tag]"
  for c in "${apart[@]}"; do spec+="~\"$c\""; done
  for ((s = 0; s < ${RACE_SHARDS:-4}; ++s)); do run "racecheck-$tag-$s" racecheck "$s/${RACE_SHARDS:-4}" "$spec"; done
done
for i in "${!apart[@]}"; do run "racecheck-apart-$i" racecheck 0/1 "${apart[$i]}"; done
for k in $(printf '%s\n' "${!pids[@]}" | sort); do
  wait "${pids[$k]}"
  echo "| $k | exit $? | $(grep -hE "RACECHECK SUMMARY|ERROR SUMMARY|^test cases|MATRIX" "$OUT/$k.txt" | tr '\n' ' ') |"
done
# Each racecheck report names its kernel and the offsets of the two accesses; the distinct pairs, with the number
# of reports, say which code to look at (the kernel's name alone may cover several forms: read the offsets in the
# CUBIN, e.g. `cuobjdump -sass`).
if compgen -G "$OUT/racecheck-*.txt" >/dev/null; then
  sites=$(awk '/Race reported between/ { sub(/.*between /, ""); first = $0; next }
       first != "" && /^=+ +and / { sub(/^=+ +and /, ""); sub(/ \[[0-9]+ hazards\]/, ""); print first " | " $0; next }
       { first = "" }' "$OUT"/racecheck-*.txt | sed -E 's/void //g; s/\(ktune_[a-z]+::Params\)//g' | sort | uniq -c | sort -rn)
  echo "racecheck reports by site (reports, first access | second access): ${sites:-none}" | head -21
fi
# The device tool brings back at most 8 files from $OUT: one archive holds every log.
names=()
for k in "${!pids[@]}"; do names+=("$k.txt"); done
tar czf "$OUT/sanitizer-logs.tgz" -C "$OUT" "${names[@]}" && (cd "$OUT" && rm -f "${names[@]}")
