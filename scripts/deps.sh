#!/usr/bin/env bash
# Installs what sandlot needs on a fresh Debian machine, then verifies that
# every piece is present. Idempotent: it installs only what is missing.
#   scripts/deps.sh run    what the daemon needs (OCI runtimes, python3 + data libs, node)
#   scripts/deps.sh test   the same, plus what the tests need; starts Postgres
#   scripts/deps.sh bench  the run needs plus the benchmark peers (bwrap, Jupyter)
#   scripts/deps.sh check MODE   verify only: install nothing, fail naming what is missing
#
# Every precondition of the product and of its tests is a row of the table
# below: a check that passes when the thing is present, and the Debian
# package that provides it. Packages are installed by name with
# --no-install-recommends, so a row must name the package that holds the file
# itself, never one that only recommends it. A test that needs something new
# gets a row here, or a fresh machine fails where a developer's did not
# (internal/testenv's TestDepsCoverTestBinaries checks the binaries).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-run}
install=1
if [ "$mode" = check ]; then
  install=0
  mode=${2:-test}
fi
case "$mode" in run | test | bench) ;; *)
  echo "usage: scripts/deps.sh run|test|bench|check MODE" >&2
  exit 2
  ;;
esac

# Python modules are checked with the interpreter sandboxes run (Debian's),
# not whatever python3 comes first on PATH.
PY=/usr/bin/python3

# modes (r: run, t: test, b: bench)  check  package
# npm is checked as a command: it ships inside some Node.js vendor packages,
# and a Debian npm would conflict with those.
# mmdebstrap builds the Debian base image (image/debian); it uses gpg,
# libdpkg-perl and the archive keyring but only recommends them.
# busybox: the image builder's tests build on a busybox image.
# curl, nsenter and unshare: the network tests run curl inside a sandbox's
# network namespace; ip runs inside a container joined to one.
# dpkg-deb, systemd-analyze, mount, tar, sha256sum: the release module's
# tests read the package, verify its unit, install it into a Debian root
# made by mmdebstrap and check make dist's checksums.
# bash-completion: the CLI's bash completion script is tested in a real bash,
# which needs the package's helpers as users' shells have them.
# python3-dateutil ... python3-sniffio: the official E2B Python SDK's
# dependencies that bookworm meets, for e2e/e2b/python (the SDK itself and
# the newer packages it needs come from scripts/e2b-python.sh).
# iptables, ipset, nftables, conntrack: the test cluster's kube-proxy (which
# clears stale UDP entries with conntrack), kube-router and
# CNI portmap plugin run them (internal/kubetest; scripts/k8s.sh builds the
# cluster itself).
# python3-httpx, python3-pytest, mypy: the Python SDK (sdk/python) runs on
# httpx, and e2e/sdk tests it with pytest and checks it with mypy --strict.
# chromium: the web console's browser test (e2e/console) drives Debian's
# Chromium headless.
# r-base-core, default-jdk-headless: the r and java kernels' driver tests
# (agent/kernels) run them on the host; sandboxes get them from the
# code-interpreter template's image instead.
rows() {
  cat <<'EOF'
rtb cmd:crun                                          crun
rtb cmd:runc                                          runc
rtb glob:/usr/lib/*/libseccomp.so.2                   libseccomp2
rtb file:/etc/ssl/certs/ca-certificates.crt           ca-certificates
rtb cmd:/usr/bin/python3                              python3
rtb py:numpy                                          python3-numpy
rtb py:pandas                                         python3-pandas
rtb py:matplotlib                                     python3-matplotlib
rtb py:PIL                                            python3-pil
rtb py:IPython                                        python3-ipython
rtb cmd:node                                          nodejs
rtb cmd:mmdebstrap                                    mmdebstrap
rtb cmd:gpg                                           gpg
rtb file:/usr/share/perl5/Dpkg.pm                     libdpkg-perl
rtb file:/usr/share/keyrings/debian-archive-keyring.gpg debian-archive-keyring
t   cmd:npm                                           npm
t   cmd:chromium                                      chromium
tb  cmd:bwrap                                         bubblewrap
tb  py:ipykernel                                      python3-ipykernel
tb  py:jupyter_client                                 python3-jupyter-client
t   cmd:protoc                                        protobuf-compiler
t   file:/usr/include/google/protobuf/timestamp.proto libprotobuf-dev
t   cmd:pg_ctlcluster                                 postgresql-common
t   glob:/usr/lib/postgresql/*/bin/postgres           postgresql
t   cmd:psql                                          postgresql-client
t   cmd:su                                            util-linux
t   cmd:git                                           git
t   cmd:dpkg-deb                                      dpkg
t   cmd:systemd-analyze                               systemd
t   cmd:mount                                         mount
t   cmd:mkfs.ext4                                     e2fsprogs
t   cmd:tar                                           tar
t   cmd:sha256sum                                     coreutils
t   cmd:busybox                                       busybox-static
t   cmd:chroot                                        coreutils
t   cmd:curl                                          curl
t   cmd:nsenter                                       util-linux
t   cmd:unshare                                       util-linux
t   cmd:ip                                            iproute2
t   cmd:bash                                          bash
t   file:/usr/share/bash-completion/bash_completion   bash-completion
t   cmd:Rscript                                       r-base-core
t   cmd:jshell                                        default-jdk-headless
t   py:dateutil                                       python3-dateutil
t   py:google.protobuf                                python3-protobuf
t   py:h2                                             python3-h2
t   py:rich                                           python3-rich
t   py:wcmatch                                        python3-wcmatch
t   py:h11                                            python3-h11
t   py:certifi                                        python3-certifi
t   py:idna                                           python3-idna
t   py:sniffio                                        python3-sniffio
t   py:httpx                                          python3-httpx
t   py:pytest                                         python3-pytest
t   cmd:mypy                                          mypy
t   cmd:iptables                                      iptables
t   cmd:ipset                                         ipset
t   cmd:conntrack                                     conntrack
t   cmd:nft                                           nftables
EOF
}

