package cli

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/datadir"
)

// Environment variables the client commands read.
const (
	envURL     = "SANDLOT_URL"
	envAPIKey  = "SANDLOT_API_KEY"
	envDataDir = "SANDLOT_DATA_DIR"
)

// keyFile is the name of the default tenant's key file in the data dir.
const keyFile = datadir.APIKey

// defaultDataDir is $SANDLOT_DATA_DIR, else .sandlot in the working
// directory (where `make run` keeps it).
func defaultDataDir() string {
	if d := os.Getenv(envDataDir); d != "" {
		return d
	}
	return ".sandlot"
}

// remote holds the flags every client command shares: where the server
// is, the key, and the output format.
type remote struct {
	url, key, dataDir string
	out               output
}

// register adds the flags to cmd (and -o, --json).
func (r *remote) register(cmd *cobra.Command) {
	r.registerServer(cmd.Flags())
	r.out.register(cmd)
}

// registerServer adds the flags that find the server and its key.
func (r *remote) registerServer(fs *flag.FlagSet) {
	fs.StringVar(&r.url, "url", "", "server URL (default: $"+envURL+", else the client config's context, else http://"+api.DefaultAddr+")")
	fs.StringVar(&r.key, "api-key", "", "API key (default: $"+envAPIKey+", else the context's, else the api-key file in --data-dir)")
	fs.StringVar(&r.dataDir, "data-dir", defaultDataDir(), "data dir whose api-key file is the last fallback key ($"+envDataDir+")")
}

// endpoint resolves the server and the key, each from the first that
// gives it: the flag, the environment ($SANDLOT_URL, $SANDLOT_API_KEY),
// the client config's context ($SANDLOT_CONTEXT or its current context;
// clientconfig.go), then the local defaults (http://127.0.0.1:7423 and
// the data dir's api-key file, which `sandlot serve` writes at first
// start). A context's key goes only to the context's own URL, so
// --url elsewhere never sends it, and the data dir's key only to a server
// no context named.
func (r *remote) endpoint() (url, key string, err error) {
	url, key = cmp.Or(r.url, os.Getenv(envURL)), cmp.Or(r.key, os.Getenv(envAPIKey))
	fromContext := false
	if url == "" || key == "" {
		path, err := clientConfigPath()
		if err != nil {
			return "", "", err
		}
		cfg, err := loadClientConfig(path)
		if err != nil {
			return "", "", err
		}
		_, cc, ok, err := cfg.selected()
		if err != nil {
			return "", "", err
		}
		if ok {
			if url == "" {
				url, fromContext = cc.URL, true
			}
			if key == "" && strings.TrimRight(url, "/") == strings.TrimRight(cc.URL, "/") {
				if key, err = cc.key(); err != nil {
					return "", "", err
				}
				fromContext = true
			}
		}
	}
	if url == "" {
		url = "http://" + api.DefaultAddr
	}
	if key == "" && !fromContext {
		if b, err := os.ReadFile(filepath.Join(r.dataDir, keyFile)); err == nil {
			key = strings.TrimSpace(string(b))
		}
	}
	return url, key, nil
}

// client is the client of the resolved server (endpoint).
func (r *remote) client() (*client.Client, error) {
	url, key, err := r.endpoint()
	if err != nil {
		return nil, err
	}
	return client.New(url, client.WithAPIKey(key), client.WithUserAgent("sandlot-cli/"+Version())), nil
}

// usageErr is a mistake in what the user asked: invalid_argument.
func usageErr(format string, a ...any) error {
	return fmt.Errorf(format+": %w", append(a, errdefs.ErrInvalidArgument)...)
}

// table writes aligned columns.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// spinner draws on std.Err while something long runs, only when stdout
// is a terminal (never in pipes or scripts). stop erases it; status, when
// set, adds text such as a byte count.
type spinner struct {
	w      io.Writer
	label  string
	mu     sync.Mutex
	status func() string
	done   chan struct{}
	wg     sync.WaitGroup
}

func startSpinner(std IO, label string, status func() string) *spinner {
	s := &spinner{w: std.Err, label: label, status: status}
	if !isTTY(std.Out) || !isTTY(std.Err) {
		return s
	}
	s.done = make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		frames := `|/-\`
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		start := time.Now()
		for i := 0; ; i++ {
			select {
			case <-s.done:
				fmt.Fprint(s.w, "\r\033[K")
				return
			case <-t.C:
			}
			if time.Since(start) < 300*time.Millisecond {
				continue // quick calls never flash a spinner
			}
			extra := ""
			if s.status != nil {
				extra = " " + s.status()
			}
			fmt.Fprintf(s.w, "\r\033[K%c %s%s %.1fs", frames[i%4], s.label, extra, time.Since(start).Seconds())
		}
	}()
	return s
}

func (s *spinner) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		close(s.done)
		s.wg.Wait()
		s.done = nil
	}
}

// countingReader counts bytes for progress.
type countingReader struct {
	r  io.Reader
	mu sync.Mutex
	n  int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.mu.Lock()
	c.n += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *countingReader) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
