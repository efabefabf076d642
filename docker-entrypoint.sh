#!/bin/sh
# Entry point of the `app` image (web, worker, beat). Each container writes its prometheus-client files to
# its own folder of the shared metrics volume: containers have their own PID namespaces, so two processes
# with the same PID in two containers must not share one file. /metrics sums every folder (collectors/telemetry.py).
set -e
if [ -n "$SPECTATOR_METRICS_DIR" ] && [ -z "$PROMETHEUS_MULTIPROC_DIR" ]; then
    PROMETHEUS_MULTIPROC_DIR="$SPECTATOR_METRICS_DIR/$(hostname)"
    rm -rf "$PROMETHEUS_MULTIPROC_DIR"  # a restarted container starts clean; other containers' totals stay
    mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
    export PROMETHEUS_MULTIPROC_DIR
fi
exec "$@"
