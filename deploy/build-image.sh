#!/bin/sh
# Builds the superfluid image from this checkout (deploy/README.md):
#
#   deploy/build-image.sh [--tag NAME] [--archive PATH] [--smoke]
#
# 1. the linux-x64 release archive, unless --archive names one
#    (`bun build.ts --platform linux-x64 --out dist/release`; docs/install.md);
# 2. a build context holding that one archive, and `build -f deploy/Containerfile`
#    with podman (or docker when there is no podman; ENGINE=... picks one);
# 3. with --smoke: runs the image on a free loopback port with a fresh volume,
#    waits for GET /health, asks /health/ready and one chat completion, stops it
#    (SIGTERM: the drain) and checks it exited 0, then removes the container and
#    the volume. BUILD_FLAGS adds flags to `build` (--isolation chroot), RUN_FLAGS
#    to `run` (a runtime, ulimits), where the host needs them.
#
# Needs: bun (node_modules/.bin, after npm ci), podman or docker, curl for --smoke.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
PATH="$root/node_modules/.bin:$PATH"
tag=superfluid:dev
archive=
smoke=0
while [ $# -gt 0 ]; do
  case "$1" in
  --tag) tag=$2; shift 2 ;;
  --archive) archive=$2; shift 2 ;;
  --smoke) smoke=1; shift ;;
  *) echo "usage: $0 [--tag NAME] [--archive PATH] [--smoke]" >&2; exit 2 ;;
  esac
done

engine=${ENGINE:-$(command -v podman >/dev/null 2>&1 && echo podman || echo docker)}
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$root/package.json")

if [ -z "$archive" ]; then
  (cd "$root" && bun build.ts --platform linux-x64 --out dist/release)
  archive="$root/dist/release/superfluid-$version-linux-x64.tar.gz"
fi
[ -f "$archive" ] || { echo "$0: no archive at $archive" >&2; exit 1; }

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$archive" "$context/"
name=$(basename "$archive")

# --format docker keeps HEALTHCHECK (the OCI image format has no field for it); docker has no such flag.
format=
[ "$engine" = podman ] && format="--format docker"
# shellcheck disable=SC2086
"$engine" build $format ${BUILD_FLAGS:-} -f "$root/deploy/Containerfile" --build-arg "ARCHIVE=$name" -t "$tag" "$context"
"$engine" image inspect "$tag" --format "built $tag: {{.Size}} bytes"

[ "$smoke" = 1 ] || exit 0

port=$(bun -e 'const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } }); console.log(s.port); s.stop(true)')
box="superfluid-smoke-$$"
vol="superfluid-smoke-$$"
cleanup() {
  "$engine" rm -f "$box" >/dev/null 2>&1 || true
  "$engine" volume rm "$vol" >/dev/null 2>&1 || true
  rm -rf "$context"
}
trap cleanup EXIT
# shellcheck disable=SC2086
"$engine" run -d --name "$box" ${RUN_FLAGS:-} -p "127.0.0.1:$port:8080" -v "$vol:/var/lib/superfluid" "$tag" >/dev/null
url="http://127.0.0.1:$port"
i=0
until [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" = 200 ]; do
  i=$((i + 1))
  [ $i -lt 600 ] || { "$engine" logs "$box"; echo "$0: /health never answered 200" >&2; exit 1; }
  sleep 0.1
done
echo "GET /health 200 after $i polls of 0.1 s"
curl -fsS "$url/health/ready"; echo
curl -fsS -D - "$url/v1/chat/completions" -H 'content-type: application/json' \
  -d '{"model":"tiny-chat","messages":[{"role":"user","content":"Say hello."}],"max_tokens":8}'
echo
"$engine" stop -t 45 "$box" >/dev/null
code=$("$engine" inspect "$box" --format '{{.State.ExitCode}}')
"$engine" logs "$box" 2>&1 | tail -n 4
echo "exit code after SIGTERM: $code"
[ "$code" = 0 ]
