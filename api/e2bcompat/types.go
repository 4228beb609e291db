package e2bcompat

import "github.com/sandlot/sandlot/contexts"

// The Manager API types, named here so the Manager interface reads alone.
type (
	CreateOptions  = contexts.CreateOptions
	ExecuteRequest = contexts.ExecuteRequest
	ExecuteResult  = contexts.ExecuteResult
)
