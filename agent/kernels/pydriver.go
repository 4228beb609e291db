package kernels

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
)

//go:generate python3 compile_driver.py

//go:embed driver_site.py
var pythonSite string

//go:embed driver_hooks.py
var pythonHooks string

//go:embed driver.py
var pythonDriverMain string

// pythonSource is the driver's program: its three files joined, driver.py
// last (its last line starts the kernel). compile_driver.py joins them the
// same way; TestCompiledDriverCurrent fails if the two ever differ. Joined
// when the first python kernel starts, not in the agent's init.
var pythonSource = sync.OnceValue(func() string {
	return pythonSite + "\n" + pythonHooks + "\n" + pythonDriverMain
})

//go:embed charts.py
var pythonCharts string

//go:embed magics.py
var pythonMagics string

//go:embed ipython.py
var pythonIPython string

// driverPyc is the driver's program compiled ahead of time
// (compile_driver.py): a header line naming the python it is for and the
// program it was made from, then the marshalled code.
//
//go:embed driver.pyc.bin
var driverPyc []byte

// pythonDriver is the compiled driver a python kernel runs, nil when
// driver.pyc.bin was made from another program (a test fails then;
// kernels compile the source, as on other pythons), and the python it is
// for (sys.implementation.cache_tag). Checked once, when the first python
// kernel starts: not in the agent's init, which every sandbox's boot pays.
var pythonDriver = sync.OnceValues(func() ([]byte, string) { return compiledDriver(driverPyc, pythonSource()) })

// pythonBoot is the python kernel's program (-c). It reads the rest from
// its stdin (a sealed memfd, replaced by /dev/null before any cell runs),
// which pythonStdin writes: the compiled driver, the driver's source and
// its extras (the chart reader, the magics and the IPython mode). A python
// whose cache tag is the compiled driver's runs that code; any other
// compiles the source. The extras stay bytes until a cell needs them
// (_extras compiles them).
//
// The program is small on purpose. It used to carry the driver's source
// and the extras as string literals (35 KB): python decodes a -c program
// to wide characters, tokenizes and parses it and keeps the constants, and
// that cost every kernel's start about 600 page faults (1,700 against the
// 1,085 of `python3 -c 'print(1+1)'`) and 7 ms of CPU on the dev machine;
// read from stdin as one bytes object they cost a few pages.
const pythonBoot = `import sys


def _sandlot_boot():
    import os

    data = memoryview(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    end = bytes(data[:256]).index(b"\n")
    _, tag, nc, nd = bytes(data[:end]).split()
    nc = end + 1 + int(nc)
    nd = nc + int(nd)
    globals()["_SANDLOT_EXTRAS"] = bytes(data[nd:])
    if nc > end + 1 and tag.decode() == sys.implementation.cache_tag:
        import marshal

        return marshal.loads(data[end + 1 : nc])
    return compile(bytes(data[nc:nd]), "<string>", "exec")


exec(_sandlot_boot())
`

// pythonStdin is what pythonBoot reads: a header line "sandlot-boot TAG
// CODE DRIVER" (the compiled driver's cache tag, "-" without one, and the
// two lengths in bytes), the compiled driver (compiled, possibly empty),
// the driver's source, then the extras to the end.
func pythonStdin(compiled []byte, tag string) []byte {
	if len(compiled) == 0 || tag == "" {
		compiled, tag = nil, "-"
	}
	main := pythonSource()
	head := fmt.Sprintf("sandlot-boot %s %d %d\n", tag, len(compiled), len(main))
	b := make([]byte, 0, len(head)+len(compiled)+len(main)+len(pythonCharts)+len(pythonMagics)+len(pythonIPython)+2)
	b = append(b, head...)
	b = append(b, compiled...)
	b = append(b, main...)
	b = append(b, pythonCharts...)
	b = append(b, '\n')
	b = append(b, pythonMagics...)
	b = append(b, '\n')
	return append(b, pythonIPython...)
}

// compiledDriver checks the embedded compiled driver against the driver's
// source and returns its code and cache tag, or nil when it does not match.
func compiledDriver(pyc []byte, source string) (code []byte, cacheTag string) {
	header, code, ok := bytes.Cut(pyc, []byte("\n"))
	f := strings.Fields(string(header))
	if !ok || len(f) != 3 || f[0] != "sandlot-driver" || len(code) == 0 {
		return nil, ""
	}
	sum := sha256.Sum256([]byte(source))
	if f[2] != hex.EncodeToString(sum[:]) {
		return nil, ""
	}
	return code, f[1]
}
