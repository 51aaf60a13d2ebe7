#!/usr/bin/env python3
"""Samples the server while one load-generator run is in progress (used by bench/run.sh).

usage: sample.py SERVER_PID CLIENT_PID

Every 200 ms until CLIENT_PID exits it reads the server's RSS (/proc/PID/status VmRSS) and the CPU time of
the server, the client and the whole machine (/proc/PID/stat, /proc/stat). At the end it prints one line:

    rss_peak_kb=… server_cpu_pct=… client_cpu_pct=… other_cpu_pct=… wall_s=…

CPU percentages are shares of the whole machine (all cores) over the run. `other_cpu_pct` is process time that
neither the server nor the load generator used (plus hypervisor steal): other work competing for the cores,
which skews the figures.
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


def main():
    server, client = int(sys.argv[1]), int(sys.argv[2])
    start_wall = time.monotonic()
    s0, c0 = proc_cpu_ticks(server) or 0, proc_cpu_ticks(client) or 0
    busy0, total0 = machine_ticks()
    peak = rss_kb(server)
    s1, c1, busy1, total1 = s0, c0, busy0, total0
    while True:
        c = proc_cpu_ticks(client)
        if c is None:
            break
        s1, c1 = proc_cpu_ticks(server) or s1, c
        busy1, total1 = machine_ticks()
        peak = max(peak, rss_kb(server))
        time.sleep(INTERVAL)
    total = max(total1 - total0, 1)
    server_pct = 100 * (s1 - s0) / total
    client_pct = 100 * (c1 - c0) / total
    other_pct = max(0.0, 100 * (busy1 - busy0) / total - server_pct - client_pct)
    print(
        f"rss_peak_kb={peak} server_cpu_pct={server_pct:.0f} client_cpu_pct={client_pct:.0f} "
        f"other_cpu_pct={other_pct:.0f} wall_s={time.monotonic() - start_wall:.1f}"
    )


if __name__ == "__main__":
    main()
