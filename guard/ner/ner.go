// Package ner is the guard's entity model: the named-entity recogniser that
// ships inside github.com/jdkato/prose/v2 (a maximum-entropy classifier over
// the tags of an averaged-perceptron part-of-speech tagger, both trained on
// English news text, weights compiled into the module). Nothing is
// downloaded at run time. The guard runs it only on candidate windows
// (docs/guard.md, "People, places and organisations"); Load is the one
// place that can fail, and a failure leaves the guard on its rules.
package ner

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/jdkato/prose/v2"

	"github.com/sandlot/sandlot/guard"
)

// Name names the model in health output and logs.
const Name = "prose/v2.0.0 en"

// Model is a loaded recogniser. It is safe for concurrent use: prose's
// tagger and classifier only read their weights.
type Model struct {
	m     *prose.Model
	bytes int64
	load  time.Duration
}

var _ guard.Recognizer = (*Model)(nil)

// Load decodes the embedded weights (about 0.7 s and 40 MB of heap). prose
// panics on a decoding error; Load returns it as an error instead.
func Load() (m *Model, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("entity model %s: %v", Name, r)
		}
	}()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	pm := prose.ModelFromData("en")
	d := time.Since(t0)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if b < 0 {
		b = 0 // another goroutine freed more than the model took
	}
	return &Model{m: pm, bytes: b, load: d}, nil
}

// Info implements guard.Recognizer.
func (m *Model) Info() guard.ModelInfo {
	return guard.ModelInfo{Name: Name, Bytes: m.bytes, LoadTime: m.load}
}

// Recognize implements guard.Recognizer: the entities in one window, as
// byte spans of it with the model's labels mapped to the guard's types.
func (m *Model) Recognize(window string) []guard.Span {
	doc, err := prose.NewDocument(window, prose.WithSegmentation(false), prose.UsingModel(m.m))
	if err != nil {
		return nil
	}
	var out []guard.Span
	pos := 0
	open := -1 // index in out of the entity being extended
	for _, tok := range doc.Tokens() {
		k := strings.Index(window[pos:], tok.Text)
		if k < 0 {
			open = -1
			continue // the tokenizer rewrote it (quotes); skip it
		}
		start := pos + k
		end := start + len(tok.Text)
		pos = end
		iob, label, _ := strings.Cut(tok.Label, "-")
		typ := typeOf(label)
		switch {
		case typ == "":
			open = -1
		case iob == "I" && open >= 0 && out[open].Type == typ:
			out[open].End = end
		default:
			out = append(out, guard.Span{Type: typ, Start: start, End: end})
			open = len(out) - 1
		}
	}
	return out
}

// typeOf maps prose's ACE labels to the guard's entity types.
func typeOf(label string) string {
	switch label {
	case "PERSON":
		return guard.TypePerson
	case "ORGANIZATION":
		return guard.TypeOrganization
	case "GPE", "LOCATION", "GSP", "FACILITY":
		return guard.TypeLocation
	}
	return ""
}
