package api

import "time"

// Volume is a tenant's volume (docs/volumes.md).
type Volume struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	SizeBytes int64     `json:"sizeBytes"`
	CreatedAt time.Time `json:"createdAt"`
	// UsedBytes is what the volume holds of the host's disk (its file's
	// blocks); GET of one volume only.
	UsedBytes int64 `json:"usedBytes,omitempty"`
	// MountedBy are the live contexts that mount it; GET of one volume
	// only. A volume some context mounts cannot be deleted.
	MountedBy []string `json:"mountedBy,omitempty"`
}

// VolumeList is GET /v1/volumes.
type VolumeList struct {
	Volumes []Volume `json:"volumes"`
}

// VolumeRequest is POST /v1/volumes.
type VolumeRequest struct {
	// Name is unique per tenant: 1-63 of a-z, 0-9, _ and -, starting with
	// a letter or digit.
	Name string `json:"name"`
	// SizeBytes is the volume's size (0: the daemon's default, 1 GiB);
	// at least 16 MiB, at most the daemon's per-volume bound.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
}
