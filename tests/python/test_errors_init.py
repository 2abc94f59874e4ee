"""Friendly errors at init, end to end: misspelled names in BRAID_ALGO and
BRAID_PLUGINS fail braid_init on every rank at once, with the position and a
"did you mean"; a collective without candidates says whether the algorithm
or the transport is missing; a job-wide warning is printed once; a rank with
another key or another size fails the rendezvous at once on both sides.

Plugin, algorithm and transport names are taken from braid-info, never
written down here: they are whatever the plugins found declare.

    test_errors_init.py BRAIDRUN BRAID_INFO PYTHONPATH
"""
import os
import re
import socket
import subprocess
import sys
import time

from checks import Checks

braidrun, braid_info, pypath = sys.argv[1:4]
HOST = socket.gethostname()
check = Checks()
PROG = ("import sys, braid, numpy as np\n"
        "try:\n"
        "    c = braid.init()\n"
        "    coll = sys.argv[1] if len(sys.argv) > 1 else ''\n"
        "    x = np.ones(4 * c.size, dtype=np.float32)\n"
        "    if coll == 'allreduce': c.allreduce(x)\n"
        "    if coll == 'allgather': c.allgather(x[:4])\n"
        "    if coll == 'reduce_scatter': c.reduce_scatter(x)\n"
        "    if coll == 'broadcast': c.broadcast(x)\n"
        "    if coll == 'barrier': c.barrier()\n"
        "    c.finalize()\n"
        "except braid.Error as e:\n"
        "    print('ERROR', e, flush=True); sys.exit(3)\n"
        "print('OK')\n")



def run(env, n=2, coll="", launcher=True):
    e = dict(os.environ, PYTHONPATH=pypath, BRAID_TIMEOUT="60", **env)
    cmd = ([braidrun, "-n", str(n)] if launcher else []) + \
          ["/usr/bin/python3", "-c", PROG, coll]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=e, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


def expect_init_error(env, texts, coll=""):
    rc, out, dt = run(env, coll=coll)
    name = " ".join(f"{k}={v}" for k, v in env.items())
    lines = [l for l in out.splitlines() if "ERROR" in l]
    check(rc != 0 and len(lines) == 2, f"{name}: both ranks fail:\n{out}")
    check(dt < 20, f"{name}: took {dt:.1f} s (BRAID_TIMEOUT is 60)")
    for t in texts:
        check(all(t in l for l in lines), f"{name}: {t!r} missing in:\n{out}")
    print(f"checked: {name} ({dt:.1f} s)", flush=True)
    return lines


# What the plugins found declare, from braid-info.
info = subprocess.run([braid_info], capture_output=True, text=True).stdout
plugins, cur = {}, None
for line in info.splitlines():
    m = re.match(r"^(\S+)\s+\S+\s+(available|unavailable|excluded|rejected|"
                 r"shadowed)\b", line)
    if m:
        cur = plugins.setdefault(m.group(1), {"state": m.group(2),
                                              "algos": [], "tls": []})
        continue
    m = re.match(r"^\s+transport (\S+) .*: (available|unavailable)", line)
    if m and cur is not None:
        cur["tls"].append((m.group(1), m.group(2) == "available"))
    m = re.match(r"^\s+algorithm (\S+) for ([a-z_]+)", line)
    if m and cur is not None:
        cur["algos"].append((m.group(1), m.group(2)))
algos = {(a, c) for p in plugins.values() for a, c in p["algos"]}
ar = sorted(a for a, c in algos if c == "allreduce")
check(len(ar) >= 1 and len(plugins) >= 1, f"braid-info lists nothing:\n{info}")


def misspell(word, known):
    for i in range(1, len(word) - 1):  # swap two neighbours
        w = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        if w != word and w not in known:
            return w
    return None


# BRAID_ALGO: an algorithm no plugin has, near a real one.
a = next((a for a in ar if len(a) >= 4 and misspell(a, ar)), None)
if a is None:
    print("SKIP misspelled algorithm: no allreduce algorithm of 4+ letters")
else:
    bad = misspell(a, {x for x, _ in algos})
    lines = expect_init_error(
        {"BRAID_ALGO": f"allreduce:{bad}"},
        [f"no plugin found has an algorithm '{bad}' (at position 10)",
         f"(did you mean '{a}'?)"])
    # Init failures name the host, the launcher's variables and the
    # rendezvous.
    check(any(f"braid_init on host {HOST}, rank 1 of 2 (BRAID_RANK/"
              "BRAID_SIZE), rendezvous 127.0.0.1:" in l for l in lines),
          f"init failure does not name host and variables:\n{lines}")
    expect_init_error({"BRAID_ALGO": f"allreduce:{ar[0]}@nosuchtl"},
                      ["no plugin found brings a transport 'nosuchtl' (at "
                       f"position {11 + len(ar[0])})"])
    expect_init_error({"BRAID_ALGO": f"allreduc:{ar[0]}"},
                      ["(did you mean 'allreduce'?)"])
