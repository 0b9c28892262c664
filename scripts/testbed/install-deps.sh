#!/usr/bin/env bash
# Install the Debian packages the test bed and the runner need, only when missing.
set -euo pipefail
need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v mariadbd >/dev/null || need+=(mariadb-server)
command -v mariadb >/dev/null || need+=(mariadb-client)
command -v sysbench >/dev/null || need+=(sysbench)
command -v openssl >/dev/null || need+=(openssl)
command -v unshare >/dev/null || need+=(util-linux)
command -v kubectl >/dev/null || need+=(kubectl)
command -v rsync >/dev/null || need+=(rsync)
command -v rsvg-convert >/dev/null || need+=(librsvg2-bin)
# Prometheus scrapes the controller pod in e2e; promtool (same package) checks and unit-tests
# deploy/overlays/monitoring's alert rules in `make test`.
command -v prometheus >/dev/null || need+=(prometheus)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
echo "install-deps: apt-get install ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/tidb-bench-apt.XXXXXX.log)
if ! { apt-get update && apt-get install -y --no-install-recommends "${need[@]}"; } >"$log" 2>&1; then
  echo "install-deps: FAILED: apt-get install ${need[*]}; log: $log" >&2
  tail -20 "$log" >&2
  exit 1
fi
# Debian starts services from postinst where it can; the test bed runs its own instances.
# Without systemd, policy-rc.d usually stops them from starting at all; stop them if they did.
for svc in mariadb etcd prometheus; do
  if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then systemctl stop "$svc" || true; fi
done
rm -f "$log"
