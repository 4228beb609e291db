package recipe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/sandlot/sandlot/errdefs"
)

// E2BTemplate is the body the E2B SDKs send to start a template build
// (POST /v2/templates/{templateID}/builds/{buildID}), as Template.build
// serializes it.
type E2BTemplate struct {
	FromImage         string           `json:"fromImage,omitempty"`
	FromTemplate      string           `json:"fromTemplate,omitempty"`
	FromImageRegistry *E2BRegistry     `json:"fromImageRegistry,omitempty"`
	StartCmd          string           `json:"startCmd,omitempty"`
	ReadyCmd          string           `json:"readyCmd,omitempty"`
	Steps             []E2BInstruction `json:"steps"`
	Force             bool             `json:"force,omitempty"`
}

// E2BRegistry is fromImageRegistry. Only type "registry" (username and
// password) is supported; "aws" and "gcp" name cloud credentials sandlot
// does not take.
type E2BRegistry struct {
	Type     string `json:"type"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// E2BInstruction is one step. Args by type:
//
//	RUN     [command, user?]           (runCmd, aptInstall, pipInstall, npmInstall, …)
//	COPY    [src, dest, user, mode]    (mode in octal, "" for unchanged)
//	ENV     [name, value, name, value, …]
//	WORKDIR [path]
//	USER    [user]
type E2BInstruction struct {
	Type            string   `json:"type"`
	Args            []string `json:"args"`
	Force           bool     `json:"force,omitempty"`
	FilesHash       string   `json:"filesHash,omitempty"`
	ForceUpload     bool     `json:"forceUpload,omitempty"`
	ResolveSymlinks bool     `json:"resolveSymlinks,omitempty"`
	Gzip            *bool    `json:"gzip,omitempty"`
}

const maxE2B = 1 << 20

// ParseE2B reads an E2B template build body. fromTemplate names a template
// of this sandlot (a store name) and is used as the base image like
// fromImage. COPY sources are relative to the directory where the files
// uploaded for the build were unpacked. Errors name the step (from 1).
func ParseE2B(body []byte) (*Recipe, error) {
	if len(body) > maxE2B {
		return nil, fmt.Errorf("recipe: E2B template over %d bytes: %w", maxE2B, errdefs.ErrInvalidArgument)
	}
	var t E2BTemplate
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("recipe: E2B template: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	return FromE2B(&t)
}

// FromE2B maps a decoded E2B template onto a recipe.
func FromE2B(t *E2BTemplate) (*Recipe, error) {
	from := Step{Kind: From, Image: t.FromImage}
	switch {
	case t.FromImage != "" && t.FromTemplate != "":
		return nil, fmt.Errorf("recipe: E2B template has both fromImage and fromTemplate: %w", errdefs.ErrInvalidArgument)
	case t.FromTemplate != "":
		from.Image = t.FromTemplate
	case t.FromImage == "":
		return nil, fmt.Errorf("recipe: E2B template has no fromImage or fromTemplate: %w", errdefs.ErrInvalidArgument)
	}
	if r := t.FromImageRegistry; r != nil {
		if r.Type != "registry" {
			return nil, fmt.Errorf("recipe: fromImageRegistry type %q is not supported (supported: registry): %w", r.Type, errdefs.ErrInvalidArgument)
		}
		from.RegistryAuth = &RegistryAuth{Username: r.Username, Password: r.Password}
	}
	rec := &Recipe{Steps: []Step{from}, StartCmd: t.StartCmd, ReadyCmd: t.ReadyCmd}
	for i, in := range t.Steps {
		n := i + 1
		st, err := e2bStep(n, in)
		if err != nil {
			return nil, err
		}
		rec.Steps = append(rec.Steps, st)
	}
	return rec, nil
}

func stepErr(n int, format string, a ...any) error {
	return fmt.Errorf("recipe: step %d: %s: %w", n, fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
}

func e2bStep(n int, in E2BInstruction) (Step, error) {
	a := in.Args
	switch in.Type {
	case "RUN":
		if len(a) < 1 || len(a) > 2 || a[0] == "" {
			return Step{}, stepErr(n, "RUN takes [command, user?]")
		}
		st := Step{Kind: Run, Line: n, Command: a[0]}
		if len(a) == 2 {
			st.User = a[1]
		}
		return st, nil
	case "COPY":
		if len(a) < 2 || len(a) > 4 || a[0] == "" || a[1] == "" {
			return Step{}, stepErr(n, "COPY takes [src, dest, user?, mode?]")
		}
		st := Step{Kind: Copy, Line: n, Src: []string{a[0]}, Dest: a[1]}
		if len(a) > 2 {
			st.User = a[2]
		}
		if len(a) > 3 && a[3] != "" {
			m, err := strconv.ParseUint(a[3], 8, 32)
			if err != nil || m > 0o7777 {
				return Step{}, stepErr(n, "COPY mode %q: want octal permission bits", a[3])
			}
			st.Mode = uint32(m)
		}
		return st, nil
	case "ENV":
		if len(a) == 0 || len(a)%2 != 0 {
			return Step{}, stepErr(n, "ENV takes name, value pairs")
		}
		st := Step{Kind: Env, Line: n}
		for i := 0; i < len(a); i += 2 {
			if !validName(a[i]) {
				return Step{}, stepErr(n, "ENV name %q is not valid", a[i])
			}
			st.Env = append(st.Env, EnvVar{a[i], a[i+1]})
		}
		return st, nil
	case "WORKDIR":
		if len(a) != 1 || a[0] == "" {
			return Step{}, stepErr(n, "WORKDIR takes [path]")
		}
		return Step{Kind: Workdir, Line: n, Path: a[0]}, nil
	case "USER":
		if len(a) != 1 || a[0] == "" {
			return Step{}, stepErr(n, "USER takes [user]")
		}
		return Step{Kind: User, Line: n, User: a[0]}, nil
	default:
		return Step{}, stepErr(n, "step type %q is not supported (supported: RUN, COPY, ENV, WORKDIR, USER)", in.Type)
	}
}
