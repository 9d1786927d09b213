#!/usr/bin/env bash
# make test's three phases at once. The TensorFlow phase (the whole suite, one pytest worker
# per core) runs in the foreground, printing as it goes; beside it one more process runs
# tests/backends under JAX and then under PyTorch (each phase where its package is
# installed), and their logs print after. The TensorFlow phase alone keeps 1.7 of 2 cores
# busy (its workers wait on their subprocesses, and one waits for the other at the end);
# the backend phases fill the gap, so side by side the three finish sooner than one after
# the other (the README's make test paragraph gives both). Exits non-zero if any phase
# failed, and names it.
#   scripts/test_phases.sh PYTHON MARKS
# A backend named in $KERAS_SEQ_REQUIRE (as in CI) that is not installed fails its phase.
set -u
python=$1
marks=$2
pytest=("$python" -m pytest -q --durations=15)
logs=$(mktemp -d "${TMPDIR:-/tmp}/keras-seq-phases.XXXXXX")
trap 'rm -rf "$logs"' EXIT

backend_phase() {  # BACKEND: its log in $logs/BACKEND.log, its exit status in $logs/BACKEND.rc
  local backend=$1 rc=0
  if "$python" -c "import $backend" 2>/dev/null; then
    KERAS_BACKEND=$backend "${pytest[@]}" -p no:xdist -p no:cacheprovider -m "$marks" \
      tests/backends >"$logs/$backend.log" 2>&1 || rc=$?
  elif case ",${KERAS_SEQ_REQUIRE:-}," in *,"$backend",*) true;; *) false;; esac; then
    echo "the $backend phase cannot run: $backend is not installed" >"$logs/$backend.log"
    rc=1
  else
    echo "the $backend phase skipped: $backend is not installed" \
      "(pip install -c constraints.txt '.[$backend]')" >"$logs/$backend.log"
  fi
  echo "$rc" >"$logs/$backend.rc"
}

main() {
  (backend_phase jax; backend_phase torch) &
  backends=$!
  echo "== the tensorflow phase (the jax and torch phases run beside it; their logs follow it)"
  tensorflow_rc=0
  KERAS_BACKEND=tensorflow "${pytest[@]}" -n auto --dist worksteal -m "$marks" || tensorflow_rc=$?
  wait "$backends"

  failed=()
  [ "$tensorflow_rc" -eq 0 ] || failed+=("tensorflow (exit $tensorflow_rc)")
  for backend in jax torch; do
    echo "== the $backend phase (tests/backends under KERAS_BACKEND=$backend)"
    cat "$logs/$backend.log"
    rc=$(cat "$logs/$backend.rc" 2>/dev/null || echo 1)
    [ "$rc" -eq 0 ] || failed+=("$backend (exit $rc)")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "make test: FAILED phases: ${failed[*]}"
    exit 1
  fi
  echo "make test: the tensorflow, jax and torch phases passed"
}

# One line, read whole before it runs: editing this file during a run cannot change the run.
main "$@"; exit