if len(ar) >= 2:
    expect_init_error({"BRAID_ALGO": f"allreduce:{ar[0]};{ar[1]}"},
                      ["list more candidates for one collective with ','",
                       f"at position {11 + len(ar[0])}"])
ag = {a for a, c in algos if c == "allgather"}
other = sorted(a for a, c in algos if a not in ag)
if other:
    expect_init_error({"BRAID_ALGO": f"allgather:{other[0]}"},
                      [f"'{other[0]}' (at position 10) is no plugin's "
                       "algorithm for allgather"])

# BRAID_PLUGINS: names no plugin has, kept or excluded.
first = sorted(plugins)[0]
expect_init_error({"BRAID_PLUGINS": f"{first},bogus"},
                  [f"no plugin 'bogus' (at position {len(first) + 1}) was "
                   "found"])
expect_init_error({"BRAID_PLUGINS": "^bogus"},
                  ["no plugin 'bogus' (at position 1) was found"])
p = next((p for p in sorted(plugins) if len(p) >= 4 and
          misspell(p, plugins)), None)
if p is not None:
    expect_init_error({"BRAID_PLUGINS": misspell(p, plugins)},
                      [f"(did you mean '{p}'?)"])
if len(plugins) >= 2:
    names = sorted(plugins)
    expect_init_error({"BRAID_PLUGINS": f"{names[0]};{names[1]}"},
                      ["names are separated by ',': did you mean ','?",
                       f"at position {len(names[0])}"])

# A collective without candidates: the transport is missing (a plugin whose
# algorithms have no transport here), or the algorithm is.
for name, p in sorted(plugins.items()):
    if p["state"] == "available" and p["algos"] and \
            not any(ok for _, ok in p["tls"]):
        coll = p["algos"][0][1]
        expect_init_error({"BRAID_PLUGINS": name},
                          ["the transport is missing: "
                           f"{name}'s {coll} algorithm"], coll=coll)
        break
else:
    print("SKIP transport missing: no plugin without an available transport")
for name, p in sorted(plugins.items()):
    have = {c for _, c in p["algos"]}
    if p["state"] == "available" and "allreduce" not in have:
        expect_init_error({"BRAID_PLUGINS": name},
                          ["the algorithm is missing: no available plugin "
                           "has an algorithm for allreduce"], coll="allreduce")
        break

# A job-wide warning, once per job.
rc, out, _ = run({"BRAID_DEBUG": "bogus"}, n=3)
check(rc == 0 and out.count("BRAID_DEBUG='bogus'") == 1,
      f"BRAID_DEBUG=bogus warned {out.count(chr(39) + 'bogus')} times:\n"
      f"{out}")


# Another key, another size: both sides fail at once.
def pair(env0, env1):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = []
    for r, extra in ((0, env0), (1, env1)):
        e = dict(os.environ, PYTHONPATH=pypath, BRAID_TIMEOUT="60",
                 BRAID_RANK=str(r), BRAID_SIZE="2",
                 BRAID_ADDR=f"127.0.0.1:{port}",
                 BRAID_JOB_KEY="00112233445566778899aabbccddeeff")
        e.update(extra)
        procs.append(subprocess.Popen(["/usr/bin/python3", "-c", PROG],
                                      env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    t0 = time.monotonic()
    outs = [p.communicate(timeout=90)[0] for p in procs]
    return outs, time.monotonic() - t0, [p.returncode for p in procs]


outs, dt, rcs = pair({}, {"BRAID_JOB_KEY": "ffeeddccbbaa99887766554433221100"})
check(rcs == [3, 3] and dt < 20, f"wrong key: exits {rcs} after {dt:.1f} s")
check("rank 1 of 2 (connecting from 127.0.0.1:" in outs[0] and
      "another BRAID_JOB_KEY" in outs[0], f"wrong key, rank 0:\n{outs[0]}")
check("wrong job key" in outs[1], f"wrong key, rank 1:\n{outs[1]}")
outs, dt, rcs = pair({}, {"BRAID_SIZE": "3"})
check(rcs == [3, 3] and dt < 20, f"wrong size: exits {rcs} after {dt:.1f} s")
check("was started for a job of 3 ranks, rank 0 for 2" in outs[0],
      f"wrong size, rank 0:\n{outs[0]}")
check("job size mismatch" in outs[1], f"wrong size, rank 1:\n{outs[1]}")

print("errors at init: " + ("ok" if check.failures == 0
                             else f"{check.failures} failed"))
sys.exit(1 if check.failures else 0)
