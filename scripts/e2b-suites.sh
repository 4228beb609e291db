#!/usr/bin/env bash
# Runs E2B's own JS test suites, unchanged, against `sandlot serve` and prints
# a tally per file and per class (docs/e2b-suites.md).
#
#   scripts/e2b-suites.sh [-s SUITES] [-w WORK] [-u URL -k KEY] [-i IMAGES] [-n] [FILE...]
#
#   -s SUITES  a directory holding E2B's packages/js-sdk/tests and the
#              code interpreter's js/tests; without it both repositories are
#              cloned from GitHub at the pinned commits below
#   -w WORK    scratch directory (npm packages, vitest config, results);
#              default a new temp dir
#   -u, -k     an already running sandlot's URL and E2B API key; without them
#              bin/sandlot serve (make build) is started on a fresh data dir
#   -i IMAGES  image store for that serve (default: its data dir, where the
#              Debian base template is built on first use, which takes minutes)
#   -n         serve with sandbox networks (--network --network-allow-open
#              --e2b-internet, needs root, nftables and openssl): E2B's
#              network, internet access and getHost tests then reach a real
#              sandbox network, and https://<port>-<id>.sandlot.localhost
#              works as on E2B: a throwaway CA signs a wildcard certificate
#              for --tls-addr on port 443 of a free 127.x address, the tests
#              trust it (NODE_EXTRA_CA_CERTS) and resolve *.sandlot.localhost
#              to that address (RFC 6761 loopback names; glibc does not)
#   -t         only print the tally of WORK's results (of an earlier run)
#   FILE...    test files relative to SUITES (default: every file that
#              reaches a server; see classes below)
#
# The suites' test files are not edited: their imports of the SDK's source
# tree ('../src', '../../src/errors', ...) resolve to the npm builds of the
# versions sandlot targets (e2e/e2b/package.json). Classes:
#   server   creates, connects or lists sandboxes: the measured figure
#   cloud    needs E2B's cloud (snapshots, fork, template builds on E2B's
#            builder, volumes): run and counted apart
#   mocked   mocks the API with msw, or tests the SDK's own internals:
#            never reaches sandlot, not run
# Not part of `make test`: the suites are outside code.
set -euo pipefail

E2B_REPO=https://github.com/e2b-dev/E2B
E2B_COMMIT=b8029973aa7da5f741f7bb1a9f833b38a0885438
CI_REPO=https://github.com/e2b-dev/code-interpreter
CI_COMMIT=7df1757bfd5baa037f909ce97c2dbe014da973c0
FILE_TIMEOUT=${FILE_TIMEOUT:-300}

here=$(cd "$(dirname "$0")/.." && pwd)
suites= work= url= key= images= tallyonly= network=
while getopts s:w:u:k:i:nt o; do
  case $o in
    s) suites=$(cd "$OPTARG" && pwd) ;;
    w) work=$OPTARG ;;
    u) url=$OPTARG ;;
    k) key=$OPTARG ;;
    i) images=$OPTARG ;;
    n) network=1 ;;
    t) tallyonly=1 ;;
    *) sed -n '2,36p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
work=${work:-$(mktemp -d /tmp/e2b-suites-XXXX)}
mkdir -p "$work/results"
work=$(cd "$work" && pwd)

tally() {
node - "$work/results" <<'EOF'
// The tally: per file passed/failed/skipped with each failure's first line,
// then totals per class and suite. A file that produced no report (it timed
// out or did not load) counts as one failure.
const fs = require('fs'), path = require('path')
const dir = process.argv[2]
const classes = fs.readFileSync(path.join(dir, 'classes.tsv'), 'utf8').trim().split('\n').map((l) => l.split('\t'))
const sum = {}
const add = (k, p, f, s) => { const t = (sum[k] ||= [0, 0, 0]); t[0] += p; t[1] += f; t[2] += s }
for (const [file, cls] of classes) {
  const suite = file.startsWith('js/') ? 'code-interpreter' : 'js-sdk'
  if (cls !== 'server' && cls !== 'cloud') { add(`${suite} ${cls} (files, not run)`, 1, 0, 0); continue }
  const out = path.join(dir, file.replaceAll('/', '_') + '.json')
  let p = 0, f = 0, s = 0, lines = []
  try {
    const r = JSON.parse(fs.readFileSync(out, 'utf8'))
    for (const t of r.testResults) {
      for (const a of t.assertionResults) {
        if (a.status === 'passed') p++
        else if (a.status === 'failed') { f++; lines.push(`    x ${a.fullName} :: ${(a.failureMessages[0] || '').split('\n')[0].slice(0, 200)}`) }
        else s++
      }
      if (t.assertionResults.length === 0 && t.status === 'failed') { f++; lines.push(`    x (file) ${(t.message || '').split('\n')[0].slice(0, 200)}`) }
    }
  } catch { f = 1; lines.push('    x (no report: timed out or crashed; see the .log)') }
  console.log(`${file}\t${cls}\tpass ${p}\tfail ${f}\tskip ${s}`)
  for (const l of lines) console.log(l)
  add(`${suite} ${cls}`, p, f, s)
}
console.log('\nclass\tpassed\tfailed\tskipped\tpass rate of run tests')
for (const [k, [p, f, s]] of Object.entries(sum).sort()) {
  if (k.includes('not run')) { console.log(`${k}\t${p} files`); continue }
  console.log(`${k}\t${p}\t${f}\t${s}\t${((100 * p) / Math.max(1, p + f)).toFixed(1)}%`)
}
EOF
}
[ -n "$tallyonly" ] && { tally; exit 0; }

