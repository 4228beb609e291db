package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/sandlot/sandlot/errdefs"
)

// The REPL of `sandlot run -i`. A cell is a line; a line ending in \
// continues the cell on the next one. On a terminal, lines are edited with
// golang.org/x/term's line editor (arrows, history, Ctrl-A/E/K/U/W), Ctrl-C
// while a cell runs interrupts the cell (the kernel's interrupt: Python
// raises KeyboardInterrupt, the state stays), Ctrl-C at the prompt drops
// the line, and Ctrl-D or a second Ctrl-C at an empty prompt ends the
// session. Without a terminal (a pipe), cells are read line by line.

// cellFunc runs one cell; canceling ctx interrupts it.
type cellFunc func(ctx context.Context, code string) error

// lrunREPL reads cells from std.In until EOF. A failing cell is reported
// and the loop goes on; the exit status reflects the last cell.
func lrunREPL(ctx context.Context, std IO, lang string, run cellFunc) error {
	intr, release := takeInterrupts(ctx)
	defer release()
	r := &repl{ctx: ctx, std: std, run: run, intr: intr}
	if f, ok := std.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return r.terminal(f, lang)
	}
	return r.lines(lang)
}

type repl struct {
	ctx  context.Context
	std  IO
	run  cellFunc
	intr <-chan struct{} // Ctrl-C while a cell runs
	cell strings.Builder
	last error // the last cell's
}

// line takes one line of input: it ends the cell unless it ends in \.
// more reports that the cell goes on; err ends the session.
func (r *repl) line(line string) (more bool, err error) {
	if s, ok := strings.CutSuffix(line, "\\"); ok {
		r.cell.WriteString(s + "\n")
		return true, nil
	}
	r.cell.WriteString(line)
	code := r.cell.String()
	r.cell.Reset()
	if strings.TrimSpace(code) == "" {
		return false, nil
	}
	return false, r.exec(code)
}

// exec runs one cell; Ctrl-C (r.intr) cancels it, which makes the agent
// interrupt the kernel.
func (r *repl) exec(code string) error {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	var once sync.Once
	interrupted := false
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-r.intr:
			once.Do(func() { interrupted = true })
			cancel()
		case <-stop:
		}
	}()
	err := r.run(ctx, code)
	close(stop)
	<-done
	switch {
	case interrupted:
		fmt.Fprintln(r.std.Err, "\ninterrupted")
		// 130, a shell's status for a command ended by SIGINT.
		r.last = exitedWith(130, fmt.Errorf("cell interrupted: %w", errdefs.ErrFailedPrecondition))
		return nil
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	case err != nil && !errdefs.Categorized(err):
		return err // the sandbox is gone
	case err != nil:
		var ce *codeExit
		if !errors.As(err, &ce) {
			fmt.Fprintln(r.std.Err, "error:", errorMessage(err)) // a local error: its text is for the person at the terminal
		}
	}
	r.last = err
	return nil
}

// lines reads cells from a pipe or file.
func (r *repl) lines(lang string) error {
	in := bufio.NewScanner(r.std.In)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	fmt.Fprintf(r.std.Err, "%s> ", lang)
	for in.Scan() {
		more, err := r.line(in.Text())
		if err != nil {
			return err
		}
		if more {
			fmt.Fprint(r.std.Err, "... ")
		} else {
			fmt.Fprintf(r.std.Err, "%s> ", lang)
		}
	}
	fmt.Fprintln(r.std.Err)
	return r.last
}

// terminal reads cells with the line editor. The terminal is raw only
// while a line is read, so a running cell's Ctrl-C is the tty's SIGINT.
func (r *repl) terminal(in *os.File, lang string) error {
	fd := int(in.Fd())
	keys := &keyReader{r: in}
	var hist term.History
	newTerm := func() *term.Terminal {
		t := term.NewTerminal(struct {
			io.Reader
			io.Writer
		}{keys, r.std.Err}, lang+"> ")
		if hist != nil {
			t.History = hist
		}
		hist = t.History
		return t
	}
	t := newTerm()
	// The terminal stays raw from one ReadLine to the next unless a cell
	// runs: a second Ctrl-C typed right after the first is then a key the
	// editor reads, never a SIGINT of a cooked tty between two reads.
	var cookedState *term.State // non-nil while raw: what to restore
	cooked := func() {
		if cookedState != nil {
			term.Restore(fd, cookedState)
			cookedState = nil
		}
	}
	defer cooked()
	armed := false // a Ctrl-C at the prompt came last, nothing typed since
	for {
		if w, h, err := term.GetSize(fd); err == nil {
			t.SetSize(w, h)
		}
		if cookedState == nil {
			st, err := term.MakeRaw(fd)
			if err != nil {
				return fmt.Errorf("run -i: terminal: %w", err)
			}
			cookedState = st
		}
		keys.start()
		line, err := t.ReadLine()
		ctrlC, typed := keys.seen()
		switch {
		case errors.Is(err, io.EOF) && ctrlC:
			// x/term ends the line on Ctrl-C as on Ctrl-D; it keeps the
			// dropped line, so a fresh editor (same history) follows.
			if armed && !typed {
				cooked()
				fmt.Fprintln(r.std.Err)
				return r.last
			}
			fmt.Fprint(r.std.Err, "^C (Ctrl-C again or Ctrl-D to leave)\r\n") // raw: no newline translation
			armed = true
			r.cell.Reset()
			t = newTerm()
			continue
		case errors.Is(err, io.EOF):
			cooked()
			fmt.Fprintln(r.std.Err)
			return r.last
		case err != nil && !errors.Is(err, term.ErrPasteIndicator):
			return err
		}
		cooked()
		armed = false
		more, err := r.line(line)
		if err != nil {
			return err
		}
		if more {
			t.SetPrompt("... ")
		} else {
			t.SetPrompt(lang + "> ")
		}
	}
}

// keyReader is the terminal's input as the line editor reads it; it notes
// whether a Ctrl-C, and whether any other key, came during one ReadLine.
type keyReader struct {
	r            io.Reader
	mu           sync.Mutex
	ctrlC, typed bool
}

func (k *keyReader) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	k.mu.Lock()
	for _, b := range p[:n] {
		if b == 3 {
			k.ctrlC = true
		} else {
			k.typed = true
		}
	}
	k.mu.Unlock()
	return n, err
}

func (k *keyReader) start() {
	k.mu.Lock()
	k.ctrlC, k.typed = false, false
	k.mu.Unlock()
}

func (k *keyReader) seen() (ctrlC, typed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ctrlC, k.typed
}
