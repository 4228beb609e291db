package build

import (
	"context"
	"io"
)

// Runner runs the command of one RUN step. In sandlot the runtime
// implements it by running the command inside a sandlot sandbox (its own
// user namespace, no host access); a build never runs recipe commands on
// the host. The builder's tests use a chroot runner that exists only for
// them.
type Runner interface {
	Run(ctx context.Context, req RunRequest) (RunResult, error)
}

// RunRequest is one command in a root made of read-only layers plus a
// writable upper directory: mount overlayfs with lowerdir=Lower (top first),
// upperdir=Upper, workdir=Work, redirect_dir=off, metacopy=off, index=off
// (so the upper directory holds plain files, whiteouts and opaque
// directories that layer.Diff understands), then run Args in it.
type RunRequest struct {
	Lower []string // layer trees, top first; read-only
	Upper string   // empty directory: the step's changes land here
	Work  string   // empty directory on Upper's file system (overlay's workdir)

	Args     []string // argv; the shell form is already wrapped ([/bin/sh -c cmd])
	Env      []string // NAME=value
	Dir      string   // working directory, absolute inside the root
	User     string   // as written in the recipe (name or uid[:gid]), for logs
	UID, GID uint32   // the user resolved against the image's /etc/passwd and /etc/group

	Output io.Writer // stdout and stderr, interleaved
	// Tenant is whose build the step is (Options.Tenant): what its
	// network may reach is bounded by that tenant's network cap. "": the
	// operator's.
	Tenant string
}

// RunResult is the outcome of a command that ran.
type RunResult struct {
	ExitCode int
	// HostIDBase is the host id that was uid and gid 0 for the writes in
	// Upper (a sandbox's user namespace range), mapped back by layer.Diff;
	// 0: Config.HostIDBase.
	HostIDBase uint32
}
