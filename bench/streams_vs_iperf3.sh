#!/usr/bin/env bash
# Several TCP streams: `daqtune selftest socket --streams N` against N iperf3 client/server
# processes, process i pinned to the CPUs of daqtune's pair i (N = 4 by default; a 100 Gb/s port
# needs about 4 pairs: DAQIRI's Spark figures give 87.3 Gb/s with 4). iperf3 3.12 runs all
# streams of one process in one thread, so `iperf3 -P N` would use one core per side and is not
# a comparison. Same method as bench/selftest_vs_iperf3.sh, which it runs: rotating interleaved
# rounds, load average per run, medians and spread, per-core figures, every payload verified.
#
#   sudo bench/streams_vs_iperf3.sh [RUNS] [SECONDS]        (defaults: 7 rounds of 5 s)
#   sudo STREAMS=8 bench/streams_vs_iperf3.sh 5 5
set -euo pipefail
STREAMS=${STREAMS:-4} exec "$(dirname "$0")/selftest_vs_iperf3.sh" "$@"
