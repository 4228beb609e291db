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
//
// userID is the optional end user behind the tenant's key: it is part of
// the key as given, and "" is no user.
func Resolve(tenantID, userID, conversationID, pathID, taskID string) (id Identity, generated bool) {
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
	return Identity{TenantID: tenantID, UserID: userID, ConversationID: conversationID, PathID: pathID}, generated
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
		if err := CheckIDPart(f.name, f.v); err != nil {
			return id, err
		}
	}
	if err := CheckIDPart("userId", id.UserID); err != nil {
		return id, err
	}
	return id, nil
}

// CheckIDPart applies the rules every identity part shares to v, named
// name in the error: at most 256 bytes and no control character. An empty
// v passes (whether a part may be empty is the caller's rule: a user may).
func CheckIDPart(name, v string) error {
	if len(v) > maxIDLen {
		return fmt.Errorf("%s is longer than %d bytes: %w", name, maxIDLen, errdefs.ErrInvalidArgument)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s contains a control character: %w", name, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}
