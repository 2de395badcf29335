#!/bin/sh
# scripts/test-image.sh checks that tide's image runs every policy. There is
# no Docker daemon on the project's machines, so it builds the image's
# root filesystem without one: mmdebstrap makes the Debian release of
# deploy/Dockerfile's runtime stage (its FROM line) with the packages of
# its apt-get line, tide and tide-kube are built with the Dockerfile's
# build command, an LP policy (gavel-las, which fails without GLPK) runs
# in it under chroot as the image's user, and `tide kube --help` shows
# tide-kube's flags (tide finds it beside itself). What it does not test:
# Docker's own build (the golang image, COPY) and the ENTRYPOINT line.
# Needs root and Debian's package mirror (apt-get installs mmdebstrap when
# it is missing). About 1-2 minutes.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
df=$root/deploy/Dockerfile
suite=$(sed -n 's/^FROM debian:\([a-z]*\)-slim$/\1/p' "$df")
pkgs=$(sed -n 's/.*apt-get install -y --no-install-recommends \([^&]*\) &&.*/\1/p' "$df" | tr ' ' ',' | sed 's/,$//')
user=$(sed -n 's/^USER \(.*\)$/\1/p' "$df")
if [ -z "$suite" ] || [ -z "$pkgs" ] || [ -z "$user" ]; then
	echo "test-image: cannot read the runtime stage of $df (FROM debian:SUITE-slim, apt-get install, USER)" >&2
	exit 1
fi
if [ "$(id -u)" != 0 ]; then
	echo "test-image: skipped: needs root (mmdebstrap, chroot)"
	exit 0
fi
if ! command -v mmdebstrap >/dev/null; then
	apt-get install -y mmdebstrap >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y mmdebstrap >/dev/null; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
mmdebstrap --quiet --variant=minbase --include="$pkgs" "$suite" "$work/rootfs"
# The build stage's command, as the Dockerfile has it (both binaries).
build=$(sed -n 's/^RUN \(CGO_ENABLED=0 go build .*\) -o \/out\/ \(.*\)$/\1 -o OUT \2/p' "$df")
case $build in
*./cmd/tide*./cmd/tide-kube*) ;;
*) echo "test-image: cannot read the build command of $df (RUN CGO_ENABLED=0 go build ... -o /out/ ./cmd/tide ./cmd/tide-kube)" >&2; exit 1 ;;
esac
(cd "$root" && eval "$(echo "$build" | sed "s|OUT|$work/rootfs/usr/local/bin/|")")
mkdir -p "$work/rootfs/tmp" && chmod 1777 "$work/rootfs/tmp"
run() {
	echo "+ tide $*"
	chroot --userspec="$user" "$work/rootfs" env HOME=/tmp /usr/local/bin/tide "$@"
}
run sim --policy gavel-las --json >"$work/gavel.json"
grep -q '"name": "gavel-las"' "$work/gavel.json" || { echo "test-image: gavel-las gave no result"; cat "$work/gavel.json"; exit 1; }
# tide kube runs tide-kube from beside tide (the Deployment's args: kube ...).
run kube --help >"$work/kube.txt" 2>&1 || true
grep -q -- '--leader-elect' "$work/kube.txt" || { echo "test-image: tide kube did not run tide-kube"; cat "$work/kube.txt"; exit 1; }
echo "image filesystem ($suite + $pkgs, user $user): gavel-las (an LP through GLPK) ran, tide kube found tide-kube; $(($(date +%s) - start)) s"
