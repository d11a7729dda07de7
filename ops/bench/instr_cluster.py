"""instr_cluster.py - instructions a forwarded request costs each node.

Usage: python3 ops/bench/instr_cluster.py MAYFLYD OUTDIR   (N=200 requests a phase)

Starts three nodes n0-n2 on 127.0.0.1-3 (one worker each, busy_poll_us=0 so
that no polling is counted, member_ttl_ms=60000 so that valgrind's slowness
is no failure), n0 and n1 under callgrind; picks queues n0 owns (a push
through n0, then depth scope=node); then sends N pushes of 100 x 256 B and N
pop batch=100 + ack pairs to n0, then the same through n1, which forwards
each to n0, dumping both workers' counters (callgrind_control -d) after each
phase. Prints instructions a request (a pop + ack pair for drain) of each
node (master and worker) for each phase. A dump that another program's
callgrind_control triggers meanwhile (it dumps every callgrind process) is
summed into the phase it splits. Counts include SHA-256 as valgrind runs it
(nettle's plain x86-64 code, about 3,000 instructions a 64-byte block), not
with the CPU's SHA instructions the nodes use natively: compare builds with
it, and time the hash apart.
"""
import http.client, json, os, subprocess, sys, time, socket, glob, re, shutil

BIN, OUT = sys.argv[1], sys.argv[2]
N = int(os.environ.get("N", "200"))
shutil.rmtree(OUT, ignore_errors=True); os.makedirs(OUT)
def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
hp = [free() for _ in range(3)]; cp = [free() for _ in range(3)]
peers = ",".join("127.0.0.%d:%d" % (i + 1, cp[i]) for i in range(3))
open(OUT + "/secret", "w").write("cg secret\n"); os.chmod(OUT + "/secret", 0o600)
procs = []
for i in range(3):
    os.makedirs("%s/n%d" % (OUT, i))
    cmd = [BIN, "-o", "listen=127.0.0.%d:%d" % (i + 1, hp[i]), "-o", "cluster_listen=127.0.0.%d:%d" % (i + 1, cp[i]),
           "-o", "peers=" + peers, "-o", "node_id=n%d" % i, "-o", "cluster_secret_file=%s/secret" % OUT,
           "-o", "workers=1", "-o", "data_dir=%s/n%d" % (OUT, i), "-o", "member_ttl_ms=60000", "-o", "busy_poll_us=0"]
    if i < 2:
        cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes", "-q",
               "--callgrind-out-file=%s/cg%d.%%p" % (OUT, i)] + cmd
    procs.append(subprocess.Popen(cmd, stdout=open("%s/n%d.log" % (OUT, i), "w"), stderr=subprocess.STDOUT))
def conn(k): return http.client.HTTPConnection("127.0.0.%d" % (k + 1), hp[k], timeout=60)
def call(c, method, path, body=None):
    h = {"content-type": "application/json"} if body is not None else {}
    c.request(method, path, body=None if body is None else json.dumps(body), headers=h)
    a = c.getresponse(); d = a.read()
    return a.status, (json.loads(d) if d else None)
try:
    until = time.time() + 180
    while True:
        try:
            ok = all(json.dumps(call(conn(k), "GET", "/health")[1]).count('"live"') >= 3 for k in range(3))
        except Exception:
            ok = False
        if ok: break
        assert time.time() < until, "not ready"
        time.sleep(0.5)
    # worker pids: the children of the valgrind'd masters
    workers = {}
    for i in range(2):
        kids = open("/proc/%d/task/%d/children" % (procs[i].pid, procs[i].pid)).read().split()
        workers[i] = kids
    # queues owned by n0: push one through n0, see it held by n0
    c0 = conn(0)
    owned = []
    k = 0
    while len(owned) < 4:
        q = "cgq%d" % k; k += 1
        call(c0, "POST", "/api/v1/ephemeral/push", {"queue": q, "messages": [{"payload": "x"}]})
        st, b = call(c0, "GET", "/api/v1/ephemeral/queues/%s/depth?scope=node" % q)
        if st == 200 and '"pending":1,' in json.dumps(b, separators=(",", ":")):
            owned.append(q)
        call(c0, "POST", "/api/v1/ephemeral/reset", {"queue": q})
    def dump(name):
        for i in workers:
            for p in workers[i]:
                subprocess.run(["callgrind_control", "-d", name, p], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    msgs = [{"payload": "a" * 256} for _ in range(100)]
    cs = {0: conn(0), 1: conn(1)}
    for via in (1, 0, 1) * 5:  # warm n1's connections first; 503s while the nodes settle
        for t in range(60):
            st, _ = call(cs[via], "POST", "/api/v1/ephemeral/push", {"queue": owned[0], "partition": "Default", "messages": msgs})
            if st == 201: break
            time.sleep(1)
        assert st == 201, st
    for q in owned: call(cs[0], "POST", "/api/v1/ephemeral/reset", {"queue": q})
    dump("hopwarm")
    for via in (0, 1):
        for i in range(N):
            st, _ = call(cs[via], "POST", "/api/v1/ephemeral/push", {"queue": owned[i % 4], "partition": "Default", "messages": msgs})
            assert st == 201, st
        dump("hoppush%d" % via)
        for i in range(N):
            st, b = call(cs[via], "GET", "/api/v1/ephemeral/pop?queue=%s&partition=Default&batch=100" % owned[i % 4])
            assert st == 200 and len(b["messages"]) == 100, (st, b)
            st, _ = call(cs[via], "POST", "/api/v1/ephemeral/ack", {"queue": owned[i % 4], "acks": [m["id"] for m in b["messages"]]})
            assert st == 200, st
        dump("hopdrain%d" % via)
finally:
    for p in procs: p.terminate()
    for p in procs:
        try: p.wait(30)
        except Exception: p.kill()
res = {}
import collections
parts = collections.defaultdict(list)
for f in glob.glob(OUT + "/cg*.*.*"):
    base, num = f.rsplit(".", 1)
    t = open(f).read()
    ph = re.search(r"^desc: Trigger: (?:.* )?dump (\S+)$", t, re.M)
    cnt = re.search(r"^(?:summary|totals): (\d+)", t, re.M)
    parts[base].append((int(num), ph.group(1) if ph else "", int(cnt.group(1)) if cnt else 0))
for base, l in parts.items():
    node = os.path.basename(base)[2]
    acc = 0
    for num, ph, cnt in sorted(l):
        acc += cnt
        if ph.startswith("hop"):
            res[(node, ph[3:])] = res.get((node, ph[3:]), 0) + acc
            acc = 0
for ph in ("push0", "push1", "drain0", "drain1"):
    print("%-7s n0 %10.0f  n1 %10.0f  Ir/request" % (ph, res.get(("0", ph), 0) / N, res.get(("1", ph), 0) / N))
