"""Secure by default, end to end: a rendezvous on an address other hosts can
reach, without BRAID_JOB_KEY, is refused at init on every rank with the
recipe for a key; with a key it runs; on loopback no key is needed.

Needs an address of this host that is not loopback: the first global IPv4
address, or else (as root) a veth interface in a fresh network namespace.

    test_keyless.py PYTHONPATH
"""
import os
import socket
import subprocess
import sys
import time

from checks import Checks

pypath = sys.argv[1]
check = Checks()
PROG = ("import sys, braid, numpy as np\n"
        "try:\n"
        "    c = braid.init(); x = np.ones(4, dtype=np.float32)\n"
        "    c.allreduce(x); assert x[0] == c.size; c.finalize()\n"
        "except braid.Error as e:\n"
        "    print('ERROR', e, flush=True); sys.exit(3)\n"
        "print('OK', flush=True)\n")
KEY = "0123456789abcdef0123456789abcdef"



def global_ipv4():
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "scope",
                          "global"], capture_output=True, text=True).stdout
    for line in out.split("\n"):
        f = line.split()
        if len(f) >= 4 and f[2] == "inet":
            return f[3].split("/")[0]
    return None


def free_port(ip):
    s = socket.socket()
    s.bind((ip, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def job(n, env_of_rank):
    procs = []
    for r in range(n):
        e = dict(os.environ, PYTHONPATH=pypath, BRAID_TIMEOUT="60")
        for k in ("BRAID_JOB_KEY", "BRAID_ADDR", "RANK", "WORLD_SIZE",
                  "MASTER_ADDR", "MASTER_PORT"):
            e.pop(k, None)
        e.update(env_of_rank(r))
        procs.append(subprocess.Popen(["/usr/bin/python3", "-c", PROG],
                                      env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    t0 = time.monotonic()
    outs = [p.communicate(timeout=90)[0] for p in procs]
    return [p.returncode for p in procs], outs, time.monotonic() - t0


def main():
    ip = global_ipv4()
    if ip is None and os.environ.get("BRAID_KEYLESS_NETNS") != "1":
        if os.geteuid() != 0:
            print("SKIP: no non-loopback address and not root (cannot make "
                  "a network namespace)")
            return 77
        setup = ("ip link set lo up && ip link add braid0 type veth peer "
                 "name braid1 && ip addr add 10.99.0.1/24 dev braid0 && "
                 "ip link set braid0 up && ip link set braid1 up && "
                 "exec env BRAID_KEYLESS_NETNS=1 "
                 f"/usr/bin/python3 {sys.argv[0]} {pypath}")
        print("no global address here: running in a network namespace with "
              "a veth interface", flush=True)
        return subprocess.run(["unshare", "-n", "sh", "-c", setup]).returncode
    print(f"non-loopback address: {ip}", flush=True)

    port = free_port(ip)
    rcs, outs, dt = job(2, lambda r: {"BRAID_RANK": str(r), "BRAID_SIZE": "2",
                                      "BRAID_ADDR": f"{ip}:{port}"})
    check(rcs == [3, 3] and dt < 20, f"keyless {ip}: exits {rcs}, {dt:.1f} s")
    for o in outs:
        check(f"BRAID_JOB_KEY is not set, and the rendezvous {ip}:{port} "
              "(BRAID_ADDR) is reachable from other hosts" in o and
              "openssl rand -hex 16" in o and
              "head -c16 /dev/urandom | xxd -p" in o and
              "mpirun needs -x BRAID_JOB_KEY" in o, f"keyless message:\n{o}")

    port = free_port(ip)
    rcs, outs, dt = job(2, lambda r: {"RANK": str(r), "WORLD_SIZE": "2",
                                      "MASTER_ADDR": ip,
                                      "MASTER_PORT": str(port)})
    check(rcs == [3, 3], f"keyless torch-style {ip}: exits {rcs}")
    check(all("(MASTER_ADDR/MASTER_PORT) is reachable from other hosts" in o
              for o in outs), f"keyless torch-style message:\n{outs}")

    port = free_port(ip)
    rcs, outs, dt = job(2, lambda r: {"BRAID_RANK": str(r), "BRAID_SIZE": "2",
                                      "BRAID_ADDR": f"{ip}:{port}",
                                      "BRAID_JOB_KEY": KEY})
    check(rcs == [0, 0], f"with a key on {ip}: exits {rcs}:\n{outs}")

    port = free_port("127.0.0.1")
    rcs, outs, dt = job(2, lambda r: {"RANK": str(r), "WORLD_SIZE": "2",
                                      "MASTER_ADDR": "127.0.0.1",
                                      "MASTER_PORT": str(port)})
    check(rcs == [0, 0], f"loopback without a key: exits {rcs}:\n{outs}")

    print("keyless: " + ("ok" if check.failures == 0
                         else f"{check.failures} failed"))
    return 1 if check.failures else 0


sys.exit(main())
