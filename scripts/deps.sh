#!/usr/bin/env bash
# Installs what sandlot needs on a fresh Debian machine. Idempotent: it only
# installs what is missing.
#   scripts/deps.sh run   runtime needs (OCI runtime, python3 + data libs, node,
#                         mmdebstrap for the Debian base image)
#   scripts/deps.sh test  the same, plus what the tests need (also gVisor's runsc), and starts Postgres
#   scripts/deps.sh bench the run needs plus the benchmark peers (bwrap, Jupyter)
set -euo pipefail
mode=${1:-run}

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# Node.js may come from a vendor package that bundles npm; a Debian npm
# package would conflict with it, so npm is checked as a command.
have_cmd() { command -v "$1" >/dev/null 2>&1; }
for p in runc crun libseccomp2 ca-certificates python3 python3-numpy python3-pandas python3-matplotlib nodejs; do
  have_pkg "$p" || need+=("$p")
done
# The Debian base image (image/debian) is built with mmdebstrap from the
# Debian mirror; gpg, libdpkg-perl and the archive keyring are only
# Recommends of mmdebstrap but it uses them to find and check the keys.
for p in mmdebstrap gpg libdpkg-perl debian-archive-keyring; do
  have_pkg "$p" || need+=("$p")
done
if [ "$mode" = test ]; then
  # busybox-static: the image builder's tests build on a busybox image
  for p in postgresql bubblewrap python3-ipykernel python3-jupyter-client protobuf-compiler busybox-static; do
    have_pkg "$p" || need+=("$p")
  done
  have_cmd npm || need+=(npm)
fi
if [ "$mode" = bench ]; then
  for p in bubblewrap python3-ipykernel python3-jupyter-client; do
    have_pkg "$p" || need+=("$p")
  done
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "sandlot needs these Debian packages (run as root to install): ${need[*]}" >&2
    exit 1
  fi
  echo "installing: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# verify what the image packages run
have_cmd mmdebstrap || { echo "mmdebstrap is missing (Debian package mmdebstrap)" >&2; exit 1; }
if [ "$mode" = test ]; then
  have_cmd busybox || { echo "busybox is missing (Debian package busybox-static)" >&2; exit 1; }
fi

# gVisor's runsc, for the runtime tests that cover it (sandlot uses it only
# when named). Built from source: gVisor publishes its Go module on the
# "go" branch as pseudo-versions; this one builds with Go 1.26 in about
# 2 minutes on 2 cores (cold cache). Only when missing.
RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237
if [ "$mode" = test ] && ! have_cmd runsc; then
  if [ "$(id -u)" != 0 ]; then
    echo "the tests need gVisor's runsc (run as root to install it)" >&2
    exit 1
  fi
  echo "installing runsc@$RUNSC_VERSION (go install, a few minutes)"
  CGO_ENABLED=0 GOBIN=/usr/local/bin "${GO:-go}" install "gvisor.dev/gvisor/runsc@$RUNSC_VERSION"
fi

if [ "$mode" = test ]; then
  scripts/postgres.sh
  # the official E2B SDKs for e2e/e2b, exactly as package-lock.json pins them
  (cd e2e/e2b && npm ci --no-audit --no-fund --loglevel=error)
fi
