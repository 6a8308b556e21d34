#!/bin/sh
# Run an app's tests against superfluid's built-in model (docs/guides/ci.md):
# install superfluid if it is not there, start `superfluid serve` in the
# background on a fresh sessions folder, `superfluid wait` until it is ready,
# run the tests, stop the server with SIGTERM. A trap stops the server however
# the script ends; on failure the server's log is printed (and kept).
#
# usage: sh ci-smoke.sh [APP TEST COMMAND...]
#   With no command, one chat request checks the built-in model's reply (curl).
#   The command sees OPENAI_BASE_URL (http://HOST:PORT/v1), OPENAI_API_KEY
#   (`unused` unless already set) and SUPERFLUID_URL (http://HOST:PORT).
#   Exit status: the command's, or 1 when the server fails to start or to stop.
#
# Environment (all optional):
#   SUPERFLUID_BIN           the executable (default: `superfluid` on PATH, else
#                            installed with the release's install.sh)
#   SUPERFLUID_HOST          listen address (default 127.0.0.1)
#   SUPERFLUID_PORT          port (default 8453)
#   SUPERFLUID_SESSIONS      sessions folder (default: a fresh one under
#                            $RUNNER_TEMP, else $TMPDIR, else /tmp)
#   SUPERFLUID_LOG           the server's log file (default: beside that folder)
#   SUPERFLUID_WAIT_TIMEOUT  seconds to wait for readiness (default 60)
#   SUPERFLUID_STOP_TIMEOUT  seconds to wait for a clean stop before SIGKILL (default 10)
#   SUPERFLUID_SERVE_ARGS    more `serve` flags, split on spaces (e.g. a model path)
#   SUPERFLUID_VERSION, SUPERFLUID_BASE_URL, SUPERFLUID_PREFIX
#                            which release install.sh installs, from where, to where

set -u

host=${SUPERFLUID_HOST:-127.0.0.1}
port=${SUPERFLUID_PORT:-8453}
wait_timeout=${SUPERFLUID_WAIT_TIMEOUT:-60}
stop_timeout=${SUPERFLUID_STOP_TIMEOUT:-10}
version=${SUPERFLUID_VERSION:-0.1.0}
base_url=${SUPERFLUID_BASE_URL:-https://github.com/superfluid/superfluid/releases/download/v$version}
# The built-in model's chat reply (docs/guides/ci.md, "The built-in model"): fixed for a version.
sentence="Hello from superfluid's built-in test model."

say() { echo "ci-smoke: $*" >&2; }

work=
server_pid=
server_status=
failed=1

# Stops the server (SIGTERM, then SIGKILL after SUPERFLUID_STOP_TIMEOUT) and
# records its exit status. Safe to call twice.
stop_server() {
  [ -n "$server_pid" ] || return 0
  pid=$server_pid
  server_pid=
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    ticks=0
    while kill -0 "$pid" 2>/dev/null; do
      ticks=$((ticks + 1))
      if [ "$ticks" -gt $((stop_timeout * 10)) ]; then
        say "the server did not stop within ${stop_timeout} s of SIGTERM; killing it"
        kill -KILL "$pid" 2>/dev/null
        break
      fi
      sleep 0.1 2>/dev/null || sleep 1
    done
  fi
  wait "$pid"
  server_status=$?
}

# shellcheck disable=SC2317 # called by the EXIT trap
on_exit() {
  stop_server
  if [ "$failed" -ne 0 ] && [ -n "${log:-}" ] && [ -f "$log" ]; then
    say "server log ($log), last 50 lines:"
    tail -n 50 "$log" >&2
  elif [ -n "$work" ]; then
    # A clean run leaves nothing behind; a failed one keeps the log to upload.
    rm -rf "$work"
  fi
}
trap on_exit EXIT
# `exit` from a signal trap runs the EXIT trap, so the server is stopped too.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# 1. The binary: as given, on PATH, or installed from the release.
bin=${SUPERFLUID_BIN:-}
if [ -z "$bin" ]; then
  bin=$(command -v superfluid 2>/dev/null || true)
fi
if [ -z "$bin" ]; then
  say "installing superfluid $version from $base_url"
  installer=$(mktemp "${TMPDIR:-/tmp}/superfluid-install.XXXXXX") || exit 1
  if ! curl -fsSL "$base_url/install.sh" -o "$installer"; then
    rm -f "$installer"
    say "could not download $base_url/install.sh"
    exit 1
  fi
  SUPERFLUID_VERSION=$version SUPERFLUID_BASE_URL=$base_url sh "$installer"
  status=$?
  rm -f "$installer"
  [ "$status" -eq 0 ] || exit 1
  bin=${SUPERFLUID_PREFIX:-$HOME/.local}/bin/superfluid
fi

# 2. A fresh sessions folder and a log file, unless given.
if [ -z "${SUPERFLUID_SESSIONS:-}" ] || [ -z "${SUPERFLUID_LOG:-}" ]; then
  work=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/superfluid-ci.XXXXXX") || exit 1
fi
sessions=${SUPERFLUID_SESSIONS:-$work/sessions}
log=${SUPERFLUID_LOG:-$work/serve.log}

# A server already answering on the port would answer the wait below in
# place of ours (a leftover from an earlier run, another project's).
if "$bin" wait --timeout 0 "$host:$port" >/dev/null 2>&1; then
  say "a server already answers on $host:$port; stop it or set SUPERFLUID_PORT"
  exit 1
fi

# 3. The server, in the background, on the built-in model (no model named).
# SUPERFLUID_SERVE_ARGS is split on spaces on purpose.
# shellcheck disable=SC2086
"$bin" serve --host "$host" --port "$port" --sessions "$sessions" --no-tui ${SUPERFLUID_SERVE_ARGS:-} >"$log" 2>&1 &
server_pid=$!
say "started $bin serve (pid $server_pid) on $host:$port, log $log"

# 4. Ready: GET /health answers 200.
# --pid: a server that cannot start (a bad flag, the port taken) ends the wait at once.
if ! "$bin" wait --timeout "$wait_timeout" --pid "$server_pid" "$host:$port" >&2; then
  say "the server did not become ready"
  exit 1
fi

SUPERFLUID_URL="http://$host:$port"
OPENAI_BASE_URL="$SUPERFLUID_URL/v1"
OPENAI_API_KEY=${OPENAI_API_KEY:-unused}
export SUPERFLUID_URL OPENAI_BASE_URL OPENAI_API_KEY

# The check run when no app test is named: one chat at temperature 0 with a
# fixed seed must get the built-in model's sentence back.
builtin_check() {
  reply=$(curl -fsS "$OPENAI_BASE_URL/chat/completions" \
    -H 'content-type: application/json' \
    -d '{"model":"tiny-chat","messages":[{"role":"user","content":"Say hello."}],"temperature":0,"seed":42,"max_tokens":32}') || return 1
  case $reply in
    *"\"content\":\"$sentence\""*) say "the built-in model answered: $sentence" ;;
    *) say "unexpected reply: $reply"; return 1 ;;
  esac
}

# 5. The app's tests.
if [ "$#" -gt 0 ]; then
  "$@"
else
  builtin_check
fi
app_status=$?
[ "$app_status" -eq 0 ] || say "the app tests failed (exit $app_status)"

# 6. A clean stop: SIGTERM, and the server exits 0.
stop_server
if [ "$server_status" -ne 0 ]; then
  say "the server exited $server_status (not a clean stop)"
  [ "$app_status" -ne 0 ] || app_status=1
fi
[ "$app_status" -ne 0 ] || failed=0
exit "$app_status"
