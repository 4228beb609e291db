package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/doctor"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime/oci"
)

func init() {
	commands = append(commands, newDoctorCmd)
}

// doctorFlags are the serve settings doctor checks the host for, under
// serve's names, so --config, $SANDLOT_<NAME> and a config file give both
// commands the same values.
type doctorFlags struct {
	configFile    string
	store         storeFlags
	runtime       string
	imagesDir     string
	image         string
	network       bool
	stateDir      string
	moreStateDirs []string
	fix           bool
	out           output
}

func newDoctorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "check whether this host can run sandlot, and say what to fix",
		Long: `Checks the kernel, user namespaces, cgroups and their controllers, overlayfs, seccomp,
nftables, each OCI runtime (crun, runc, runsc) and its version, the data dir's free space, the store
(opened read-only; its schema against this binary's), the default template, and the sandbox cgroups
left over by a daemon killed before its teardown (empty, and owned by no sandbox of --state-dir), for
the settings serve would run with (the same flags, $SANDLOT_<NAME> variables and --config file).
Nothing is changed, unless --fix: it removes those left-over cgroups first (rmdir of empty sandbox
cgroups only, first seen over a minute ago; links are not followed) and says which.

Exit status: 0 when every required check passes (warnings do not fail), 1 when one fails.`,
		Args: cobra.NoArgs,
		Example: `  sudo sandlot doctor
  sudo sandlot doctor --config /etc/sandlot/config.yaml
  sudo sandlot doctor --runtime crun --network --json
  sandlot doctor -o yaml
  sudo sandlot doctor --fix --state-dir /run/sandlot`,
	}
	var f doctorFlags
	fs := cmd.Flags()
	fs.StringVar(&f.configFile, "config", os.Getenv(envConfig), "serve's config file, whose keys set these flags ($"+envConfig+")")
	f.store.register(fs)
	fs.StringVar(&f.runtime, "runtime", "auto", "OCI runtime serve uses: auto (crun or runc), crun, runc, runsc")
	fs.StringVar(&f.imagesDir, "images-dir", "", "image store of the templates (default DATA_DIR/images)")
	fs.StringVar(&f.image, "default-image", daemon.DefaultImageDebian, "serve's default template: debian or none")
	fs.BoolVar(&f.network, "network", false, "serve runs with --network: nftables is required")
	fs.StringVar(&f.stateDir, "state-dir", oci.DefaultStateDir, "serve's state dir: its sandboxes own their cgroups")
	fs.StringArrayVar(&f.moreStateDirs, "more-state-dir", nil, "the state dir of another daemon on this host, whose sandboxes own their cgroups too (repeatable)")
	fs.BoolVar(&f.fix, "fix", false, "remove the empty sandbox cgroups no sandbox of --state-dir (or --more-state-dir) owns, then check")
	f.out.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if _, err := applyConfig(fs, f.configFile, serveKeys()); err != nil {
			return err
		}
		return runDoctor(cmd.Context(), ioOf(cmd), f)
	}
	return cmd
}

// removeStrayCgroups is doctor.RemoveStrayCgroups (tests replace it).
var removeStrayCgroups = doctor.RemoveStrayCgroups

// runDoctor prints the report; a failed one exits 1 with no error line
// (the report said why).
func runDoctor(ctx context.Context, std IO, f doctorFlags) error {
	// A state dir that is not one (mistyped, missing) would protect
	// nothing: the other daemon's stopped sandboxes would look stray.
	for i, d := range f.moreStateDirs {
		abs, err := filepath.Abs(d)
		if err == nil {
			_, err = os.Stat(filepath.Join(abs, "bundles"))
		}
		if d == "" || err != nil {
			return fmt.Errorf("--more-state-dir %q is no daemon's state dir (no bundles/ in it): %w", d, errdefs.ErrInvalidArgument)
		}
		f.moreStateDirs[i] = abs
	}
	cfg := doctor.Config{
		Runtime: f.runtime, DataDir: f.store.dataDir, StoreURL: f.store.url,
		ImagesDir: f.imagesDir, DefaultImage: f.image, Network: f.network, StateDir: f.stateDir,
		MoreStateDirs: f.moreStateDirs,
	}
	// A failed --fix still prints the report (it counts what is left),
	// then ends with the removal's error.
	var fixErr error
	if f.fix {
		removed, err := removeStrayCgroups(cfg)
		// Said on stderr: stdout holds the report, which -o json parses.
		if werr := doctor.WriteRemoved(std.Err, removed); werr != nil {
			return werr
		}
		if err != nil {
			fixErr = fmt.Errorf("doctor --fix: %v: %w", err, errdefs.ErrFailedPrecondition)
		}
	}
	rep := doctor.Run(ctx, cfg)
	var err error
	if f.out.structured() {
		err = f.out.print(std.Out, rep)
	} else {
		err = rep.WriteText(std.Out)
	}
	if err != nil {
		return err
	}
	if fixErr != nil {
		return fixErr
	}
	if !rep.OK {
		return &codeExit{status: 1, err: errDoctorFailed}
	}
	return nil
}

var errDoctorFailed = doctorError("a required check failed")

type doctorError string

func (e doctorError) Error() string { return string(e) }
