#!/usr/bin/env python3
"""Samples the server while one load-generator run is in progress (used by bench/run.sh).

usage: sample.py SERVER_PID CLIENT_PID [--postgres DATABASE]

Every 200 ms until CLIENT_PID exits it reads the server's RSS (/proc/PID/status VmRSS) and the CPU time of
the server, the client and the whole machine (/proc/PID/stat, /proc/stat). At the end it prints one line:

    rss_peak_kb=… server_cpu_pct=… client_cpu_pct=… other_cpu_pct=… wall_s=… server_cpu_s=…

CPU percentages are shares of the whole machine (all cores) over the run. `other_cpu_pct` is process time that
neither the server nor the load generator used (plus hypervisor steal): other work competing for the cores,
which skews the figures. `server_cpu_s` is the server's CPU time over the run in seconds (its share × cores ×
wall time).

With --postgres it also counts the CPU of the database server on this machine: the processes named `postgres`
that serve DATABASE (backends and autovacuum workers, by their process title; one that exits during the run
counts up to its last sample) and the shared ones (the postmaster, checkpointer, background and WAL writers,
which also work for other databases of the cluster, if any are busy). It adds `db_cpu_pct=… db_cpu_s=…`,
and that share is no longer part of other_cpu_pct.
"""

import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
INTERVAL = 0.2


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def proc_cpu_ticks(pid):
    """utime + stime of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)
    except (OSError, IndexError, ValueError):
        return None


def machine_ticks():
    """(busy, total) ticks over all cores.

    busy = user + nice + system + steal: time that processes (or, for steal, the hypervisor's other guests)
    took. irq and softirq are left out: loopback networking runs there and belongs to the benchmark itself.
    """
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice: already counted in user/nice]
    user, nice, system, steal = values[0], values[1], values[2], values[7]
    return user + nice + system + steal, sum(values[:8])


def postgres_database(pid):
    """The database a postgres process serves, from its title ("postgres: 15/main: USER DATABASE HOST state",
    "postgres: 15/main: autovacuum worker DATABASE"); None for the shared processes."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        words = f.read().replace(b"\0", b" ").decode(errors="replace").split()
    if len(words) < 4 or words[0] != "postgres:" or not words[1].endswith(":"):
        return None  # the postmaster (its command line)
    rest = words[2:]
    if rest[:2] == ["autovacuum", "worker"]:
        return rest[2] if len(rest) > 2 else None
    if len(rest) >= 3 and ("(" in rest[2] or rest[2] == "[local]"):
        return rest[1]  # a backend: user, database, client address
    return None  # checkpointer, background writer, walwriter, launchers


def postgres_ticks(database):
    """{pid: utime + stime} of the processes named postgres that serve `database` or all databases."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
            if head.split("(", 1)[1] != "postgres" or postgres_database(entry) not in (None, database):
                continue
            fields = tail.split()
            out[int(entry)] = int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)
        except (OSError, IndexError, ValueError):
            continue
    return out


def postgres_delta(before, after):
    """Ticks the postgres processes used between two readings (those started in between count from zero)."""
    return sum(t - before.get(pid, 0) for pid, t in after.items() if t >= before.get(pid, 0))


def main():
    server, client = int(sys.argv[1]), int(sys.argv[2])
    database = sys.argv[4] if sys.argv[3:4] == ["--postgres"] else None
    with_db = database is not None
    start_wall = time.monotonic()
    s0, c0 = proc_cpu_ticks(server) or 0, proc_cpu_ticks(client) or 0
    busy0, total0 = machine_ticks()
    db0 = postgres_ticks(database) if with_db else {}
    peak = rss_kb(server)
    s1, c1, busy1, total1, db1 = s0, c0, busy0, total0, db0
    while True:
        c = proc_cpu_ticks(client)
        if c is None:
            break
        s1, c1 = proc_cpu_ticks(server) or s1, c
        busy1, total1 = machine_ticks()
        if with_db:
            db1 = {**db1, **postgres_ticks(database)}  # an exited backend keeps its last reading
        peak = max(peak, rss_kb(server))
        time.sleep(INTERVAL)
    total = max(total1 - total0, 1)
    server_pct = 100 * (s1 - s0) / total
    client_pct = 100 * (c1 - c0) / total
    db = postgres_delta(db0, db1)
    db_pct = 100 * db / total
    other_pct = max(0.0, 100 * (busy1 - busy0) / total - server_pct - client_pct - db_pct)
    line = (
        f"rss_peak_kb={peak} server_cpu_pct={server_pct:.0f} client_cpu_pct={client_pct:.0f} "
        f"other_cpu_pct={other_pct:.0f} wall_s={time.monotonic() - start_wall:.1f} "
        f"server_cpu_s={(s1 - s0) / TICK:.2f}"
    )
    if with_db:
        line += f" db_cpu_pct={db_pct:.0f} db_cpu_s={db / TICK:.2f}"
    print(line)


if __name__ == "__main__":
    main()
