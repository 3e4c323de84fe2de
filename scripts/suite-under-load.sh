#!/usr/bin/env bash
# Runs the whole `npm test` N times in a row (default 3) while a CPU hog keeps one core busy, and
# prints each run's duration and result: the proof that the suite holds on a loaded machine
# (issue 20). The hog is a plain `node -e 'for(;;){}'`; it is stopped on every exit (trap), also
# on Ctrl-C. Exit status: 0 if every run passed, 1 otherwise.
#
#   scripts/suite-under-load.sh [runs]          # default 3
#   HOGS=0 scripts/suite-under-load.sh 1        # the same without a hog: the quiet figure
#   SUITE_CMD='npx vitest run test/integration/relay-kafka.test.ts' scripts/suite-under-load.sh 5
#                                               # one file instead of the whole suite
#
# Each run's output goes to .tmp/suite-under-load/run-<i>.log; the summary (with each run's five
# slowest files) also to summary.txt.
set -u

runs="${1:-3}"
hogs="${HOGS:-1}"
cmd="${SUITE_CMD:-npm test}"
if ! [[ "$runs" =~ ^[1-9][0-9]*$ && "$hogs" =~ ^[0-9]+$ ]]; then
  echo "usage: [HOGS=n] $0 [runs]   (runs >= 1, default 3; HOGS default 1)" >&2
  exit 2
fi

cd "$(dirname "$0")/.."
out=.tmp/suite-under-load
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"

hog_pids=()
stop_hogs() {
  # Only the processes this script started, by pid.
  for pid in "${hog_pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${hog_pids[@]}"; do wait "$pid" 2>/dev/null; done
  hog_pids=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM

for ((h = 0; h < hogs; h++)); do
  node -e 'for(;;){}' &
  hog_pids+=("$!")
done

say() { echo "$*" | tee -a "$summary"; }
say "suite-under-load: $runs run(s) of '$cmd', $hogs CPU hog(s) (pids: ${hog_pids[*]:-none}), $(nproc) cores, started $(date -u +%FT%TZ)"

failed=0
for ((i = 1; i <= runs; i++)); do
  log="$out/run-$i.log"
  start=$(date +%s)
  bash -c "$cmd" >"$log" 2>&1
  rc=$?
  secs=$(($(date +%s) - start))
  # vitest's own summary lines, colour codes removed.
  files=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ +Test Files' | tail -1 | sed 's/^ *//')
  if [ "$rc" -eq 0 ]; then result=pass; else result="FAIL (exit $rc)"; failed=1; fi
  say "run $i: $result in ${secs} s — ${files:-no summary, see $log}"
  # Where the time went: the five slowest files of the run.
  sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ [✓❯×] \S+\.test\.ts .*[0-9]+ms$' |
    awk '{ print $NF, $2 }' | sort -k1 -n -r | head -5 | sed 's/^/    /' | tee -a "$summary"
  if [ "$rc" -ne 0 ]; then
    sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ (FAIL|❯) ' | sort -u | head -20 | tee -a "$summary"
  fi
done
say "done $(date -u +%FT%TZ); logs in $out/"
exit "$failed"