present() {
  local check=$1
  case "$check" in
  cmd:*) command -v "${check#cmd:}" >/dev/null 2>&1 ;;
  file:*) [ -e "${check#file:}" ] ;;
  glob:*) compgen -G "${check#glob:}" >/dev/null ;;
  py:*) [ -x "$PY" ] && "$PY" -c "import ${check#py:}" >/dev/null 2>&1 ;;
  *)
    echo "deps.sh: unknown check $check" >&2
    return 2
    ;;
  esac
}

# missing prints "check package" for each row of this mode that fails.
missing() {
  local letter=${mode:0:1} modes check pkg
  while read -r modes check pkg; do
    [[ "$modes" == *"$letter"* ]] || continue
    present "$check" || echo "$check $pkg"
  done < <(rows)
}

# background NAME CMD... runs CMD with its output in a file of its own;
# finish NAME waits for it, prints the output and fails when it failed.
# The test mode's long steps run side by side: the cluster's compile is
# bound by the CPU, the images' builds by the network and dpkg. Each runs
# in a session of its own (setsid), so that when deps.sh ends before
# finishing it (a failed step, Ctrl-C) its whole process group, compilers
# and mmdebstrap included, is killed instead of running on unowned; both
# caches mark an entry done only when it is complete.
declare -A bg_pid bg_log
background() {
  local name=$1
  shift
  bg_log[$name]=$(mktemp "${TMPDIR:-/tmp}/sandlot-deps-$name.XXXXXX")
  echo "started: $name in the background (log: ${bg_log[$name]})"
  setsid -w "$@" >"${bg_log[$name]}" 2>&1 &
  bg_pid[$name]=$!
}
unfinished() {
  local name
  for name in "${!bg_pid[@]}"; do
    kill -TERM -- "-${bg_pid[$name]}" 2>/dev/null || true
    echo "scripts/deps.sh: stopped $name (log: ${bg_log[$name]})" >&2
  done
}
trap unfinished EXIT
trap 'exit 130' INT TERM
finish() {
  local name=$1 rc=0
  wait "${bg_pid[$name]}" || rc=$?
  unset "bg_pid[$name]"
  sed "s/^/$name: /" "${bg_log[$name]}"
  rm -f "${bg_log[$name]}"
  if [ "$rc" != 0 ]; then
    echo "scripts/deps.sh: $name failed (exit $rc)" >&2
    exit 1
  fi
}

# the single-node Kubernetes cluster of internal/kubetest, built once per
# machine into /var/cache/sandlot-k8s (about 15 minutes of compiling on a
# new 2-core machine): it needs only Go, so it starts first
if [ "$mode" = test ] && [ "$install" = 1 ] && ! scripts/k8s.sh check 2>/dev/null; then
  background cluster scripts/k8s.sh build
fi

