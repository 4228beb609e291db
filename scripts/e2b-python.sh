#!/usr/bin/env bash
# Installs the official E2B Python SDKs that e2e/e2b/python runs against
# `sandlot serve`, pinned, into the tests' shared cache (never the repo):
#
#   e2b                   2.33.0  e2b-dev/E2B packages/python-sdk at its release commit
#   e2b-code-interpreter  2.9.0   e2b-dev/code-interpreter python/ at its release commit
#
#   scripts/e2b-python.sh dir                  print the install directory
#   scripts/e2b-python.sh check                exit 0 when it is installed
#   scripts/e2b-python.sh install E2B_GIT CI_GIT
#       E2B_GIT, CI_GIT: git repositories (a clone, bare or not) of
#       e2b-dev/E2B and e2b-dev/code-interpreter that hold the pinned commits
#
# Why not pip: PyPI is not reachable from sandlot's machines, and no
# reachable registry carries these packages, so the source comes from git
# at the release commits PyPI built 2.33.0 and 2.9.0 from (a commit names
# its content). 2.33.0 is the last e2b release before 2.34 moved to
# connectrpc and pyqwest, which no Debian release packages; 2.9.0 is the
# first code interpreter release that honours E2B_SANDBOX_URL, and it
# accepts e2b ^2.26.
#
# Dependencies come from Debian. Where bookworm's package meets the SDK's
# requirement it is a row of scripts/deps.sh (python-dateutil, protobuf
# and h2 for the SDK itself; h11, certifi, idna and sniffio under httpx). Where it does not, the package of Debian 13 (trixie) that
# does is unpacked into the install directory, pinned below, with apt-get
# download and a private apt configuration (the machine's sources are not
# touched): httpx >=0.27 and httpcore >=1.0.5 (bookworm: 0.23.3, 0.16.3),
# attrs >=23.2 (22.2.0), packaging >=24.1 (23.0), and anyio >=4 with
# typing-extensions >=4.5, which httpcore 1.0's asyncio backend needs.
# Three requirements no Debian release meets, all used only by the SDK's
# template builder, which `import e2b` imports and no test calls:
# rich >=14 (bookworm's 13.3.1 is used), wcmatch >=10.1 (bookworm's 8.4)
# and dockerfile-parse, in no Debian release: a stand-in module of ours
# takes its name and raises if Template.from_dockerfile ever calls it.
set -euo pipefail

E2B_VERSION=2.33.0
E2B_COMMIT=8c87016a57da4f02dea58ace6d7a6729e014c173
CI_VERSION=2.9.0
CI_COMMIT=45f181c972fe4f27d0d3c4391d02ade9732f1fbe
TRIXIE_DEBS=(
  python3-httpx=0.28.1-1
  python3-httpcore=1.0.7-1
  python3-anyio=4.8.0-3
  python3-typing-extensions=4.13.2-1
  python3-attr=25.3.0-1
  python3-packaging=25.0-1
)

cache=${SANDLOT_TEST_IMAGES:-/var/cache/sandlot-test}
dir=$cache/e2b-python/e2b-$E2B_VERSION-ci-$CI_VERSION

case "${1:-}" in
dir)
  echo "$dir"
  exit 0
  ;;
check)
  [ -f "$dir/ready" ]
  exit
  ;;
install) ;;
*)
  sed -n '2,13p' "$0" >&2
  exit 2
  ;;
esac
[ -f "$dir/ready" ] && exit 0
if [ $# -ne 3 ]; then
  echo "e2b-python.sh install: give the git repositories of e2b-dev/E2B and e2b-dev/code-interpreter" >&2
  exit 2
fi
e2b_git=$2 ci_git=$3

mkdir -p "$cache/e2b-python"
exec 9>"$cache/e2b-python/lock"
flock 9
[ -f "$dir/ready" ] && exit 0
tmp=$(mktemp -d "$cache/e2b-python/tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
site=$tmp/site
mkdir -p "$site"

# extract REPO COMMIT PATH: the tree at PATH of COMMIT, into $tmp/src.
extract() {
  local repo=$1 commit=$2 path=$3
  if [ "$(git -C "$repo" rev-parse -q --verify "$commit^{commit}" 2>/dev/null)" != "$commit" ]; then
    echo "e2b-python.sh: $repo does not hold commit $commit" >&2
    exit 1
  fi
  mkdir -p "$tmp/src"
  git -C "$repo" archive "$commit" "$path" | tar -x -C "$tmp/src"
}
extract "$e2b_git" "$E2B_COMMIT" packages/python-sdk
extract "$ci_git" "$CI_COMMIT" python/e2b_code_interpreter
grep -q "^version = \"$E2B_VERSION\"" "$tmp/src/packages/python-sdk/pyproject.toml"
mv "$tmp/src/packages/python-sdk/e2b" "$tmp/src/packages/python-sdk/e2b_connect" "$site/"
mv "$tmp/src/python/e2b_code_interpreter" "$site/"

# The installed-package metadata the SDK reads (importlib.metadata).
distinfo() {
  local name=$1 dist=$2 version=$3
  mkdir -p "$site/$dist-$version.dist-info"
  printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' "$name" "$version" >"$site/$dist-$version.dist-info/METADATA"
  echo "sandlot scripts/e2b-python.sh" >"$site/$dist-$version.dist-info/INSTALLER"
}
distinfo e2b e2b "$E2B_VERSION"
distinfo e2b-code-interpreter e2b_code_interpreter "$CI_VERSION"

# Debian 13's packages where bookworm's are too old.
apt=$tmp/apt
mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" >"$apt/sources.list"
aptopts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$apt/lists"
  -o "Dir::Cache=$apt" -o "Dir::Cache::archives=$apt/archives" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
apt-get "${aptopts[@]}" update -qq
(cd "$apt/debs" && apt-get "${aptopts[@]}" download -qq "${TRIXIE_DEBS[@]}")
for deb in "$apt"/debs/*.deb; do
  dpkg-deb -x "$deb" "$tmp/deb"
done
cp -r "$tmp/deb/usr/lib/python3/dist-packages/." "$site/"

# dockerfile-parse, which no Debian release packages (see above).
cat >"$tmp/site/dockerfile_parse.py" <<'EOF'
"""A stand-in for dockerfile-parse, which no Debian release packages.

sandlot's tests run the E2B SDK's sandboxes, commands, files and code;
the SDK imports this module only for Template.from_dockerfile, which they
never call.
"""


class DockerfileParser:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("dockerfile-parse is not installed (sandlot's test install of the E2B SDK)")
EOF

# The install works with Debian's interpreter before it is published.
PYTHONPATH=$site /usr/bin/python3 -c '
import importlib.metadata as md, e2b, e2b_code_interpreter, httpx, httpcore, anyio
assert md.version("e2b") == "'"$E2B_VERSION"'" and md.version("e2b-code-interpreter") == "'"$CI_VERSION"'"
'
rm -rf "$apt" "$tmp/src" "$tmp/deb"
touch "$tmp/ready"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "installed the E2B Python SDKs in $dir"
