// Package python runs the official E2B Python SDKs (e2b and
// e2b_code_interpreter, installed by scripts/e2b-python.sh) unchanged
// against `sandlot serve`: sdk_suite.py, under Debian's python3.
//
// The daemon runs with sandbox networks, in a network namespace of the
// test's own (nettest.Main) and a mount namespace whose /run/sandlot is
// its own, so it neither touches the machine's network nor meets another
// daemon's networks on the host.
//
// Its tests build only with the pythonsdk tag (`make test-e2b-python`):
// no registry these machines reach serves the SDKs' published source, so
// `make test` cannot install them on a new machine (docs/e2b-suites.md).
package python
