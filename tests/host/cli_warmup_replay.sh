#!/usr/bin/env bash
# CLI check of the host backend (ctest: host_cli_warmup_replay): `ktune warmup --preset llama-3.1-8b --arch host`
# from an empty cache compiles and tunes every host key; `ktune replay --preset llama-3.1-8b --arch host` in a
# second process performs 0 compiles and 0 tunings; the same for deepseek-v3.2's sparse MLA keys (batch <= 2).
# Skips (exit 77, saying why) without the LLVM host backend; fails instead under KTUNE_TEST_REQUIRE=host.
# usage: cli_warmup_replay.sh BUILD_DIR
set -euo pipefail
build="${1:?usage: cli_warmup_replay.sh BUILD_DIR}"
ktune="$build/bin/ktune"
source "$(dirname "$0")/../support/skip.sh"
[[ -f "$build/lib/libktune_host.so" ]] || skip_or_fail host \
  "$build/lib/libktune_host.so was not built (LLVM 19 absent: llvm-19-dev libclang-cpp19-dev libclang-19-dev)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export KTUNE_CACHE="$tmp/host.db"

field() {  # field NAME JSON -> the integer value of "NAME"
  sed -n "s/.*\"$1\": *\([0-9-]*\).*/\1/p" <<<"$2" | head -n1
}

t0=$(date +%s.%N)
warm="$("$ktune" warmup --preset llama-3.1-8b --arch host --json)"
t1=$(date +%s.%N)
echo "warmup: $warm"
keys=$(field keys "$warm"); tuned=$(field tuned "$warm"); compiled=$(field compiled "$warm")
failed=$(field failed "$warm"); compile_failed=$(field compile_failed "$warm")
[[ "$failed" == 0 && "$compile_failed" == 0 ]] || { echo "FAIL: warmup reported failures"; exit 1; }
[[ "$tuned" -gt 0 && "$compiled" -gt 0 ]] || { echo "FAIL: warmup tuned $tuned keys, compiled $compiled"; exit 1; }

replay="$("$ktune" replay --preset llama-3.1-8b --arch host --json)"
t2=$(date +%s.%N)
echo "replay: $replay"
compiles=$(field compiles "$replay"); tunings=$(field tunings "$replay"); misses=$(field tuning_misses "$replay")
[[ "$compiles" == 0 ]] || { echo "FAIL: replay compiled $compiles kernels"; exit 1; }
[[ "$tunings" == 0 ]] || { echo "FAIL: replay tuned $tunings keys"; exit 1; }
[[ "$misses" == 0 ]] || { echo "FAIL: replay missed $misses tuned configs"; exit 1; }
[[ "$(field untuned_ops "$replay")" == 0 ]] || { echo "FAIL: replay ran untuned ops"; exit 1; }
ops=$(grep -o '"key"' <<<"$replay" | wc -l)
[[ "$ops" == "$tuned" ]] || { echo "FAIL: replay ran $ops ops, warmup tuned $tuned"; exit 1; }
printf 'host warmup: %s keys tuned, %s compiled in %.1f s; replay: %s ops, 0 compiles, 0 tunings in %.1f s\n' \
  "$tuned" "$compiled" "$(awk "BEGIN{print $t1 - $t0}")" "$ops" "$(awk "BEGIN{print $t2 - $t1}")"

# sparse_mla_decode: deepseek-v3.2 lists host for its 64-page op; batch 1..2 keeps it CI-sized (2 keys).
export KTUNE_CACHE="$tmp/host-mla.db"
warm="$("$ktune" warmup --preset deepseek-v3.2 --arch host --max-batch 2 --json)"
echo "warmup (deepseek-v3.2): $warm"
tuned=$(field tuned "$warm"); failed=$(field failed "$warm"); compile_failed=$(field compile_failed "$warm")
[[ "$failed" == 0 && "$compile_failed" == 0 && "$tuned" == 2 ]] || { echo "FAIL: deepseek warmup tuned $tuned (want 2)"; exit 1; }
replay="$("$ktune" replay --preset deepseek-v3.2 --arch host --max-batch 2 --json)"
echo "replay (deepseek-v3.2): $replay"
[[ "$(field compiles "$replay")" == 0 && "$(field tunings "$replay")" == 0 && "$(field tuning_misses "$replay")" == 0 ]] ||
  { echo "FAIL: deepseek replay compiled, tuned or missed"; exit 1; }
[[ "$(grep -o '"key": *"h128.r512.d64.k2048.p64.bf16-fp8ds.q1|b' <<<"$replay" | wc -l)" == 2 ]] ||
  { echo "FAIL: deepseek replay did not run the 2 sparse MLA keys"; exit 1; }
echo "host deepseek-v3.2: 2 sparse MLA keys tuned; replay 0 compiles, 0 tunings"

# A budget that runs out: exit 0 (the limit asked for), every key not started counted as skipped, and the table
# says so; the same command again resumes and tunes them.
export KTUNE_CACHE="$tmp/host-budget.db"
out="$("$ktune" warmup --preset llama-3.1-8b --arch host --max-batch 2 --max-seq-len 512 --budget 0.001s)"
grep -q "budget of 0.001s ran out: 2 keys not tuned" <<<"$out" ||
  { echo "FAIL: a budget that ran out was not reported: $out"; exit 1; }
warm="$("$ktune" warmup --preset llama-3.1-8b --arch host --max-batch 2 --max-seq-len 512 --json)"
[[ "$(field tuned "$warm")" == 2 ]] && grep -q '"budget_exhausted": false' <<<"$warm" ||
  { echo "FAIL: the warmup after the budget did not tune the 2 keys: $warm"; exit 1; }
# With workers and a budget already used up, keys tuned before are done earlier, not skipped for the budget.
warm="$("$ktune" warmup --preset llama-3.1-8b --arch host --max-batch 2 --max-seq-len 512 --workers 2 --budget 0.001s \
  --json)"
[[ "$(field already_done "$warm")" == 2 && "$(field skipped "$warm")" == 0 ]] ||
  { echo "FAIL: a worker warmup out of budget counted tuned keys as skipped: $warm"; exit 1; }
echo "host budget: reported, then resumed; tuned keys done earlier with workers out of budget"

# A warmup killed outright takes its workers with it: a worker hung in a key (the stall hook) is not left
# tuning on as an orphan.
pid_file="$tmp/stalled.pid"
KTUNE_TEST_WORKER_STALL="0:1:$pid_file" "$ktune" warmup --preset llama-3.1-8b --arch host --workers 2 \
  --max-batch 2 --max-seq-len 512 --cache "$tmp/orphan.db" >/dev/null 2>&1 &
coordinator=$!
for _ in $(seq 600); do [[ -s "$pid_file" ]] && break; sleep 0.1; done
[[ -s "$pid_file" ]] || { echo "FAIL: the stalled worker never started"; kill -9 "$coordinator"; exit 1; }
kill -9 "$coordinator"
wait "$coordinator" 2>/dev/null || true
worker=$(cat "$pid_file")
state=running
for _ in $(seq 100); do
  state=$(awk '{print $3}' "/proc/$worker/stat" 2>/dev/null || echo gone)
  [[ "$state" == gone || "$state" == Z ]] && break
  sleep 0.1
done
[[ "$state" == gone || "$state" == Z ]] ||
  { echo "FAIL: worker $worker outlived its killed warmup (state $state)"; kill -9 "$worker"; exit 1; }
echo "host workers: a killed warmup's stalled worker ended with it"