mapfile -t gaps < <(missing)
if [ ${#gaps[@]} -gt 0 ] && [ "$install" = 1 ]; then
  mapfile -t pkgs < <(printf '%s\n' "${gaps[@]##* }" | sort -u)
  if [ "$(id -u)" != 0 ]; then
    echo "sandlot needs these Debian packages (run as root to install them): ${pkgs[*]}" >&2
    exit 1
  fi
  echo "installing: ${pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

# gVisor's runsc, for the runtime tests that cover it (sandlot uses it only
# when named). Built from source: gVisor publishes its Go module on the
# "go" branch as pseudo-versions; this one builds with Go 1.26 in about
# 2 minutes on 2 cores (cold cache). Only when missing.
RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237
if [ "$mode" = test ] && [ "$install" = 1 ] && ! command -v runsc >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "the tests need gVisor's runsc (run as root to install it)" >&2
    exit 1
  fi
  echo "installing runsc@$RUNSC_VERSION (go install, a few minutes)"
  CGO_ENABLED=0 GOBIN=/usr/local/bin "${GO:-go}" install "gvisor.dev/gvisor/runsc@$RUNSC_VERSION"
fi

if [ "$mode" = test ] && [ "$install" = 1 ]; then
  # the Debian images the tests share (image/debian/debiantest), built by
  # mmdebstrap once per machine and recipe while the cluster compiles
  background images "${GO:-go}" run ./internal/cmd/testimages
  scripts/postgres.sh
  # the official E2B SDKs for e2e/e2b, exactly as package-lock.json pins them
  (cd e2e/e2b && npm ci --no-audit --no-fund --loglevel=error)
  # the TypeScript SDK's toolchain and the agent frameworks its tests use
  # (e2e/sdk), exactly as sdk/typescript/package-lock.json pins them
  (cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error)
  # the official E2B Python SDKs for e2e/e2b/python, pinned, into the tests'
  # cache: from git clones of their repositories, as no reachable registry
  # has them (scripts/e2b-python.sh says why and how)
  if ! scripts/e2b-python.sh check && [ -n "${SANDLOT_E2B_GIT:-}" ] && [ -n "${SANDLOT_CODE_INTERPRETER_GIT:-}" ]; then
    scripts/e2b-python.sh install "$SANDLOT_E2B_GIT" "$SANDLOT_CODE_INTERPRETER_GIT"
  fi
  finish images
  [ -z "${bg_pid[cluster]:-}" ] || finish cluster
fi

# Verify: whatever is still missing fails here, named with its package,
# instead of as a puzzling test failure later.
fail=0
while read -r check pkg; do
  [ -n "$check" ] || continue
  echo "missing: ${check#*:} (Debian package $pkg)" >&2
  fail=1
done < <(missing)
if [ "$mode" = test ]; then
  command -v runsc >/dev/null 2>&1 ||
    { echo "missing: runsc (go install gvisor.dev/gvisor/runsc@$RUNSC_VERSION)" >&2; fail=1; }
  for m in e2b @e2b/code-interpreter @e2b/desktop npm; do
    [ -f "e2e/e2b/node_modules/$m/package.json" ] ||
      { echo "missing: npm package $m (cd e2e/e2b && npm ci)" >&2; fail=1; }
  done
  for m in typescript openapi-typescript ai @openai/agents @langchain/core; do
    [ -f "sdk/typescript/node_modules/$m/package.json" ] ||
      { echo "missing: npm package $m (cd sdk/typescript && npm ci)" >&2; fail=1; }
  done
  scripts/k8s.sh check || fail=1
  # Reported, not fatal here: only e2e/e2b/python needs them, and it fails
  # in CI (testenv) naming the same step, while every other test can run.
  scripts/e2b-python.sh check ||
    echo "missing: the E2B Python SDKs in $(scripts/e2b-python.sh dir) (SANDLOT_E2B_GIT=<clone of e2b-dev/E2B> SANDLOT_CODE_INTERPRETER_GIT=<clone of e2b-dev/code-interpreter> scripts/deps.sh test)" >&2
  if [ "$install" = 1 ]; then
    su postgres -c "pg_isready -q" ||
      { echo "missing: a running Postgres cluster (scripts/postgres.sh)" >&2; fail=1; }
  fi
fi
if [ "$fail" = 1 ]; then
  echo "scripts/deps.sh $mode: preconditions missing (above)" >&2
  exit 1
fi