clone() { # repo commit dir paths...
  local repo=$1 commit=$2 dir=$3
  shift 3
  git clone -q --filter=blob:none --no-checkout "$repo" "$dir"
  git -C "$dir" sparse-checkout set --no-cone "$@"
  git -C "$dir" checkout -q "$commit"
}
if [ -z "$suites" ]; then
  suites=$work/suites
  mkdir -p "$suites"
  clone "$E2B_REPO" "$E2B_COMMIT" "$suites/e2b" packages/js-sdk/tests
  clone "$CI_REPO" "$CI_COMMIT" "$suites/ci" js/tests
  mv "$suites/e2b/packages" "$suites/ci/js" "$suites/"
fi
[ -d "$suites/packages/js-sdk/tests" ] && [ -d "$suites/js/tests" ] ||
  { echo "no packages/js-sdk/tests and js/tests under $suites" >&2; exit 2; }

# The SDK versions sandlot targets, the runner and what the tests import.
ver() { node -p "require('$here/e2e/e2b/package.json').dependencies['$1']"; }
if [ ! -d "$work/node_modules/vitest" ]; then
  echo '{"name":"e2b-suites","private":true,"type":"module"}' > "$work/package.json"
  (cd "$work" && npm install -q --no-audit --no-fund "e2b@$(ver e2b)" \
    "@e2b/code-interpreter@$(ver @e2b/code-interpreter)" vitest@4.1.12 dotenv@16 msw@2 tar@7 >/dev/null)
fi
ln -sfn "$suites/packages" "$work/packages"
ln -sfn "$suites/js" "$work/js"

cat > "$work/vitest.config.mts" <<'EOF'
// E2B's suites against the npm SDKs: every import of the SDK's source tree
// resolves to the published package (the code interpreter's tests to
// @e2b/code-interpreter). Timeouts are E2B's, doubled for a loaded host.
import { defineConfig } from 'vitest/config'
import path from 'node:path'

const root = path.dirname(new URL(import.meta.url).pathname)
export default defineConfig({
  plugins: [{
    name: 'sdk-source-to-npm',
    enforce: 'pre',
    resolveId(source, importer) {
      if (!importer) return null
      const from = path.join(root, 'package.json')
      // One copy of each SDK, this dir's: the suites may sit elsewhere, and a
      // second e2b would make the tests' instanceof checks fail.
      if (source === 'e2b' || source.startsWith('@e2b/')) return this.resolve(source, from, { skipSelf: true })
      if (!/^(\.\.\/)+(src(\/.*)?|dist\/index\.mjs)$/.test(source)) return null
      const pkg = importer.includes('/js/tests/') ? '@e2b/code-interpreter' : 'e2b'
      return this.resolve(pkg, from, { skipSelf: true })
    },
  }],
  test: {
    root,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    environment: 'node',
    fileParallelism: false,
    env: process.env as Record<string, string>,
    setupFiles: process.env.SUITES_LOOPBACK ? [path.join(root, 'loopback.mjs')] : [],
  },
})
EOF
# With -n: names under .localhost are loopback (RFC 6761), here the
# address the TLS listener has; glibc without nss-myhostname does not say so.
cat > "$work/loopback.mjs" <<'EOF'
import dns from 'node:dns'
const addr = process.env.SUITES_LOOPBACK
const system = dns.lookup
dns.lookup = (host, opts, cb) => {
  if (typeof opts === 'function') { cb = opts; opts = {} }
  if (typeof opts === 'number') opts = { family: opts }
  if (!addr || !String(host).endsWith('.localhost')) return system(host, opts, cb)
  if (opts && opts.all) return process.nextTick(cb, null, [{ address: addr, family: 4 }])
  process.nextTick(cb, null, addr, 4)
}
EOF

