#!/usr/bin/env python3
# Where a long run's CPU goes: every INTERVAL seconds (default 10), the machine's busy share
# (/proc/stat) and the CPU-seconds each category of process used in that interval, by command
# line (guest: qemu-system; qemu-user; build:x86 / build:aarch64: rustc, cargo, linkers;
# test-bin: a cargo test binary; python/ansible; ...). A process that started and ended within
# one interval is not seen alive: its time shows as "unaccounted(short-lived)" (the busy time
# no live process explains). Every 300 s a CUM line sums the categories since the start.
#
#   bench/cpu_by_category.py [INTERVAL] > cpu.log &      # beside, e.g., .ci/run
#
# docs/performance.md ("The README test command's wall time") used it to find what the README
# command's phases took from each other.
import os, sys, time, collections
INTERVAL = float(sys.argv[1]) if len(sys.argv) > 1 else 10
HZ = os.sysconf('SC_CLK_TCK')
def cat(pid):
    try:
        cmd = open(f'/proc/{pid}/cmdline','rb').read().split(b'\0')
        comm = open(f'/proc/{pid}/comm').read().strip()
    except OSError:
        return None
    c0 = os.path.basename(cmd[0].decode(errors='replace')) if cmd and cmd[0] else comm
    s = b' '.join(cmd).decode(errors='replace')
    if c0.startswith('qemu-system'): return 'guest'
    if 'qemu-aarch64' in c0 or 'qemu-aarch64' in s[:200]: return 'qemu-user'
    if c0 in ('rustc','cargo','clippy-driver','ld','ld.lld','rust-lld','cc','aarch64-linux-gnu-gcc','collect2','ld.bfd') or 'aarch64-linux-gnu-ld' in c0: return 'build:'+('aarch64' if 'aarch64' in s else 'x86')
    if 'ansible' in s or c0.startswith('python'): return 'python/ansible'
    if c0 in ('ssh','sshd'): return 'ssh'
    if '/deps/' in s: return 'test-bin'
    if c0 in ('daqtune','daqtune-selftest'): return 'daqtune'
    return 'other:'+comm
def snap():
    d = {}
    for p in os.listdir('/proc'):
        if not p.isdigit(): continue
        try:
            f = open(f'/proc/{p}/stat').read()
        except OSError: continue
        r = f.rfind(')'); fl = f[r+2:].split()
        d[p] = (int(fl[11])+int(fl[12]), fl[19])
    return d
def total():
    l = open('/proc/stat').readline().split()[1:]
    v = list(map(int,l)); idle = v[3]+v[4]
    return sum(v)-idle
prev = snap(); pt = total(); t0 = time.time(); cats = {}
acc = collections.Counter()
while True:
    time.sleep(INTERVAL)
    cur = snap(); ct = total()
    per = collections.Counter()
    for p,(t,st) in cur.items():
        if p in prev and prev[p][1]==st:
            dt = t - prev[p][0]
            if dt > 0:
                if p not in cats: cats[p] = cat(p) or 'gone'
                per[cats[p]] += dt
        else:
            cats.pop(p, None)
            c = cat(p) or 'gone'; cats[p]=c
            per[c] += t  # new process: all its time is in this interval
    busy = ct - pt
    per['unaccounted(short-lived)'] = max(0, busy - sum(per.values()))
    acc.update(per)
    el = time.time()-t0
    print(f"{el:7.0f} busy={busy/HZ/INTERVAL*100/os.cpu_count():5.1f}% " + ' '.join(f"{k}={v/HZ:.0f}" for k,v in per.most_common(6)), flush=True)
    if int(el) % 300 < INTERVAL:
        print("CUM " + ' '.join(f"{k}={v/HZ:.0f}" for k,v in acc.most_common(14)), flush=True)
    prev, pt = cur, ct
