# shellcheck shell=bash
# Shared helpers of the bench scripts (sourced).
#
# busy_jiffies CPUS: busy jiffies (user, nice, system, irq, softirq, steal) summed over the
# comma-separated CPU list, from /proc/stat: everything that ran on those CPUs, the kernel's
# softirq work for the traffic included, whichever tool caused it. On a quiet host this is
# the fair per-core figure for both tools; on a shared host it also counts other work.
busy_jiffies() {
  awk -v list="$1" 'BEGIN { n = split(list, c, ","); for (i = 1; i <= n; i++) want["cpu" c[i]] = 1 }
    want[$1] { s += $2 + $3 + $4 + $7 + $8 + $9 } END { print s + 0 }' /proc/stat
}
# busy_cores START_JIFFIES CPUS START_NS: cores' worth of busy time since START.
busy_cores() {
  local now_j now_ns hz
  now_j=$(busy_jiffies "$2"); now_ns=$(date +%s%N); hz=$(getconf CLK_TCK)
  awk -v a="$1" -v b="$now_j" -v t0="$3" -v t1="$now_ns" -v hz="$hz" \
    'BEGIN { s = (t1 - t0) / 1e9; printf "%.3f\n", (s > 0 ? (b - a) / hz / s : 0) }'
}
stats() { # column of numbers -> "median min max"
  sort -g | awk '{a[NR]=$1} END { if (NR == 0) { print "0 0 0"; exit } m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "%.3f %.3f %.3f\n", m, a[1], a[NR]}'
}
load1() { cut -d' ' -f1 /proc/loadavg; }
