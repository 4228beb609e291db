package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
)

func init() {
	commands = append(commands, newWaitCmd)
}

// How `sandlot wait` polls and reports.
const (
	waitPoll  = time.Second
	waitQuiet = 10 * time.Second // a line at least this often while nothing changes
)

func newWaitCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "wait", Short: "wait until the server answers and is ready (its default template built), printing its progress",
		Long: "wait polls the server's /readyz until it is ready: it answers, and its default template has an image (on a\n" +
			"new data dir the first start builds it from Debian's mirror). Meanwhile it prints what the server waits for\n" +
			"(the build's step, packages set up, an estimate). It exits 0 when ready, non-zero when --timeout passes first.",
		Example: "  make run &          # or sandlot serve\n  sandlot wait && export SANDLOT_API_KEY=$(cat .sandlot/api-key)",
		Args:    cobra.NoArgs}
	var r remote
	r.register(cmd)
	timeout := cmd.Flags().Duration("timeout", 20*time.Minute, "give up after this long")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		std := ioOf(cmd)
		if *timeout <= 0 {
			return usageErr("--timeout %s: want a positive duration such as 10m", *timeout)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), *timeout)
		defer cancel()
		url, _, err := r.endpoint()
		if err != nil {
			return err
		}
		c, err := r.client()
		if err != nil {
			return err
		}
		rd, err := waitReady(ctx, c, url, std.Err, *timeout)
		if err != nil {
			return err
		}
		if r.out.structured() {
			return r.out.print(std.Out, rd)
		}
		fmt.Fprintln(std.Out, readyLine(url, rd))
		return nil
	}
	return cmd
}

// waitReady polls /readyz until the server is ready or ctx ends,
// printing the state to w when it changes, and at least every waitQuiet.
func waitReady(ctx context.Context, c *client.Client, url string, w io.Writer, timeout time.Duration) (*api.Readiness, error) {
	start := time.Now()
	var last, lastKey string
	var lastAt time.Time
	// A line when the state's key (what is waited for, its step) changes,
	// else every waitQuiet: counts and estimates change every poll.
	say := func(key, s string) {
		if key != lastKey || time.Since(lastAt) >= waitQuiet {
			fmt.Fprintf(w, "[%s] %s\n", time.Since(start).Round(time.Second), s)
			lastKey, lastAt = key, time.Now()
		}
		last = s
	}
	for {
		rd, err := c.Readiness(ctx)
		switch {
		case err == nil && rd.Ready:
			return rd, nil
		case err == nil:
			say(stateKey(rd), notReadyLine(rd))
		case ctx.Err() != nil:
		case errors.Is(err, errdefs.ErrUnavailable):
			say("no answer", "waiting for the server at "+url+" to answer")
		default:
			return nil, err
		}
		select {
		case <-ctx.Done():
			if last == "" {
				last = "no answer"
			}
			return nil, fmt.Errorf("not ready after %s (%s): %w", timeout, last, errdefs.ErrDeadlineExceeded)
		case <-time.After(waitPoll):
		}
	}
}

// stateKey is what a line is printed at once for when it changes: what is
// waited for, at which stage and step.
func stateKey(rd *api.Readiness) string {
	var b strings.Builder
	for _, w := range rd.Waiting {
		fmt.Fprintf(&b, "%s/%s/%d/%s;", w.What, w.Stage, w.Step, w.Error)
	}
	return b.String()
}

// notReadyLine is what a server that is not ready waits for.
func notReadyLine(rd *api.Readiness) string {
	var parts []string
	for _, w := range rd.Waiting {
		parts = append(parts, workLine(w))
	}
	if len(parts) == 0 {
		var bad []string
		for name, v := range rd.Checks {
			if v != "ok" {
				bad = append(bad, name+" "+v)
			}
		}
		slices.Sort(bad)
		parts = append(parts, strings.Join(bad, ", "))
	}
	return "not ready: " + strings.Join(parts, "; ")
}

// readyLine says the server is ready, which stage serves, and what still
// builds.
func readyLine(url string, rd *api.Readiness) string {
	s := "ready: " + url
	if st := rd.Live["default"]; st != "" {
		s += " (sandboxes start from the default template's " + st + " image"
		for _, w := range rd.Building {
			if w.What == "template default" {
				s += "; " + workLine(w)
			}
		}
		s += ")"
	}
	return s
}

// workLine is one build in a line: "template default, stage core 1/2:
// step 5/10 installing packages, 40/73 packages set up (python3.11), about
// 20s left in this step".
func workLine(w api.Work) string {
	s := w.What
	if w.Stage != "" {
		s += fmt.Sprintf(", stage %s %d/%d", w.Stage, w.StageIndex, w.Stages)
	}
	if w.Error != "" {
		return s + ": " + w.Error
	}
	s += fmt.Sprintf(": step %d/%d %s", w.Step, w.Steps, w.Phase)
	if w.Total > 0 {
		s += fmt.Sprintf(", %d/%d packages set up", w.Done, w.Total)
		if w.Package != "" {
			s += " (" + w.Package + ")"
		}
	}
	if w.ETASeconds > 0 {
		s += fmt.Sprintf(", about %s left in this step", time.Duration(w.ETASeconds)*time.Second)
	}
	return s
}
