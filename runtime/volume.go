package runtime

// Volume is a file system mounted into a sandbox's root at Path: a
// volume of the volumes package, handed over as a detached mount
// (fsmount(2) or open_tree(2)) that the caller keeps open until Create
// returns and closes after. The runtime mounts a clone of it of the
// sandbox's own (id-mapped to the sandbox's user namespace, nosuid,
// nodev; read-only when ReadOnly), so the descriptor is never the
// sandbox's.
type Volume struct {
	FD       int
	Path     string // absolute, clean; volumes.CheckPath
	ReadOnly bool
}
