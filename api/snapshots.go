package api

import "time"

// SnapshotRequest is the JSON body of POST /v1/contexts/{id}/snapshots.
type SnapshotRequest struct {
	// Name is the snapshot template's name (1-63 of [a-z0-9_-], free
	// among the tenant's templates); "": "snapshot-" and random letters.
	Name string `json:"name,omitempty"`
}

// Snapshot is a template made from a context's filesystem: its writable
// layer over the template it ran, as it was when the snapshot was taken.
// Start a context from it by its id or name like from any template.
type Snapshot struct {
	// ID is the snapshot template's id.
	ID   string `json:"id"`
	Name string `json:"name"`
	// ContextID is the context it was taken from.
	ContextID string `json:"contextId"`
	// Template is the id of the template that context ran.
	Template string `json:"template"`
	// Bytes is the size of the captured layer (its tarball).
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"createdAt"`
}

// SnapshotList is the body of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// ForkRequest is the JSON body of POST /v1/contexts/{id}/fork: the path
// of the source's conversation the fork goes onto.
type ForkRequest struct {
	// PathID is the new context's path; required, and not the source's
	// own.
	PathID string `json:"pathId"`
}

// ForkResult is the body of a fork: the new context, the snapshot it
// started from, and whether its memory (kernels, variables, processes)
// was carried; false on crun and runc, where the fork's kernels start
// fresh with the source's files.
type ForkResult struct {
	Context  Context  `json:"context"`
	Snapshot Snapshot `json:"snapshot"`
	Memory   bool     `json:"memory"`
}
