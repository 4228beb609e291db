package bench

import (
	"fmt"
	"strings"
	"testing"
)

// TestWarnLog: a warnLog keeps the warnings and errors, and the info
// lines of a sandbox gone, with their attributes, and only the newest
// warnLogKeep of them.
func TestWarnLog(t *testing.T) {
	w := newWarnLog()
	log := w.Logger().With("context_id", "c1")
	log.Info("not kept")
	log.Info("destroying a sandbox no context owns", "sandbox_id", "sb-1")
	log.Warn("suspend an idle context", "err", "checkpoint: busy")
	if got := w.String(); got != "INFO destroying a sandbox no context owns context_id=c1 sandbox_id=sb-1; WARN suspend an idle context context_id=c1 err=checkpoint: busy" {
		t.Fatalf("kept %q", got)
	}
	for i := range warnLogKeep + 5 {
		log.Error(fmt.Sprint("e", i))
	}
	lines := strings.Split(w.String(), "; ")
	if len(lines) != warnLogKeep || !strings.HasPrefix(lines[0], "ERROR e5 ") || !strings.HasPrefix(lines[warnLogKeep-1], fmt.Sprint("ERROR e", warnLogKeep+4, " ")) {
		t.Fatalf("kept %d lines: %q", len(lines), lines)
	}
}
