// Package recipe reads the build recipes people already write into one step
// list for image/build: a Dockerfile subset (FROM, ARG, RUN, COPY, ENV,
// WORKDIR, USER, CMD, ENTRYPOINT) and the JSON that E2B's Template SDK
// sends to its build endpoint (fromImage, steps of RUN, COPY, ENV, WORKDIR,
// USER; startCmd, readyCmd). Parsing only: nothing here touches a file
// system or runs anything.
package recipe

import (
	"fmt"

	"github.com/sandlot/sandlot/errdefs"
)

// Kind names a step.
type Kind string

const (
	From       Kind = "FROM"       // Image: the base (a store name or registry reference)
	Run        Kind = "RUN"        // Args (exec form) or Command (shell form); User for this step only
	Copy       Kind = "COPY"       // Src (relative to the build context) to Dest; User owns; Mode
	Env        Kind = "ENV"        // Env, in order
	Workdir    Kind = "WORKDIR"    // Path
	User       Kind = "USER"       // User
	Cmd        Kind = "CMD"        // Args or Command: the image's default command
	Entrypoint Kind = "ENTRYPOINT" // Args or Command
)

// Step is one step of a recipe. Which fields a step uses depends on Kind.
type Step struct {
	Kind Kind
	Line int // Dockerfile line, or E2B step number (from 1); 0 when synthesized

	Image string // From

	Command string   // Run, Cmd, Entrypoint in shell form: run with the image's shell
	Args    []string // Run, Cmd, Entrypoint in exec form

	Src  []string // Copy: paths relative to the build context (may hold * ? [] patterns)
	Dest string   // Copy: absolute, or relative to the working directory; a trailing / means a directory
	Mode uint32   // Copy: permission bits for copied files and directories; 0: keep
	// User is the user (name or uid, optionally :group) that owns copied
	// files (Copy), runs this step only (Run), or becomes the image's user
	// (User). Empty: unchanged.
	User string

	Env  []EnvVar // Env
	Path string   // Workdir

	// BuildArgs are the ARG values in scope for a Run step, passed to the
	// command's environment (not kept in the image).
	BuildArgs []EnvVar

	// RegistryAuth holds credentials for a From image (E2B's
	// fromImageRegistry); nil: the default keychain.
	RegistryAuth *RegistryAuth
}

// EnvVar is one environment variable.
type EnvVar struct{ Name, Value string }

// RegistryAuth is a username and password for one registry.
type RegistryAuth struct{ Username, Password string }

// Recipe is a parsed recipe: Steps[0] is the From step.
type Recipe struct {
	Steps []Step
	// StartCmd and ReadyCmd are E2B's start and readiness commands (shell
	// command lines); a Dockerfile's CMD lands in Steps instead.
	StartCmd, ReadyCmd string
	// DockerIgnore: COPY leaves out what the build context's
	// .dockerignore names (a Dockerfile's recipe; an E2B template's
	// client leaves out what it ignores before it uploads).
	DockerIgnore bool
}

// errorf reports a recipe error at a line (or step) as invalid argument.
func errorf(line int, format string, a ...any) error {
	return fmt.Errorf("recipe: line %d: %s: %w", line, fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
}
