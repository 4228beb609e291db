package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

func init() {
	commands["completion"] = command{summary: "print a shell completion script: bash, zsh or fish (e.g. source <(sandlot completion bash))", run: runCompletion}
}

// runCompletion prints a completion script. Command names and verbs are
// written into it; flags are asked of `sandlot CMD [VERB] --help` when
// completing, so the script never goes stale as flags are added.
func runCompletion(ctx context.Context, args []string, std IO) error {
	const use = "usage: sandlot completion bash|zsh|fish"
	if len(args) != 1 {
		return usageErr("completion: name one shell (%s)", use)
	}
	switch args[0] {
	case "-h", "--help", "-help":
		fmt.Fprintln(std.Out, use+"\n\n  bash: source <(sandlot completion bash)\n  zsh:  source <(sandlot completion zsh)\n  fish: sandlot completion fish | source")
		return nil
	case "bash":
		return completionBash(std.Out, "")
	case "zsh":
		// zsh runs bash completion functions through bashcompinit.
		return completionBash(std.Out, "autoload -U +X bashcompinit && bashcompinit\n")
	case "fish":
		return completionFish(std.Out)
	}
	return usageErr("completion: unknown shell %q (%s)", args[0], use)
}

func commandNames() []string {
	names := make([]string, 0, len(commands)+1)
	for n := range commands {
		names = append(names, n)
	}
	names = append(names, "help", "version")
	slices.Sort(names)
	return names
}

func completionBash(w io.Writer, prelude string) error {
	var b strings.Builder
	b.WriteString("# sandlot completion for bash and zsh\n" + prelude)
	b.WriteString("_sandlot() {\n")
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} verb=\n")
	fmt.Fprintf(&b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(commandNames(), " "))
	b.WriteString("\tcase $cmd in\n")
	for _, n := range commandNames() {
		c, ok := commands[n]
		if !ok || len(c.verbs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\t%s)\n\t\tif [ \"$COMP_CWORD\" -eq 2 ]; then\n\t\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\t\treturn\n\t\tfi\n\t\tverb=${COMP_WORDS[2]} ;;\n", n, strings.Join(c.verbs, " "))
	}
	b.WriteString("\tcompletion)\n\t\tCOMPREPLY=($(compgen -W \"bash zsh fish\" -- \"$cur\"))\n\t\treturn ;;\n")
	b.WriteString("\tesac\n")
	b.WriteString("\tif [[ $cur == -* ]]; then\n")
	b.WriteString("\t\tCOMPREPLY=($(compgen -W \"$(\"${COMP_WORDS[0]}\" $cmd $verb --help 2>/dev/null | sed -n 's/^  -\\([a-z0-9-]*\\).*/--\\1/p')\" -- \"$cur\"))\n")
	b.WriteString("\t\treturn\n\tfi\n")
	b.WriteString("\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n")
	b.WriteString("}\ncomplete -o filenames -F _sandlot sandlot\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func completionFish(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# sandlot completion for fish\n")
	b.WriteString("function __sandlot_flags\n")
	b.WriteString("\tset -l words (commandline -opc)\n")
	b.WriteString("\t$words[1] $words[2..3] --help 2>/dev/null | string match -r '^  -[a-z0-9-]+' | string replace -r '^  -' -- '--'\n")
	b.WriteString("end\n")
	b.WriteString("complete -c sandlot -f\n")
	for _, n := range commandNames() {
		summary := "show the version"
		if n == "help" {
			summary = "show a command's help"
		}
		if c, ok := commands[n]; ok {
			summary = c.summary
		}
		fmt.Fprintf(&b, "complete -c sandlot -n __fish_use_subcommand -a %s -d %s\n", n, fishQuote(summary))
		if c, ok := commands[n]; ok && len(c.verbs) > 0 {
			fmt.Fprintf(&b, "complete -c sandlot -n '__fish_seen_subcommand_from %s' -a %s\n", n, fishQuote(strings.Join(c.verbs, " ")))
		}
	}
	b.WriteString("complete -c sandlot -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n")
	b.WriteString("complete -c sandlot -n 'not __fish_use_subcommand' -a '(__sandlot_flags)'\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// fishQuote single-quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
