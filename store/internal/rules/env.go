package rules

import (
	"fmt"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store/internal/seal"
)

// SealEnv is the env column's value for rec: its Env sealed with box
// (seal.Box.SealEnv). A store without a secrets key keeps no environment
// at rest: "" (the record's Env is then the manager's, in memory, until
// the daemon stops; docs/state.md, "What a wake carries").
func SealEnv(box *seal.Box, rec *contexts.Record) (string, error) {
	if box == nil || len(rec.Env) == 0 {
		return "", nil
	}
	s, err := box.SealEnv(rec.TenantID, rec.ID, rec.Env)
	if err != nil {
		return "", fmt.Errorf("context %s: seal its environment: %w", rec.ID, err)
	}
	return s, nil
}

// OpenEnv sets rec.Env from the env column's value stored. Without a key
// a sealed environment is not read (rec.Env stays nil: a tool that opens
// the store without the key reads records without it); with another key
// it is seal.ErrWrongKey, as a secret's is.
func OpenEnv(box *seal.Box, rec *contexts.Record, stored string) error {
	if stored == "" || box == nil {
		return nil
	}
	env, err := box.OpenEnv(rec.TenantID, rec.ID, stored)
	if err != nil {
		return err
	}
	rec.Env = env
	return nil
}
