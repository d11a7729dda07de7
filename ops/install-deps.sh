#!/bin/sh
# install-deps.sh - install the Debian packages mayfly builds, tests and runs with.
#
# Installs only what is missing, non-interactively; uses sudo only when not root.
# Usage: ops/install-deps.sh [build|test|bench|soak]   (default: test)
set -eu

pkgs="gcc make pkg-config libmicrohttpd-dev libjson-c-dev liblmdb-dev libcmph-dev
libcurl4-openssl-dev libxxhash-dev nettle-dev libncurses-dev libjwt-gnutls-dev
libsystemd-dev"
case "${1:-test}" in
test) pkgs="$pkgs libcriterion-dev curl prometheus clang-format man-db groff-base
clang libclang-rt-14-dev tmux chromium build-essential debhelper dpkg-dev
lintian adduser openssl gdb iptables iproute2 systemd" ;;
bench) pkgs="$pkgs redis-server nats-server libhiredis-dev libnats-dev wrk openssl" ;;
soak) pkgs="$pkgs curl gnuplot-nox" ;;
build) ;;
*) echo "usage: $0 [build|test|bench|soak]" >&2; exit 2 ;;
esac

# npm installs the OpenAPI linter and validator (ops/openapi/): Debian's
# nodejs and npm unless the machine already has a node with its npm (a
# NodeSource nodejs bundles npm and conflicts with Debian's package).
[ "${1:-test}" = test ] && ! command -v npm >/dev/null && pkgs="$pkgs nodejs npm"

missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing$missing" >&2
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
