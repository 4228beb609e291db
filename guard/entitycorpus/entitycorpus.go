// Package entitycorpus is the labelled corpus the guard's entity detection
// is measured on: letters, records, tables, logs and code, written by hand
// for this purpose (not produced by the model the guard ships), with every
// person, address, organisation, location and date of birth marked, and
// negatives (code, stack traces, library names, DataFrame output, months
// and verbs that are also names). The guard's tests assert the goals on
// it and `sandlot bench` reports it.
//
// Markup: {PERSON:Mary O'Brien}, {ADDRESS:...}, {ORG:...}, {LOC:...},
// {DOB:...}. Everything else is text as it is.
package entitycorpus

import (
	"embed"
	"fmt"
	"strings"

	"github.com/sandlot/sandlot/guard"
)

//go:embed corpus/*.txt
var files embed.FS

// Label is one marked entity: its type and byte offsets in the text.
type Label struct {
	Type       string
	Start, End int
}

// Doc is one file of the corpus.
type Doc struct {
	Name   string
	Text   string
	Labels []Label
}

var tags = map[string]string{
	"PERSON": guard.TypePerson, "ADDRESS": guard.TypeAddress, "ORG": guard.TypeOrganization,
	"LOC": guard.TypeLocation, "DOB": guard.TypeDateOfBirth,
}

// Docs returns the corpus, parsed.
func Docs() ([]Doc, error) {
	ents, err := files.ReadDir("corpus")
	if err != nil {
		return nil, err
	}
	var out []Doc
	for _, e := range ents {
		b, err := files.ReadFile("corpus/" + e.Name())
		if err != nil {
			return nil, err
		}
		d, err := Parse(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		d.Name = e.Name()
		out = append(out, d)
	}
	return out, nil
}

// Parse reads marked-up text. A brace that does not open a known tag is
// text.
func Parse(src string) (Doc, error) {
	var d Doc
	var b strings.Builder
	for {
		i := strings.IndexByte(src, '{')
		if i < 0 {
			b.WriteString(src)
			break
		}
		colon := strings.IndexByte(src[i:], ':')
		end := strings.IndexByte(src[i:], '}')
		typ := ""
		if colon > 0 && end > colon {
			typ = tags[src[i+1:i+colon]]
		}
		if typ == "" {
			b.WriteString(src[:i+1])
			src = src[i+1:]
			continue
		}
		b.WriteString(src[:i])
		start := b.Len()
		b.WriteString(src[i+colon+1 : i+end])
		d.Labels = append(d.Labels, Label{Type: typ, Start: start, End: b.Len()})
		src = src[i+end+1:]
	}
	d.Text = b.String()
	return d, nil
}

// Score is one entity type's figures.
type Score struct {
	Type          string
	Labels, Found int // labelled entities, findings of the type
	TP            int // findings of the type that overlap a label of it
	Hit           int // labels overlapped by a finding of the type
	Misses        []string
	FalseHits     []string
}

// Precision is the share of findings that are labelled entities.
func (s Score) Precision() float64 {
	if s.Found == 0 {
		return 1
	}
	return float64(s.TP) / float64(s.Found)
}

// Recall is the share of labelled entities found as their type.
func (s Score) Recall() float64 {
	if s.Labels == 0 {
		return 1
	}
	return float64(s.Hit) / float64(s.Labels)
}

// Evaluate scans every document with scan and scores each entity type:
// a finding counts when it overlaps a label of its own type.
func Evaluate(docs []Doc, scan func(string) []guard.Finding) []Score {
	by := map[string]*Score{}
	for _, t := range guard.EntityTypes {
		by[t] = &Score{Type: t}
	}
	for _, d := range docs {
		fs := scan(d.Text)
		for _, l := range d.Labels {
			sc := by[l.Type]
			sc.Labels++
			hit := false
			for _, f := range fs {
				if f.Type == l.Type && f.Start < l.End && f.End > l.Start {
					hit = true
				}
			}
			if hit {
				sc.Hit++
			} else {
				sc.Misses = append(sc.Misses, d.Name+": "+d.Text[l.Start:l.End])
			}
		}
		for _, f := range fs {
			sc, ok := by[f.Type]
			if !ok {
				continue
			}
			sc.Found++
			ok = false
			for _, l := range d.Labels {
				if f.Type == l.Type && f.Start < l.End && f.End > l.Start {
					ok = true
				}
			}
			if ok {
				sc.TP++
			} else {
				sc.FalseHits = append(sc.FalseHits, d.Name+": "+d.Text[f.Start:f.End])
			}
		}
	}
	out := make([]Score, 0, len(by))
	for _, t := range guard.EntityTypes {
		out = append(out, *by[t])
	}
	return out
}
