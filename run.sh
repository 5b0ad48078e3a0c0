#!/usr/bin/env bash
# kaflite's one entry point for a fresh machine (Python 3.11+, pip; Java 17 for the Spark tests and ZooKeeper).
#   ./run.sh serve [kaflite serve options]   set everything up, start the broker on 127.0.0.1:9092
#   ./run.sh test  [pytest options]          set everything up, run the whole test suite
#   ./run.sh setup                           only set up (.venv with kaflite and its test tools)
set -euo pipefail
cd "$(dirname "$0")"
VENV=${KAFLITE_VENV:-.venv}
PY=${PYTHON:-python3}

# True when the venv's editable install of kaflite imports this checkout's src/ (setuptools writes the
# path into __editable__.kaflite-*.pth): a file read, no Python start-up, no pip.
editable_points_here() {
  local here pth
  here=$(pwd -P)/src
  for pth in "$VENV"/lib/python3*/site-packages/__editable__.kaflite-*.pth; do
    [ -f "$pth" ] && grep -qxF "$here" "$pth" && return 0
  done
  return 1
}

# The compiled fetch decoder (kaflite.spark._decode, setup.py: optional, so an install without a C compiler
# goes on and kaflite reads fetches with the pure decoder) is built in place by `pip install -e .`. This
# stamp names the C source an install last tried to build; a changed source (a pull, an edit) is built
# again when a compiler is here, a failed build is not retried on every start.
decoder_stamp() {
  echo "$VENV/.kaflite-decoder-$(sha1sum src/kaflite/spark/_decode.c | cut -c1-12)"
}

decoder_stale() {
  command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1 || return 1
  [ ! -f "$(decoder_stamp)" ]
}

setup_python() {
  local extra=$1
  if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
  fi
  local spec=.
  [ -n "$extra" ] && spec=".[$extra]"
  local hash
  hash=$(sha1sum pyproject.toml | cut -c1-12)
  local stamp="$VENV/.kaflite-${extra:-base}-$hash"
  # the test extra installs everything the base needs
  if [ -f "$stamp" ] || { [ -z "$extra" ] && [ -f "$VENV/.kaflite-test-$hash" ]; }; then
    # set up for this pyproject.toml: reinstall only if the editable install points elsewhere, or to build
    # the compiled decoder's changed source in place
    if ! editable_points_here || [ ! -x "$VENV/bin/kaflite" ] || decoder_stale; then
      "$VENV/bin/python" -m pip install -q --no-deps -e . >/dev/null
      touch "$(decoder_stamp)"
    fi
    return
  fi
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e "$spec"
  touch "$stamp" "$(decoder_stamp)"
}

setup_system() {
  # Debian packages the tests and the cluster mode use:
  # - kcat, one of the real clients the integration tests drive;
  # - zookeeper: only its jars (/usr/share/java/zookeeper.jar and what its manifest names). kaflite
  #   starts ZooKeeper itself from Java with its own zoo.cfg (kaflite.cluster.zkserver), never as the
  #   system service; the single-node broker does not need it.
  local missing=()
  command -v kcat >/dev/null 2>&1 || missing+=(kcat)
  [ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
  # - chromium + chromium-driver: the web console's browser tests (selenium drives them).
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
      echo "note: ${missing[*]} not found and not root; the tests needing them will be skipped (fail under KAFLITE_REQUIRE_ALL=1)" >&2
    fi
  fi
}

cmd=${1:-help}
shift || true
case "$cmd" in
  setup) setup_system; setup_python test ;;
  serve)
    setup_python ""
    exec "$VENV/bin/kaflite" serve "$@" ;;
  test)
    setup_system
    setup_python test
    # the suite starts hundreds of Python processes (brokers, CLI commands, drivers): with bytecode writing
    # off (some shells and CI images export PYTHONDONTWRITEBYTECODE=1) each one compiles kaflite's sources
    # again, 1.5-5 s a start on 2 cores; let them share the __pycache__ the first one writes
    unset PYTHONDONTWRITEBYTECODE
    exec "$VENV/bin/python" -m pytest "$@" ;;
  *) sed -n '2,5p' "$0"; exit 2 ;;
esac
