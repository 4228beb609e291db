package api

import "time"

// APIKey is one of a tenant's API keys as GET /v1/keys lists it: never
// the key, which only POST /v1/keys's answer holds, once.
type APIKey struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	// Current is true for the key the request was made with.
	Current bool `json:"current,omitempty"`
}

// APIKeyList is the body of GET /v1/keys, oldest first.
type APIKeyList struct {
	Keys []APIKey `json:"keys"`
}

// APIKeyRequest is the body of POST /v1/keys.
type APIKeyRequest struct {
	// Name labels the key (at most 64 bytes, no control characters).
	Name string `json:"name,omitempty"`
}

// APIKeyCreated is POST /v1/keys's answer: the new key, shown this once.
type APIKeyCreated struct {
	APIKey
	Key string `json:"key"`
}
