package contexts

import (
	"context"
	"maps"

	"github.com/sandlot/sandlot/internal/logkey"
)

// A sandbox knows whose it is (001 §5.2: Sandbox.create({envs: {TENANT_ID,
// CONVERSATION_ID, PATH_ID}})): the identity of its context is part of its
// environment, for every exec and kernel. A sandbox created for a context
// gets it at create (Spec.Env, under the caller's own variables); one from
// the warm pool, made before anyone owned it, is told when a context
// claims it (envSetter, the agent's env.set), and again whenever the
// manager attaches it, since a provider may hold it on the host side (the
// e2b provider) and forget it with a restart.

// Identity environment variables.
const (
	EnvTenantID       = "TENANT_ID"
	EnvConversationID = "CONVERSATION_ID"
	EnvPathID         = "PATH_ID"
	// EnvUserID is set only when the identity has a user.
	EnvUserID = "USER_ID"
)

// IdentityEnv is the environment that tells a sandbox its context's
// identity.
func IdentityEnv(id Identity) map[string]string {
	env := map[string]string{EnvTenantID: id.TenantID, EnvConversationID: id.ConversationID, EnvPathID: id.PathID}
	if id.UserID != "" {
		env[EnvUserID] = id.UserID
	}
	return env
}

// envSetter is a sandbox whose environment can grow after it started
// (*agent.Client's env.set; the e2b provider's sandbox holds it itself).
type envSetter interface {
	SetEnv(ctx context.Context, env map[string]string) error
}

// createEnv is the environment of a sandbox created for id: its identity
// under the caller's variables (a caller that sets TENANT_ID, as an E2B
// user may in envVars, keeps its value).
func createEnv(id Identity, env map[string]string) map[string]string {
	out := IdentityEnv(id)
	maps.Copy(out, env)
	return out
}

// tellIdentity sets id's identity environment on sb, a sandbox that did
// not start with it. A sandbox that cannot be told is an error only when
// it offers the call and the call fails.
func (m *Manager) tellIdentity(ctx context.Context, sb Sandbox, id Identity) error {
	es, ok := sandboxAs[envSetter](sb)
	if !ok {
		m.log.Debug("sandbox cannot be told its identity", logkey.Sandbox, sb.ID())
		return nil
	}
	return es.SetEnv(ctx, IdentityEnv(id))
}
