"""instr_load.py - the fixed workload of ops/bench/instr.sh.

Usage: instr_load.py PORT. Talks HTTP/1.1 keep-alive to a mayflyd on
127.0.0.1:PORT and, between phases, asks callgrind (callgrind_control -d
NAME) to dump its counters, so each dump holds one phase's instructions.
The same requests every time: push 300 x 100 messages of 256 B, drain them
with pop batch=100 autoAck, push 200 more, drain them with pop + ack, then
300 request-verb round trips answered by a responder thread.  Exits non-zero
when an answer is not the expected one.
"""
import http.client
import json
import os
import subprocess
import sys
import threading

PORT = int(sys.argv[1])
PHASES = {"push": 300, "drain_auto": 300, "push_ack": 200, "drain_ack": 200, "request": 300}


def connect():
    return http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)


def call(conn, method, path, body=None):
    headers = {"content-type": "application/json"} if body is not None else {}
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    answer = conn.getresponse()
    data = answer.read()
    return answer.status, json.loads(data) if data else None


def tree(pid):
    out = [pid]
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            kids = open("/proc/%d/task/%s/children" % (pid, t)).read().split()
            for k in kids:
                out += tree(int(k))
    except OSError:
        pass
    return out


def dump(name):
    pids = [str(p) for p in tree(int(os.environ["INSTR_ROOT"]))]
    subprocess.run(["callgrind_control", "--dump=pp_" + name] + pids, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)


def push(conn, queue):
    msgs = [{"payload": {"p": "x" * 240}} for _ in range(100)]
    status, _ = call(conn, "POST", "/api/v1/ephemeral/push",
                     {"queue": queue, "partition": "p", "messages": msgs})
    assert status == 201, status


def pop(conn, queue, extra):
    status, body = call(conn, "GET", "/api/v1/ephemeral/pop?queue=%s&partition=p&batch=100%s"
                        % (queue, extra))
    assert status == 200 and len(body["messages"]) == 100, status
    return body["messages"]


def respond(stop):
    conn = connect()
    while not stop.is_set():
        _, body = call(conn, "GET", "/api/v1/ephemeral/pop?queue=svc&partition=Default"
                       "&batch=1&wait=true&timeout=1000")
        for m in body["messages"]:
            call(conn, "POST", "/api/v1/ephemeral/ack",
                 {"queue": "svc", "acks": [{"id": m["id"], "reply": {"ok": 1}}]})


def main():
    conn = connect()
    dump("warm")
    for i in range(PHASES["push"]):
        push(conn, "q%d" % (i % 8))
    dump("push")
    for i in range(PHASES["drain_auto"]):
        pop(conn, "q%d" % (i % 8), "&autoAck=true")
    dump("drain_auto")
    for i in range(PHASES["push_ack"]):
        push(conn, "a%d" % (i % 8))
    dump("push_ack")
    for i in range(PHASES["drain_ack"]):
        queue = "a%d" % (i % 8)
        msgs = pop(conn, queue, "&group=g")
        status, _ = call(conn, "POST", "/api/v1/ephemeral/ack",
                         {"queue": queue, "group": "g", "acks": [m["id"] for m in msgs]})
        assert status == 200, status
    dump("drain_ack")
    stop = threading.Event()
    responder = threading.Thread(target=respond, args=(stop,))
    responder.start()
    while call(conn, "POST", "/api/v1/ephemeral/request",
               {"queue": "svc", "payload": 0, "timeout": 10000})[0] != 200:
        pass  # 503 no_responders until the responder's first pop is parked
    dump("request_warm")
    for i in range(PHASES["request"]):
        status, _ = call(conn, "POST", "/api/v1/ephemeral/request",
                         {"queue": "svc", "payload": i, "timeout": 10000})
        assert status == 200, status
    dump("request")
    stop.set()
    responder.join()


if __name__ == "__main__":
    main()
