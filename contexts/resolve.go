package contexts

import (
	"fmt"
	"unicode"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/errdefs"
)

// Resolve applies the identity rules of session reuse: pathId defaults to
// "main"; the session key is an explicit taskId when one is given, else the
// conversationId, else a new UUID (generated=true) that the caller must
// return to its client. The task comes first because a task names the unit
// of work whose state must persist, even when it spans conversations.
func Resolve(tenantID, conversationID, pathID, taskID string) (id Identity, generated bool) {
	if pathID == "" {
		pathID = DefaultPath
	}
	if taskID != "" {
		conversationID = taskID
	}
	if conversationID == "" {
		conversationID = uuid.NewString()
		generated = true
	}
	return Identity{TenantID: tenantID, ConversationID: conversationID, PathID: pathID}, generated
}

// maxIDLen bounds each identity component.
const maxIDLen = 256

// normalize fills the default path and validates id.
func normalize(id Identity) (Identity, error) {
	if id.PathID == "" {
		id.PathID = DefaultPath
	}
	for _, f := range []struct{ name, v string }{
		{"tenantId", id.TenantID}, {"conversationId", id.ConversationID}, {"pathId", id.PathID},
	} {
		if f.v == "" {
			return id, fmt.Errorf("%s is required: %w", f.name, errdefs.ErrInvalidArgument)
		}
		if len(f.v) > maxIDLen {
			return id, fmt.Errorf("%s is longer than %d bytes: %w", f.name, maxIDLen, errdefs.ErrInvalidArgument)
		}
		for _, r := range f.v {
			if unicode.IsControl(r) {
				return id, fmt.Errorf("%s contains a control character: %w", f.name, errdefs.ErrInvalidArgument)
			}
		}
	}
	return id, nil
}
