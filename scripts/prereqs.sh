#!/usr/bin/env bash
# What `make venv`, `make demo` and `make test` need beyond Python, said up front: each line
# names a tool, whether it was found, and what goes without it. Only Python 3.11+ with venv
# is required; without the others the job runs and the parts that need them skip, saying why
# (set KERAS_SEQ_REQUIRE=kenlm,chromium,litertjs,jax,torch to make such a skip a failure, as
# .ci/run does).
#   scripts/prereqs.sh [PYTHON]
set -u
python=${1:-python3}
status=0
line() { printf '  %-14s %-9s %s\n' "$1" "$2" "$3"; }
echo "keras-seq prerequisites:"
if "$python" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  line python "found" "$("$python" --version 2>&1) with venv"
else
  line python "MISSING" "Python 3.11+ with its venv module is required (PYTHON=... to pick one)"
  status=1
fi
if command -v "${CXX:-c++}" >/dev/null 2>&1; then
  line "C++ compiler" "found" "$(command -v "${CXX:-c++}"): builds KenLM's Python module (kenlm has no wheel)"
else
  line "C++ compiler" "missing" "kenlm is not installed and the KenLM parity tests skip (apt-get install g++)"
fi
if command -v npm >/dev/null 2>&1; then
  line npm "found" "npm $(npm --version 2>/dev/null): fetches LiteRT.js for the browser site"
else
  line npm "missing" "no LiteRT.js: make demo skips the browser site, tests/test_web.py skips (install Node.js + npm)"
fi
chromium=${KERAS_SEQ_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -n "$chromium" ] && [ -x "$chromium" ]; then
  line chromium "found" "$chromium: runs the browser tests and keras-seq bench web"
else
  line chromium "missing" "tests/test_web.py skips (apt-get install chromium, or set KERAS_SEQ_CHROMIUM)"
fi
exit $status
