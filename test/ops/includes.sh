#!/bin/sh
# includes.sh - check that includes flow downward only, as DESIGN's map
# says: master/ may include consensus/, worker/, http/ and shm/; worker/
# may include http/ and shm/; http/ only shm/log.h and shm/nonce.h;
# consensus/ only shm/log.h; shm/ nothing above it.  Every folder may
# include its own headers.
#
# Usage: test/ops/includes.sh [ROOT]   (ROOT: the repository, by default
# the one this script is in)
# Reads every #include "..." of the .c and .h files of those five folders;
# prints each one that goes up or sideways as FILE:LINE: and the rule, and
# exits 1 if there is any (0 otherwise, 2 when ROOT has none of them).
set -eu
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
files=$(find shm http consensus worker master -name '*.[ch]' 2>/dev/null |
    sort)
[ -n "$files" ] || {
    echo "includes.sh: no sources under $root" >&2
    exit 2
}
# grep -H: "file:line:text" for every quoted include.
# shellcheck disable=SC2086 # one word a file: no spaces in these paths
grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $files |
    awk -F: '
    function allowed(layer, inc, dir) {
        dir = inc ~ /\// ? substr(inc, 1, index(inc, "/") - 1) : layer
        if (dir == layer)
            return 1
        if (layer == "master")
            return dir == "consensus" || dir == "worker" || dir == "http" ||
                   dir == "shm"
        if (layer == "worker")
            return dir == "http" || dir == "shm"
        if (layer == "http")
            return inc == "shm/log.h" || inc == "shm/nonce.h"
        if (layer == "consensus")
            return inc == "shm/log.h"
        return 0
    }
    BEGIN {
        rule["master"] = "consensus/, worker/, http/ and shm/"
        rule["worker"] = "http/ and shm/"
        rule["http"] = "shm/log.h and shm/nonce.h"
        rule["consensus"] = "shm/log.h"
        rule["shm"] = "nothing outside shm/"
    }
    {
        file = $1
        line = $2
        text = substr($0, length(file) + length(line) + 3)
        inc = text
        sub(/^[^"]*"/, "", inc)
        sub(/".*$/, "", inc)
        layer = substr(file, 1, index(file, "/") - 1)
        if (!allowed(layer, inc)) {
            printf "%s:%s: includes \"%s\": %s/ may include only its own " \
                   "headers and %s\n", file, line, inc, layer, rule[layer]
            bad++
        }
    }
    END {
        if (bad) {
            printf "includes.sh: %d include(s) against the rule " \
                   "(DESIGN.md, the map)\n", bad
            exit 1
        }
    }'
