#!/bin/sh
# instr.sh - compare two mayflyd builds by instructions a request, not time.
#
# Usage: ops/bench/instr.sh OLD_MAYFLYD NEW_MAYFLYD
# Runs each binary (one worker) under `valgrind --tool=callgrind` with the
# fixed workload of ops/bench/instr_load.py, and prints, per phase (push,
# autoAck drain, push, pop + ack drain, request verb), the instructions a
# request of the whole node (master and worker) for both and their ratio.
# Instruction counts do not depend on what else the machine runs (two runs
# of one binary agree within about 0.2 %), so this answers "did a change make
# a path slower?" on a loaded, shared machine where `make bench` figures
# move by tens of percent. It does not see cache misses, system calls'
# cost or contention: confirm a real gain with `make bench` on an idle
# machine. Dumps name this run's own processes (the tree under INSTR_ROOT)
# and add up any dump another trigger made: callgrind_control with no pid
# would have every callgrind on a shared machine dump into our counts.
# Needs valgrind and python3. Data: build/bench/instr/.
# Exit status: 0, or 1 when a run failed.
set -eu
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: $0 OLD_MAYFLYD NEW_MAYFLYD" >&2; exit 2; }
out=build/bench/instr
rm -rf "$out"
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# run NAME BINARY - one binary under callgrind; dumps go to $out/NAME/.
run() {
    d=$out/$1
    mkdir -p "$d/data"
    p=$(free_port) c=$(free_port)
    valgrind --tool=callgrind --trace-children=yes -q \
        --callgrind-out-file="$d/cg.%p" "$2" -o listen="127.0.0.1:$p" \
        -o cluster_listen="127.0.0.1:$c" -o workers=1 -o data_dir="$d/data" \
        >"$d/server.log" 2>&1 &
    vp=$!
    n=0
    until curl -sf -o /dev/null "http://127.0.0.1:$p/health"; do
        n=$((n + 1))
        [ "$n" -lt 600 ] || { kill "$vp"; echo "$0: $2 did not start" >&2; exit 1; }
        sleep 0.2
    done
    INSTR_ROOT=$vp python3 ops/bench/instr_load.py "$p" || { kill "$vp"; exit 1; }
    kill -TERM "$vp"
    wait "$vp" || true
}
run old "$1"
run new "$2"
python3 - "$out" <<'PY'
import glob, re, sys
out = sys.argv[1]
requests = {"push": 300, "drain_auto": 300, "push_ack": 200, "drain_ack": 200, "request": 300}
def phases(name):
    total = {}
    files = {}
    for f in glob.glob("%s/%s/cg.*.*" % (out, name)):
        pid, seq = f.rsplit("/", 1)[1].split(".")[1:3]
        files.setdefault(pid, []).append((int(seq), f))
    for pid, fs in files.items():
        acc = 0
        for _, f in sorted(fs):
            text = open(f).read()
            phase = re.search(r"^desc: Trigger: (?:.* )?dump (\S+)$", text, re.M)
            count = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
            acc += int(count.group(1)) if count else 0
            if phase and phase.group(1).startswith("pp_"):
                k = phase.group(1)[3:]
                total[k] = total.get(k, 0) + acc
                acc = 0
    return total
old, new = phases("old"), phases("new")
print("%-11s %14s %14s %9s" % ("phase", "old Ir/req", "new Ir/req", "new/old"))
for p, n in requests.items():
    print("%-11s %14.0f %14.0f %9.3f" % (p, old[p] / n, new[p] / n, new[p] / old[p]))
PY
