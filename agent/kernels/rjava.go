package kernels

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
)

// The r and java kernels' helpers: their interpreters are only in some
// images (the code-interpreter template), and their drivers read framed
// commands rather than JSON.

// utf8Locale adds LANG=C.UTF-8 to env unless it names a locale: R and
// Java read their text encoding from it, and under the POSIX locale R
// prints "é" as "<U+00E9>" and Java's System.out as "?".
func utf8Locale(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "LANG=") || strings.HasPrefix(kv, "LC_ALL=") || strings.HasPrefix(kv, "LC_CTYPE=") {
			return env
		}
	}
	return append(env, "LANG=C.UTF-8")
}

// errMissing marks a kernel whose interpreter the sandbox's image lacks.
var errMissing = errors.New("not installed")

// present reports whether the interpreter at path exists, so that a
// template without it answers with a clear failed_precondition rather
// than a failed exec.
func present(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s is %w in this sandbox", path, errMissing)
	}
	return nil
}

// startError categorises a kernel that did not start: a missing
// interpreter is failed_precondition (the template lacks the language),
// anything else unavailable.
func startError(lang string, err error) error {
	if errors.Is(err, errMissing) {
		return &Error{Category: errdefs.CodeFailedPrecondition, Msg: fmt.Sprintf("no %s kernel: %v", lang, err)}
	}
	return &Error{Category: errdefs.CodeUnavailable, Msg: fmt.Sprintf("start %s kernel: %v", lang, err)}
}

// encodeFramed is the r and java drivers' command: a header line
// "id n nenv", then length-prefixed fields (the length, a newline, the
// bytes): the code, then each env name and value, sorted by name. Neither
// language's standard library reads JSON. NUL bytes are dropped: R strings
// cannot hold them.
func encodeFramed(id int64, n int, code string, env map[string]string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d\n", id, n, len(env))
	field := func(s string) {
		s = strings.ReplaceAll(s, "\x00", "")
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte('\n')
		b.WriteString(s)
	}
	field(code)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field(k)
		field(env[k])
	}
	return []byte(b.String())
}
