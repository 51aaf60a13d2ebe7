#!/usr/bin/env bash
# Growth (design.md §5: "a page at 1M rows within 1.5× its time at 10k rows"), proved with bench/run.sh.
#
#   bash bench/growth.sh                                   # 10,000 rows, then 1,000,000 rows
#   BENCH_GROWTH_LARGE=100000 BENCH_DURATION=5 bash bench/growth.sh   # a quick smoke run
#
# Runs bench/run.sh twice over the read workloads (groups subscribers, endpoints and notifications): once on a
# database seeded with BENCH_GROWTH_SMALL subscribers, endpoints and notifications (default 10,000), once with
# BENCH_GROWTH_LARGE (default 1,000,000). bench/run.sh keeps the page shapes across sizes (10 endpoints per
# owner, 100 per context, pages of 50 notifications), so each workload reads pages of the same size in both runs.
#
# A page's time is what it costs under the same load: with wrk's fixed connections the machine is saturated, so
# time per page = 1 / req/s. Two ratios are computed, and the verdict takes the larger:
#
#     raw growth        = req/s at SMALL / req/s at LARGE
#     normalised growth = (share of the health-check ceiling at SMALL) / (share at LARGE)
#
# The second cancels a drift of the whole machine between the two runs (this machine's ceiling moves by up to
# ±30 % from minute to minute); the first does not depend on the ceiling. Target: both ≤ 1.5. The table also
# shows the p50 latencies of both runs. Every other BENCH_* setting of
# bench/run.sh applies to both runs (BENCH_DURATION, BENCH_CONNECTIONS, BENCH_DATABASE_URL …; a PostgreSQL
# database must then be empty for each run — use SQLite, the default, unless you know what you are doing).
# The report goes to stdout and to bench/results/growth.md; each run's own report is kept beside it as
# growth-<rows>.md.

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SMALL="${BENCH_GROWTH_SMALL:-10000}"
LARGE="${BENCH_GROWTH_LARGE:-1000000}"
TARGET="1.5"
RESULTS="$REPO_ROOT/bench/results"
mkdir -p "$RESULTS"

log() { printf '==> %s\n' "$*" >&2; }

((SMALL >= 1 && LARGE > SMALL)) || { log "BENCH_GROWTH_LARGE must exceed BENCH_GROWTH_SMALL (>= 1)"; exit 2; }

for rows in "$SMALL" "$LARGE"; do
    log "growth: the read workloads on $rows rows"
    BENCH_ONLY=subscribers,endpoints,notifications \
        BENCH_SUBSCRIBERS="$rows" BENCH_ENDPOINTS="$rows" BENCH_NOTIFICATIONS="$rows" \
        bash "$REPO_ROOT/bench/run.sh" >"$RESULTS/growth-$rows.md"
done

status=0
python3 - "$RESULTS/growth-$SMALL.md" "$RESULTS/growth-$LARGE.md" "$SMALL" "$LARGE" "$TARGET" \
    >"$RESULTS/growth.md" <<'EOF' || status=$?
import sys

small_path, large_path, small, large, target = sys.argv[1:6]
target = float(target)


def rows(path):
    """The workload rows of bench/run.sh's first table: label -> (req/s, p50 ms, share of ceiling %)."""
    out = {}
    for line in open(path, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[4].endswith("%"):
            continue
        try:
            out[cells[0]] = (float(cells[1]), float(cells[2].split()[0]), float(cells[4].rstrip(" %")))
        except ValueError:
            continue  # the header and separator rows
    return out


a, b = rows(small_path), rows(large_path)
commit = next((l.split(":", 1)[1].strip() for l in open(large_path, encoding="utf-8") if l.startswith("- commit:")), "?")
print("# Tidings benchmark: growth")
print()
print(f"- commit: {commit}; the same read workloads seeded with {int(small):,} and {int(large):,} rows")
print(f"- raw growth = req/s at {int(small):,} rows ÷ req/s at {int(large):,} rows; normalised growth = the same "
      f"for each run's share of its own health-check ceiling; the verdict takes the larger (target ≤ {target}×)")
print()
print(f"| workload | req/s at {int(small):,} | req/s at {int(large):,} | p50 at {int(small):,} | p50 at {int(large):,} "
      f"| share at {int(small):,} | share at {int(large):,} | raw growth | normalised growth | target | result |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
failed = False
for label, (rps_a, p50_a, share_a) in a.items():
    if "ceiling" in label or label not in b:
        continue
    rps_b, p50_b, share_b = b[label]
    raw = rps_a / rps_b if rps_b > 0 else float("inf")
    normalised = share_a / share_b if share_b > 0 else float("inf")
    ok = max(raw, normalised) <= target
    failed |= not ok
    print(f"| {label} | {rps_a:,.0f} | {rps_b:,.0f} | {p50_a:.2f} ms | {p50_b:.2f} ms | {share_a:.1f} % "
          f"| {share_b:.1f} % | {raw:.2f}× | {normalised:.2f}× | ≤ {target}× | **{'PASS' if ok else 'FAIL'}** |")


def ceiling(path, table):
    """The ceiling the run's shares are of (its `- ceiling:` line), else its first ceiling row."""
    for line in open(path, encoding="utf-8"):
        if line.startswith("- ceiling:"):
            return float(line.split(":", 1)[1].split()[0])
    return next(v[0] for k, v in table.items() if "ceiling" in k)


print()
print(f"Ceilings: {ceiling(small_path, a):,.0f} req/s at {int(small):,} rows, "
      f"{ceiling(large_path, b):,.0f} req/s at {int(large):,} rows.")
sys.exit(1 if failed else 0)
EOF
[[ -s "$RESULTS/growth.md" ]] || status=2
cat "$RESULTS/growth.md"
exit "$status"