cleanup() { :; }
if [ -z "$url" ]; then
  bin=$here/bin/sandlot
  [ -x "$bin" ] || { echo "build first: make build" >&2; exit 2; }
  data=$work/data state=$(mktemp -d /tmp/sl-suites-XXXX)
  mkdir -p "$data"
  args=(serve --addr 127.0.0.1:0 --data-dir "$data" --state-dir "$state" --pool-size 0
    --providers local --max-contexts-per-tenant 100 --max-contexts-per-conversation 100)
  [ -n "$images" ] && args+=(--images-dir "$images")
  if [ -n "$network" ]; then
    command -v openssl >/dev/null || { echo "-n needs openssl" >&2; exit 2; }
    tlsdir=$work/tls
    mkdir -p "$tlsdir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=e2b-suites-ca \
      -keyout "$tlsdir/ca.key" -out "$tlsdir/ca.pem" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=sandlot.localhost \
      -keyout "$tlsdir/tls.key" -out "$tlsdir/tls.csr" 2>/dev/null
    printf 'subjectAltName=DNS:*.sandlot.localhost,DNS:sandlot.localhost\n' > "$tlsdir/ext"
    openssl x509 -req -in "$tlsdir/tls.csr" -CA "$tlsdir/ca.pem" -CAkey "$tlsdir/ca.key" -CAcreateserial \
      -days 2 -extfile "$tlsdir/ext" -out "$tlsdir/tls.crt" 2>/dev/null
    # Port 443 (getHost names no port) of a loopback address no one else uses.
    for _ in $(seq 1 20); do
      loopback=127.$((RANDOM % 200 + 20)).$((RANDOM % 250)).$((RANDOM % 250 + 1))
      ss -Hltn "src $loopback" | grep -q . || break
    done
    args+=(--network --network-allow-open --e2b-internet
      --tls-addr "$loopback:443" --tls-cert "$tlsdir/tls.crt" --tls-key "$tlsdir/tls.key")
    export SUITES_LOOPBACK=$loopback NODE_EXTRA_CA_CERTS=$tlsdir/ca.pem
  fi
  SANDLOT_ADDR= "$bin" "${args[@]}" > "$work/serve.out" 2> "$work/serve.err" &
  serve=$!
  cleanup() { kill "$serve" 2>/dev/null; wait "$serve" 2>/dev/null || true; rm -rf "$state"; }
  trap cleanup EXIT
  for _ in $(seq 1 3600); do # the first Debian build takes minutes
    url=$(sed -n 's/^sandlot listening on //p' "$work/serve.out")
    [ -n "$url" ] && break
    kill -0 "$serve" 2>/dev/null || { cat "$work/serve.err" >&2; exit 1; }
    sleep 0.5
  done
  [ -n "$url" ] || { echo "sandlot serve did not start" >&2; exit 1; }
  key=$(cat "$data/api-key")
fi
export E2B_API_KEY=$key E2B_API_URL=$url E2B_SANDBOX_URL=$url
unset E2B_DEBUG E2B_DOMAIN

classify() { # file (relative to suites) -> class
  local f=$1
  case $f in
    */runtimes/* | */bundle/*) echo skip; return ;;
    */snapshot*.test.ts | */fork.test.ts | */template/* | */volume/*) echo cloud; return ;;
  esac
  if grep -q "from 'msw" "$suites/$f"; then echo mocked; return; fi
  if grep -qE "sandboxTest|Sandbox\.(create|list|connect|kill|getInfo|getMetrics|setTimeout)\(|Template\.(build|exists)\(" "$suites/$f"; then
    echo server
  else
    echo mocked
  fi
}

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(cd "$suites" && find packages/js-sdk/tests js/tests -name '*.test.ts' | sort)
fi
: > "$work/results/classes.tsv"
for f in "${files[@]}"; do
  c=$(classify "$f")
  printf '%s\t%s\n' "$f" "$c" >> "$work/results/classes.tsv"
  [ "$c" = server ] || [ "$c" = cloud ] || continue
  out=$work/results/$(echo "$f" | tr / _).json
  echo "== $f ($c)" >&2
  (cd "$work" && timeout "$FILE_TIMEOUT" npx --no-install vitest run --config vitest.config.mts \
    --reporter=json --outputFile="$out" "$f" > "$out.log" 2>&1) || true
done


tally
