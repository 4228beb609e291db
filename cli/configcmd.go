package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
)

func init() {
	commands = append(commands, func() *cobra.Command {
		cmd := verbGroup("config", "the client config: named contexts, each a server's URL and API key (add-context, use-context, get-contexts, current-context, delete-context)",
			newAddContext(), newUseContext(), newGetContexts(), newCurrentContext(), newDeleteContext())
		cmd.Long = `The client commands (exec, ctx, files, template, shell) find their server in
this order: --url and --api-key, then $SANDLOT_URL and $SANDLOT_API_KEY, then
a context of the client config ($SANDLOT_CONTEXT, else its current context),
then http://127.0.0.1:7423 with the api-key file of --data-dir (.sandlot, where
sandlot serve writes it). The client config is $SANDLOT_CLIENT_CONFIG, else
$XDG_CONFIG_HOME/sandlot/config.yaml, else ~/.config/sandlot/config.yaml;
it is written 0600, and a config or key file others may read is refused.
These contexts name servers; sandlot ctx lists execution contexts.`
		cmd.Example = `  sandlot config add-context local --api-key-file .sandlot/api-key
  sandlot config add-context prod --url https://sandlot.example.com --api-key-file ~/.sandlot-prod-key
  sandlot config use-context prod
  sandlot config get-contexts`
		return cmd
	})
}

// withConfig loads the client config, runs fn on it and, when fn says it
// changed, saves it.
func withConfig(fn func(path string, c *clientConfig) (changed bool, err error)) error {
	path, err := clientConfigPath()
	if err != nil {
		return err
	}
	c, err := loadClientConfig(path)
	if err != nil {
		return err
	}
	changed, err := fn(path, c)
	if err != nil || !changed {
		return err
	}
	return c.save(path)
}

func newAddContext() *cobra.Command {
	cmd := &cobra.Command{Use: "add-context NAME", Aliases: []string{"set-context"}, Short: "add a context (or replace one of that name); the first becomes current",
		Args: cobra.ExactArgs(1),
		Example: `  sandlot config add-context local --api-key-file .sandlot/api-key
  sandlot config add-context prod --url https://sandlot.example.com --api-key-file /etc/sandlot/prod-key --use
  sandlot config add-context ci --url http://10.0.0.5:7423 --api-key "$SANDLOT_API_KEY"`}
	fs := cmd.Flags()
	url := fs.String("url", "http://"+api.DefaultAddr, "the server's URL")
	key := fs.String("api-key", "", "the API key, kept in the config file (0600)")
	keyFile := fs.String("api-key-file", "", "a file holding the API key, read at each use (kept as an absolute path; it must be 0600)")
	use := fs.Bool("use", false, "make it the current context")
	var o output
	o.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name := args[0]
		if *key != "" && *keyFile != "" {
			return usageErr("config add-context: give --api-key or --api-key-file, not both")
		}
		cc := clientContext{URL: *url, Key: *key}
		if *keyFile != "" {
			abs, err := filepath.Abs(*keyFile)
			if err != nil {
				return fmt.Errorf("--api-key-file: %v: %w", err, errdefs.ErrInvalidArgument)
			}
			if err := private(abs, "is an API key file"); err != nil {
				return err
			}
			cc.KeyFile = abs
		}
		if err := cc.check(name); err != nil {
			return err
		}
		current := ""
		err := withConfig(func(_ string, c *clientConfig) (bool, error) {
			if c.Contexts == nil {
				c.Contexts = map[string]clientContext{}
			}
			c.Contexts[name] = cc
			if *use || c.CurrentContext == "" {
				c.CurrentContext = name
			}
			current = c.CurrentContext
			return true, nil
		})
		if err != nil {
			return err
		}
		return printContextChange(cmd, o, name, "added", current)
	}
	return cmd
}

func newUseContext() *cobra.Command {
	cmd := &cobra.Command{Use: "use-context NAME", Short: "make NAME the current context", Args: cobra.ExactArgs(1),
		Example: "  sandlot config use-context prod\n  SANDLOT_CONTEXT=local sandlot ctx ls   # one command on another context"}
	var o output
	o.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		err := withConfig(func(path string, c *clientConfig) (bool, error) {
			if _, ok := c.Contexts[args[0]]; !ok {
				return false, fmt.Errorf("context %q is not in %s; add it with sandlot config add-context: %w", args[0], path, errdefs.ErrNotFound)
			}
			c.CurrentContext = args[0]
			return true, nil
		})
		if err != nil {
			return err
		}
		return printContextChange(cmd, o, args[0], "switched to", args[0])
	}
	return cmd
}

