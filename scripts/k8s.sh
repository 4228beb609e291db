#!/usr/bin/env bash
# Builds and caches the binaries of the single-node test cluster
# (internal/kubetest) from the Go module proxy: no Docker, no release
# tarballs. Every component is built once into
# $SANDLOT_K8S_CACHE/<name>-<version>/ (default /var/cache/sandlot-k8s), so a
# version bump builds only what changed and the old directory can be removed.
#   scripts/k8s.sh build   build whatever is missing; idempotent, and parallel
#                          callers wait on one lock instead of building twice
#   scripts/k8s.sh env     print NAME=PATH for every binary and the CRD
#                          directory; fails naming what is not built
#   scripts/k8s.sh check   verify only (exit 1 naming what is missing)
#   scripts/k8s.sh prune   remove cached components of other versions
#
# Each component is a small Go module of its own that requires the exact
# version (the proxy refuses version lists for some of these modules, so
# `go install mod@latest` is not an option), then one `go build` of its main
# packages, which share their compilation.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${SANDLOT_K8S_CACHE:-/var/cache/sandlot-k8s}
GO=${GO:-go}

K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
CONTAINERD_VERSION=v2.2.9
CNI_VERSION=v1.10.0
AGENT_SANDBOX_VERSION=v1.0.3
# kube-router only for its NetworkPolicy controller: sigs.k8s.io/kube-network-policies
# queues packets with nftables' `queue` statement, and this kernel is built
# without CONFIG_NFT_QUEUE (docs/kubernetes-test-cluster.md). v2.1.0 is the newest
# kube-router/v2 the module proxy serves.
KUBE_ROUTER_VERSION=v2.1.0
# gVisor's containerd shim comes from the same gVisor as scripts/deps.sh's runsc.
GVISOR_VERSION=$(sed -n 's/^RUNSC_VERSION=//p' scripts/deps.sh)

# components: name version binaries...
components() {
  cat <<EOF
etcd $ETCD_VERSION etcd
containerd $CONTAINERD_VERSION containerd containerd-shim-runc-v2
gvisor-shim $GVISOR_VERSION-oom0 containerd-shim-runsc-v1
cni-plugins $CNI_VERSION bridge host-local loopback portmap
agent-sandbox $AGENT_SANDBOX_VERSION agent-sandbox-controller
kube-router $KUBE_ROUTER_VERSION kube-router
kubernetes $K8S_VERSION kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
EOF
}

log() { echo "k8s.sh: $*" >&2; }

# gomod DIR MODULE... writes a tools module in DIR that requires each
# MODULE@VERSION argument; extra replace lines come on stdin.
gomod() {
  local dir=$1
  shift
  {
    echo "module sandlot.local/k8s-build"
    echo
    echo "go 1.26"
    echo
    for m in "$@"; do echo "require ${m%@*} ${m#*@}"; done
    echo
    cat
  } >"$dir/go.mod"
}

# gobuild DIR LDFLAGS PACKAGE@VERSION... fetches the packages into DIR's
# module, then builds them in one go into DIR/bin.
gobuild() {
  local dir=$1 ldflags=$2
  shift 2
  (
    cd "$dir"
    GOFLAGS=-mod=mod "$GO" get "$@"
    local pkgs=()
    for p in "$@"; do pkgs+=("${p%@*}"); done
    GOFLAGS=-mod=mod "$GO" build -trimpath -ldflags "-s -w $ldflags" -o bin/ "${pkgs[@]}"
  )
}

