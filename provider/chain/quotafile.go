package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// quotaFile is QuotaConfig.File's content.
type quotaFile struct {
	SavedAt time.Time      `json:"savedAt"`
	Usage   []usageEntry   `json:"usage"`
	Running []runningEntry `json:"running"`
	Warned  []warnedEntry  `json:"warned"`
}

type usageEntry struct {
	Tenant         string  `json:"tenant"`
	Provider       string  `json:"provider"`
	Creations      int64   `json:"creations"`
	ComputeMinutes float64 `json:"computeMinutes"`
}

type runningEntry struct {
	ID       string    `json:"id"` // provider/sandbox id
	Tenant   string    `json:"tenant"`
	Provider string    `json:"provider"`
	Start    time.Time `json:"start"`
}

type warnedEntry struct {
	Tenant    string  `json:"tenant"`
	Provider  string  `json:"provider"`
	Resource  string  `json:"resource"`
	Threshold float64 `json:"threshold"`
}

// maxQuotaFile bounds what load reads: a file the daemon wrote stays far
// below it (one entry per tenant and provider, per running sandbox).
const maxQuotaFile = 64 << 20

// load reads File, when set and present.
func (q *Quota) load() error {
	if q.cfg.File == "" {
		return nil
	}
	f, err := os.Open(q.cfg.File)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("quota file: %w", err)
	}
	defer f.Close()
	var qf quotaFile
	dec := json.NewDecoder(&limitedReader{f, maxQuotaFile})
	if err := dec.Decode(&qf); err != nil {
		return fmt.Errorf("quota file %s: %v: %w", q.cfg.File, err, errdefs.ErrFailedPrecondition)
	}
	for _, u := range qf.Usage {
		*q.usageLocked(key{u.Tenant, u.Provider}) = Usage{Creations: u.Creations, ComputeMinutes: u.ComputeMinutes}
	}
	for _, r := range qf.Running {
		q.running[r.ID] = run{key{r.Tenant, r.Provider}, r.Start}
	}
	for _, w := range qf.Warned {
		q.warned[warnKey{key{w.Tenant, w.Provider}, w.Resource, w.Threshold}] = true
	}
	q.savedAt = qf.SavedAt
	return nil
}

// saveLocked rewrites File. A failure is logged: counting goes on in
// memory, and the next change tries again.
func (q *Quota) saveLocked() {
	if q.cfg.File == "" {
		return
	}
	qf := quotaFile{SavedAt: now().UTC()}
	for k, u := range q.usage {
		qf.Usage = append(qf.Usage, usageEntry{k.tenant, k.provider, u.Creations, u.ComputeMinutes})
	}
	for id, r := range q.running {
		qf.Running = append(qf.Running, runningEntry{id, r.tenant, r.provider, r.start})
	}
	for w := range q.warned {
		qf.Warned = append(qf.Warned, warnedEntry{w.tenant, w.provider, w.resource, w.threshold})
	}
	if err := writeAtomic(q.cfg.File, qf); err != nil {
		q.log.Warn("quota file not written", logkey.Err, err)
		return
	}
	q.savedAt = qf.SavedAt
}

// writeAtomic writes v as JSON to a temporary file beside path and renames
// it over path, so a crash leaves the old file or the new one.
func writeAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".quota-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// limitedReader fails past n bytes instead of ending quietly (a cut JSON
// document would fail to decode anyway, but with a worse message).
type limitedReader struct {
	f interface{ Read([]byte) (int, error) }
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("larger than %d bytes", maxQuotaFile)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}