func newDeleteContext() *cobra.Command {
	cmd := &cobra.Command{Use: "delete-context NAME", Aliases: []string{"rm-context"}, Short: "remove a context from the client config", Args: cobra.ExactArgs(1),
		Example: "  sandlot config delete-context ci"}
	var o output
	o.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		current := ""
		err := withConfig(func(path string, c *clientConfig) (bool, error) {
			if _, ok := c.Contexts[args[0]]; !ok {
				return false, fmt.Errorf("context %q is not in %s: %w", args[0], path, errdefs.ErrNotFound)
			}
			delete(c.Contexts, args[0])
			if c.CurrentContext == args[0] {
				c.CurrentContext = ""
			}
			current = c.CurrentContext
			return true, nil
		})
		if err != nil {
			return err
		}
		return printContextChange(cmd, o, args[0], "deleted", current)
	}
	return cmd
}

// printContextChange reports a change to the config.
func printContextChange(cmd *cobra.Command, o output, name, what, current string) error {
	if o.structured() {
		return o.print(cmd.OutOrStdout(), map[string]string{"context": name, "change": what, "currentContext": current})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s context %s", what, name)
	if current != "" && current != name {
		fmt.Fprintf(cmd.OutOrStdout(), " (current: %s)", current)
	}
	fmt.Fprintln(cmd.OutOrStdout())
	return nil
}

// contextView is a context as get-contexts shows it: never its key.
type contextView struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	URL     string `json:"url"`
	Key     string `json:"key"` // where the key is: "in the config", "file PATH" or "none"
}

func newGetContexts() *cobra.Command {
	cmd := &cobra.Command{Use: "get-contexts", Aliases: []string{"contexts", "ls"}, Short: "list the contexts (never their keys)", Args: cobra.NoArgs,
		Example: "  sandlot config get-contexts\n  sandlot config get-contexts -o json"}
	var o output
	o.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var views []contextView
		err := withConfig(func(_ string, c *clientConfig) (bool, error) {
			current, _, _, err := c.selected()
			if err != nil {
				current = c.CurrentContext
			}
			for _, n := range c.names() {
				cc := c.Contexts[n]
				key := "none"
				switch {
				case cc.KeyFile != "":
					key = "file " + cc.KeyFile
				case cc.Key != "":
					key = "in the config"
				}
				views = append(views, contextView{Name: n, Current: n == current, URL: cc.URL, Key: key})
			}
			return false, nil
		})
		if err != nil {
			return err
		}
		if o.structured() {
			if views == nil {
				views = []contextView{}
			}
			return o.print(cmd.OutOrStdout(), views)
		}
		rows := make([][]string, 0, len(views))
		for _, v := range views {
			mark := ""
			if v.Current {
				mark = "*"
			}
			rows = append(rows, []string{mark, v.Name, v.URL, v.Key})
		}
		return table(cmd.OutOrStdout(), []string{"CURRENT", "NAME", "URL", "KEY"}, rows)
	}
	return cmd
}

func newCurrentContext() *cobra.Command {
	cmd := &cobra.Command{Use: "current-context", Short: "print the context the client commands use", Args: cobra.NoArgs,
		Example: "  sandlot config current-context"}
	var o output
	o.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return withConfig(func(path string, c *clientConfig) (bool, error) {
			name, cc, ok, err := c.selected()
			if err != nil {
				return false, err
			}
			if !ok {
				return false, fmt.Errorf("no current context in %s (sandlot config use-context NAME): %w", path, errdefs.ErrNotFound)
			}
			if o.structured() {
				return false, o.print(cmd.OutOrStdout(), map[string]string{"name": name, "url": cc.URL, "source": currentSource()})
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), name)
			return false, err
		})
	}
	return cmd
}

// currentSource says what chose the context: the environment or the file.
func currentSource() string {
	if os.Getenv(envContext) != "" {
		return "$" + envContext
	}
	return "current-context"
}