build_kubernetes() {
  local dir=$1 minor patch mod
  # k8s.io/kubernetes points its staging modules at ./staging; a module that
  # requires it must point them at their published v0.<minor>.<patch>.
  mod=$(cd "$dir" && GOFLAGS=-mod=mod "$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  patch=$(echo "$K8S_VERSION" | cut -d. -f3)
  sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#replace \1 => \1 v0.'"$minor.$patch"'#p' "$mod" |
    gomod "$dir" "k8s.io/kubernetes@$K8S_VERSION"
  # kubectl and the server must agree on the version they print, or kubectl
  # cannot parse the server's.
  local v="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
  v+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  v+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  local pkgs=()
  for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
    pkgs+=("k8s.io/kubernetes/cmd/$b@$K8S_VERSION")
  done
  gobuild "$dir" "$v" "${pkgs[@]}"
}

build_etcd() {
  local dir=$1
  gomod "$dir" "go.etcd.io/etcd/server/v3@$ETCD_VERSION" </dev/null
  gobuild "$dir" "" "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  mv "$dir/bin/v3" "$dir/bin/etcd" 2>/dev/null || mv "$dir/bin/server" "$dir/bin/etcd"
}

build_containerd() {
  local dir=$1
  gomod "$dir" "github.com/containerd/containerd/v2@$CONTAINERD_VERSION" </dev/null
  # CGO off leaves out the btrfs snapshotter (cgo only); overlayfs is what the node uses.
  CGO_ENABLED=0 gobuild "$dir" "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
}

build_gvisor-shim() {
  local dir=$1 src
  gomod "$dir" "gvisor.dev/gvisor@$GVISOR_VERSION" </dev/null
  (cd "$dir" && GOFLAGS=-mod=mod "$GO" mod download gvisor.dev/gvisor)
  # The shim sets its own OOM score to -999, which takes CAP_SYS_RESOURCE;
  # machines that run these tests may lack it (this one does), and the
  # shim then refuses to start. The one change: the shim keeps the score it
  # inherits from containerd, in a copy of the module the build replaces
  # the original with (go build -overlay refuses files in the module cache).
  src=$(cd "$dir" && GOFLAGS=-mod=mod "$GO" list -m -f '{{.Dir}}' gvisor.dev/gvisor)
  cp -r "$src" "$dir/gvisor"
  chmod -R u+w "$dir/gvisor"
  sed -i 's/^\(\s*oomScoreMax\s*=\s*\)-999$/\10/' "$dir/gvisor/pkg/shim/v1/manager.go"
  grep -q '^\s*oomScoreMax\s*=\s*0$' "$dir/gvisor/pkg/shim/v1/manager.go"
  echo "replace gvisor.dev/gvisor => ./gvisor" >>"$dir/go.mod"
  CGO_ENABLED=0 gobuild "$dir" "" "gvisor.dev/gvisor/shim"
  mv "$dir/bin/shim" "$dir/bin/containerd-shim-runsc-v1"
  rm -rf "$dir/gvisor"
}

build_cni-plugins() {
  local dir=$1 p=github.com/containernetworking/plugins/plugins
  gomod "$dir" "github.com/containernetworking/plugins@$CNI_VERSION" </dev/null
  CGO_ENABLED=0 gobuild "$dir" "" "$p/main/bridge@$CNI_VERSION" "$p/ipam/host-local@$CNI_VERSION" \
    "$p/main/loopback@$CNI_VERSION" "$p/meta/portmap@$CNI_VERSION"
}

build_agent-sandbox() {
  local dir=$1 src
  gomod "$dir" "sigs.k8s.io/agent-sandbox@$AGENT_SANDBOX_VERSION" </dev/null
  gobuild "$dir" "" "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller@$AGENT_SANDBOX_VERSION"
  # The CRDs come from the same module version as the controller.
  src=$(cd "$dir" && GOFLAGS=-mod=mod "$GO" list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)
  mkdir -p "$dir/crds"
  cp "$src"/k8s/crds/*.yaml "$dir/crds/"
  chmod 644 "$dir"/crds/*.yaml
}

build_kube-router() {
  local dir=$1
  gomod "$dir" "github.com/cloudnativelabs/kube-router/v2@$KUBE_ROUTER_VERSION" </dev/null
  CGO_ENABLED=0 gobuild "$dir" "" "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
}

# built NAME VERSION BINARIES... succeeds when the component is complete.
built() {
  local dir="$CACHE/$1-$2"
  shift 2
  [ -f "$dir/.done" ] || return 1
  for b in "$@"; do [ -x "$dir/bin/$b" ] || return 1; done
}

build() {
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock"
  if ! flock -n 9; then
    log "another build holds $CACHE/.lock; waiting"
    flock 9
  fi
  local name version bins dir rc total=$SECONDS
  local TIMEFORMAT='%0R s (CPU %0U s user, %0S s system)'
  while read -r name version bins; do
    # shellcheck disable=SC2086
    built "$name" "$version" $bins && continue
    dir="$CACHE/$name-$version"
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    log "building $name $version (log: $dir.tmp/build.log)"
    # set -e holds inside the build only outside a condition, hence rc.
    set +e
    { time (set -e; "build_$name" "$dir.tmp" >"$dir.tmp/build.log" 2>&1); } 2>"$dir.tmp/build.time"
    rc=$?
    set -e
    for b in $bins; do [ -x "$dir.tmp/bin/$b" ] || rc=1; done
    if [ "$rc" != 0 ]; then
      tail -30 "$dir.tmp/build.log" >&2
      log "building $name $version failed"
      exit 1
    fi
    log "built $name $version in $(cat "$dir.tmp/build.time")"
    touch "$dir.tmp/.done"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
  done < <(components)
  log "all components present ($((SECONDS - total)) s)"
}

# env prints NAME=PATH lines (NAME upper case, dashes as underscores).
env_lines() {
  local name version bins fail=0
  while read -r name version bins; do
    # shellcheck disable=SC2086
    if ! built "$name" "$version" $bins; then
      echo "missing: $name $version in $CACHE (scripts/k8s.sh build)" >&2
      fail=1
      continue
    fi
    for b in $bins; do
      echo "$(echo "$b" | tr 'a-z-' 'A-Z_')=$CACHE/$name-$version/bin/$b"
    done
    [ "$name" = agent-sandbox ] && echo "AGENT_SANDBOX_CRDS=$CACHE/$name-$version/crds"
  done < <(components)
  echo "KUBERNETES_VERSION=$K8S_VERSION"
  return $fail
}

# prune removes <name>-<version> directories no component line names (what
# version bumps left), under the build lock.
prune() {
  [ -d "$CACHE" ] || return 0
  exec 9>"$CACHE/.lock"
  flock 9
  local keep name version bins d
  keep=$(components | while read -r name version bins; do echo "$name-$version"; done)
  for d in "$CACHE"/*/; do
    d=$(basename "$d")
    [ -f "$CACHE/$d/.done" ] || [[ "$d" == *.tmp ]] || continue
    if ! grep -qxF "$d" <<<"$keep"; then
      log "removing $CACHE/$d"
      rm -rf "${CACHE:?}/$d"
    fi
  done
}

case "${1:-}" in
build) build ;;
prune) prune ;;
env) env_lines ;;
check) env_lines >/dev/null ;;
*)
  echo "usage: scripts/k8s.sh build|env|check|prune" >&2
  exit 2
  ;;
esac
