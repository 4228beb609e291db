package ner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/guard/ner"
)

func load(t *testing.T) *ner.Model {
	t.Helper()
	m, err := ner.Load()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRecognize: spans are byte offsets of the window, labelled with the
// guard's types, over non-ASCII names too.
func TestRecognize(t *testing.T) {
	m := load(t)
	if info := m.Info(); info.Name == "" || info.Bytes < 1<<20 {
		t.Errorf("info = %+v", info)
	}
	w := "Yesterday Siobhán Ní Bhriain flew from Seattle with Patrick Murphy."
	found := map[string]string{}
	for _, sp := range m.Recognize(w) {
		if sp.Start < 0 || sp.End > len(w) || sp.Start >= sp.End {
			t.Fatalf("span %+v outside %q", sp, w)
		}
		found[w[sp.Start:sp.End]] = sp.Type
	}
	for text, typ := range map[string]string{"Seattle": guard.TypeLocation, "Patrick": guard.TypePerson, "Siobhán": guard.TypePerson} {
		if found[text] != typ {
			t.Errorf("%q: %q, want %q (all: %v)", text, found[text], typ, found)
		}
	}
}

// TestStreamSplitWithModel: with the model on, a stream split anywhere
// gives Text's output: an entity split across two writes is still found.
func TestStreamSplitWithModel(t *testing.T) {
	g, err := guard.New(guard.Config{Model: load(t), ModelBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	text := "log line one\nMeeting with Colm Delaney and Wojciech Nowak of Enterprise Ireland in Athlone at 10:30.\n" +
		"Ship to Robert Jenkins, 1600 Maple Avenue, Springfield, IL 62704 by Friday.\n"
	want := g.Text(ctx, "t", text)
	for _, v := range []string{"Wojciech", "Jenkins", "Maple"} {
		if strings.Contains(want, v) {
			t.Fatalf("Text left %q: %q", v, want)
		}
	}
	for i := 0; i <= len(text); i++ {
		st := g.Stream(ctx, "t")
		got := st.Write(text[:i])
		got += st.Write(text[i:])
		got += st.Flush()
		if got != want {
			t.Fatalf("split at %d:\n got %q\nwant %q", i, got, want)
		}
	}
}

// TestConcurrent: one model serves many goroutines (every stream of the
// daemon shares it); run with -race.
func TestConcurrent(t *testing.T) {
	m := load(t)
	want := len(m.Recognize("Patrick Murphy flew from Seattle to Cork."))
	done := make(chan int)
	for i := 0; i < 4; i++ {
		go func() {
			n := 0
			for k := 0; k < 20; k++ {
				n = len(m.Recognize("Patrick Murphy flew from Seattle to Cork."))
			}
			done <- n
		}()
	}
	for i := 0; i < 4; i++ {
		if n := <-done; n != want {
			t.Errorf("concurrent Recognize found %d spans, alone %d", n, want)
		}
	}
}
