package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
)

// The client commands' config file holds named contexts: a server's URL
// and the API key to use there, like kubectl's contexts or docker's, so
// the CLI works from any directory and switches between servers by name.
// They are not execution contexts (sandlot ctx); the verbs say
// "add-context", "use-context" as kubectl's do.
//
//	current-context: local
//	contexts:
//	  local:
//	    url: http://127.0.0.1:7423
//	    key-file: /home/me/sandlot/.sandlot/api-key
//	  prod:
//	    url: https://sandlot.example.com
//	    key: e2b_...
//
// The file is $SANDLOT_CLIENT_CONFIG, else $XDG_CONFIG_HOME/sandlot/config.yaml,
// else ~/.config/sandlot/config.yaml. ($SANDLOT_CONFIG is the daemon's
// config file, docs/configuration.md.) It is written 0600, and a file
// that holds a key, or a key file, that others may read is refused, as
// ssh refuses such a private key.
const (
	envClientConfig = "SANDLOT_CLIENT_CONFIG"
	envContext      = "SANDLOT_CONTEXT"
)

// clientConfig is the file.
type clientConfig struct {
	CurrentContext string                   `json:"current-context,omitempty" yaml:"current-context,omitempty"`
	Contexts       map[string]clientContext `json:"contexts,omitempty" yaml:"contexts,omitempty"`
}

// clientContext is one server.
type clientContext struct {
	URL string `json:"url" yaml:"url"`
	// Key is the API key itself; KeyFile a file holding it (the data
	// dir's api-key, say). At most one is set.
	Key     string `json:"key,omitempty" yaml:"key,omitempty"`
	KeyFile string `json:"key-file,omitempty" yaml:"key-file,omitempty"`
}

// clientConfigPath is where the file is (it may not exist).
func clientConfigPath() (string, error) {
	if p := os.Getenv(envClientConfig); p != "" {
		return p, nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no client config directory: set $%s or $HOME: %w", envClientConfig, errdefs.ErrFailedPrecondition)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "sandlot", "config.yaml"), nil
}

// loadClientConfig reads the file at path; a missing file is an empty
// config. Unknown keys are refused with the keys allowed, as every edge
// refuses an unknown field.
func loadClientConfig(path string) (*clientConfig, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &clientConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client config %s: %v: %w", path, err, errdefs.ErrFailedPrecondition)
	}
	var raw any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("client config %s is not YAML: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	if raw == nil {
		return &clientConfig{}, nil
	}
	j, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("client config %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	var c clientConfig
	if err := api.UnmarshalStrict(j, &c); err != nil {
		// A context's fields are one level down; name them when the
		// unknown field is there.
		var ctxs struct {
			Contexts map[string]json.RawMessage `json:"contexts"`
		}
		if json.Unmarshal(j, &ctxs) == nil {
			for name, cj := range ctxs.Contexts {
				var cc clientContext
				if cerr := api.UnmarshalStrict(cj, &cc); cerr != nil {
					return nil, fmt.Errorf("client config %s, context %s: %w", path, name, cerr)
				}
			}
		}
		return nil, fmt.Errorf("client config %s: %w", path, err)
	}
	for name, cc := range c.Contexts {
		if err := cc.check(name); err != nil {
			return nil, fmt.Errorf("client config %s: %w", path, err)
		}
		if cc.Key != "" {
			if err := private(path, "holds the API key of context "+name); err != nil {
				return nil, err
			}
		}
	}
	return &c, nil
}

// check refuses a context without a URL or with two keys.
func (cc clientContext) check(name string) error {
	if cc.URL == "" {
		return fmt.Errorf("context %s has no url: %w", name, errdefs.ErrInvalidArgument)
	}
	if cc.Key != "" && cc.KeyFile != "" {
		return fmt.Errorf("context %s has both key and key-file; keep one: %w", name, errdefs.ErrInvalidArgument)
	}
	return nil
}

// key is the context's API key ("" when it has none).
func (cc clientContext) key() (string, error) {
	if cc.KeyFile == "" {
		return cc.Key, nil
	}
	if err := private(cc.KeyFile, "is an API key file"); err != nil {
		return "", err
	}
	b, err := os.ReadFile(cc.KeyFile)
	if err != nil {
		return "", fmt.Errorf("key file %s: %v: %w", cc.KeyFile, err, errdefs.ErrFailedPrecondition)
	}
	return strings.TrimSpace(string(b)), nil
}

// private refuses a file that others than its owner may read or write.
func private(path, what string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %v: %w", path, err, errdefs.ErrFailedPrecondition)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return errdefs.Sentence(errdefs.ErrFailedPrecondition,
			"%s %s but others may read it (mode %04o); make it private: chmod 600 %s", path, what, m, path)
	}
	return nil
}

// save writes c to path, 0600, through a temporary file and a rename.
func (c *clientConfig) save(path string) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("client config: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("client config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	return nil
}

// names are the contexts' names, sorted.
func (c *clientConfig) names() []string {
	out := make([]string, 0, len(c.Contexts))
	for n := range c.Contexts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// selected is the context the client commands use: $SANDLOT_CONTEXT, else
// the current one. ok is false when neither names one; a name the file
// lacks is not_found.
func (c *clientConfig) selected() (name string, cc clientContext, ok bool, err error) {
	name = os.Getenv(envContext)
	from := "$" + envContext
	if name == "" {
		name, from = c.CurrentContext, "current-context"
	}
	if name == "" {
		return "", clientContext{}, false, nil
	}
	cc, ok = c.Contexts[name]
	if !ok {
		return "", clientContext{}, false, fmt.Errorf("context %q (%s) is not in the client config; see sandlot config get-contexts: %w", name, from, errdefs.ErrNotFound)
	}
	return name, cc, true, nil
}
