#!/usr/bin/env bash
# A stand-in for `ktune warmup-worker --host-worker N` in the [workers] queue tests: it speaks the worker
# protocol on fd 3 (autotune/worker_protocol.hpp) and answers every key "tuned" at once, measuring and storing
# nothing, so the coordinator's dealing can be tested in milliseconds without a compiler.
#   FAKE_WORKER_GROUPS=G    worker N says fingerprint "fake-<N mod G>" (default 1: every worker identical)
#   FAKE_WORKER_DIE=N:K     worker N SIGKILLs itself on its K-th key, before answering
#   FAKE_WORKER_POISON=KEY  any worker given problem_key KEY SIGKILLs itself (a key that crashes its GPU)
#   FAKE_WORKER_FATAL=N     worker N cannot start: it says why ({"fatal": ...}) and exits 1
#   FAKE_WORKER_BAD_HELLO=N worker N says a hello out of protocol, then sleeps without reading its socket
#   FAKE_WORKER_HUGE=N      worker N answers its first key with 17 MiB and no end of line, then sleeps
#   FAKE_WORKER_SLOW=N:S    worker N waits S seconds before each answer
set -u
index=${3:?usage: fake_tune_worker.sh warmup-worker --host-worker N}
if [[ "${FAKE_WORKER_FATAL:-}" == "$index" ]]; then
  printf '{"fatal": "ktune warmup-worker: no GPU %s here"}\n' "$index" >&3
  exit 1
fi
if [[ "${FAKE_WORKER_BAD_HELLO:-}" == "$index" ]]; then
  printf '{"hello": 2}\n' >&3
  sleep 60
  exit 0
fi
printf '{"hello": 1, "arch": "host", "fingerprint": "fake-%s"}\n' "$((index % ${FAKE_WORKER_GROUPS:-1}))" >&3
n=0
while IFS= read -r line <&3; do
  n=$((n + 1))
  id=$(sed -n 's/.*"task": *\([0-9]*\).*/\1/p' <<<"$line")
  [[ "${FAKE_WORKER_DIE:-}" == "$index:$n" ]] && kill -9 $$
  [[ -n "${FAKE_WORKER_POISON:-}" && "$line" == *"\"problem_key\":\"$FAKE_WORKER_POISON\""* ]] && kill -9 $$
  if [[ "${FAKE_WORKER_HUGE:-}" == "$index" ]]; then
    head -c $((17 << 20)) /dev/zero | tr '\0' 'x' >&3
    sleep 60
    exit 0
  fi
  [[ "${FAKE_WORKER_SLOW:-}" == "$index":* ]] && sleep "${FAKE_WORKER_SLOW#*:}"
  printf '{"task": %s, "status": "tuned", "winner": "w%s", "ms": 1}\n' "$id" "$index" >&3
done
