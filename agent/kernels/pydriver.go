package kernels

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"strconv"
	"strings"
)

//go:generate python3 compile_driver.py

//go:embed driver.py
var pythonMain string

//go:embed charts.py
var pythonCharts string

//go:embed magics.py
var pythonMagics string

//go:embed ipython.py
var pythonIPython string

// driverPyc is driver.py compiled ahead of time (compile_driver.py): a
// header line naming the python it is for and the driver it was made
// from, then the marshalled code.
//
//go:embed driver.pyc.bin
var driverPyc []byte

// pythonCompiled is the compiled driver a python kernel reads on its
// stdin, nil when driver.pyc.bin was made from another driver.py (a test
// fails then; kernels compile the source, as on other pythons).
// pythonCacheTag is the python it is for (sys.implementation.cache_tag).
var pythonCompiled, pythonCacheTag = compiledDriver(driverPyc, pythonMain)

// pythonBoot is the python kernel's program (-c): the driver's extras (the
// chart reader, the magics and the IPython mode) and its source as string
// constants, then the driver itself, whose last line starts the loop. A
// python whose cache tag is the compiled driver's runs that code, read
// from its stdin (a sealed memfd, then /dev/null as before); any other
// compiles the source. Compiling the driver took 11 to 17 ms of every
// kernel's start on the dev machine (the first result of every new
// sandbox waits on it); the constants cost well under one. Python
// compiles the extras only when a cell needs them. strconv.Quote's
// escapes are all valid in a Python string literal.
var pythonBoot = "_SANDLOT_EXTRAS = " + strconv.Quote(pythonCharts+"\n"+pythonMagics+"\n"+pythonIPython) + "\n" +
	"_SANDLOT_DRIVER = " + strconv.Quote(pythonMain) + "\n" + `import sys


def _sandlot_code():
    import os

    compiled = sys.stdin.buffer.read()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if compiled and sys.implementation.cache_tag == ` + strconv.Quote(pythonCacheTag) + `:
        import marshal

        return marshal.loads(compiled)
    return compile(_SANDLOT_DRIVER, "<string>", "exec")


exec(_sandlot_code())
`

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
