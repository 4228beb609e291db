package api

// Quota is one of a tenant's limits and its use now.
type Quota struct {
	// Name is one of contexts, contextsPerConversation, volumes,
	// volumeBytes, snapshots, requestsInFlight.
	Name string `json:"name"`
	// Used is the tenant's use: for contextsPerConversation, its busiest
	// conversation's contexts; for requestsInFlight, this request
	// included.
	Used int64 `json:"used"`
	// Limit is the most the daemon allows; absent (0) when unlimited.
	Limit int64 `json:"limit,omitempty"`
	// Description says what is counted, in a sentence.
	Description string `json:"description"`
}

// Usage is the body of GET /v1/usage: the key's tenant's quotas, those
// this daemon enforces (volumes and snapshots only where they are on).
type Usage struct {
	Tenant string  `json:"tenant"`
	Quotas []Quota `json:"quotas"`
}
