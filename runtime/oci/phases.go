package oci

import "time"

// phases times the steps of one create, for the debug log: where a cold
// start's time goes (the id range, the image root, the bundle, the
// runtime binary) without a profiler.
type phases struct {
	start, last time.Time
	names       []string
	took        []time.Duration
}

// mark ends the step called name, which began at the previous mark.
func (p *phases) mark(name string) {
	if p == nil {
		return
	}
	now := time.Now()
	if p.last.IsZero() {
		p.last = p.start
	}
	p.names, p.took = append(p.names, name), append(p.took, now.Sub(p.last))
	p.last = now
}

// attrs are the steps as slog key-value pairs, then the total.
func (p *phases) attrs() []any {
	out := make([]any, 0, 2*len(p.names)+2)
	for i, n := range p.names {
		out = append(out, n, p.took[i])
	}
	return append(out, "total", time.Since(p.start))
}
