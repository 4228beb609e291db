package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	fspb "github.com/sandlot/sandlot/e2bwire/filesystem"
	"github.com/sandlot/sandlot/e2bwire/filesystem/filesystemconnect"
	"github.com/sandlot/sandlot/errdefs"
)

// filesystemService implements envd's filesystem.Filesystem.
type filesystemService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	h *Handler
}

var _ filesystemconnect.FilesystemHandler = (*filesystemService)(nil)

func entryInfo(fi *agent.FileInfo) *fspb.EntryInfo {
	e := &fspb.EntryInfo{
		Name:         fi.Name,
		Path:         fi.Path,
		Size:         fi.Size,
		Mode:         fi.Mode,
		Owner:        fi.Owner,
		Group:        fi.Group,
		ModifiedTime: timestamppb.New(time.UnixMilli(fi.ModTime)),
		Metadata:     fi.Metadata,
	}
	mode := fs.FileMode(fi.Mode & 0o777)
	switch fi.Type {
	case "file":
		e.Type = fspb.FileType_FILE_TYPE_FILE
	case "dir":
		e.Type = fspb.FileType_FILE_TYPE_DIRECTORY
		mode |= fs.ModeDir
	case "symlink":
		e.Type = fspb.FileType_FILE_TYPE_SYMLINK
		mode |= fs.ModeSymlink
		if t := absTarget(fi.Path, fi.Target); t != "" {
			e.SymlinkTarget = &t
		}
	}
	e.Permissions = mode.String()
	if e.Name == "" {
		e.Name = path.Base(fi.Path)
	}
	return e
}

// absTarget is a symlink's target as an absolute path (envd reports it so):
// a relative target is taken from the link's directory.
func absTarget(link, target string) string {
	if target == "" || path.IsAbs(target) {
		return target
	}
	return path.Join(path.Dir(link), target)
}

func (s *filesystemService) Stat(ctx context.Context, req *connect.Request[fspb.StatRequest]) (*connect.Response[fspb.StatResponse], error) {
	var fi *agent.FileInfo
	err := s.h.edge.Use(ctx, core.RefFrom(ctx), func(ctx context.Context, sb contexts.Sandbox) error {
		var err error
		fi, err = sb.Stat(ctx, req.Msg.GetPath())
		return err
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.StatResponse{Entry: entryInfo(fi)}), nil
}

func (s *filesystemService) MakeDir(ctx context.Context, req *connect.Request[fspb.MakeDirRequest]) (*connect.Response[fspb.MakeDirResponse], error) {
	var fi *agent.FileInfo
	err := s.h.edge.Use(ctx, core.RefFrom(ctx), func(ctx context.Context, sb contexts.Sandbox) error {
		if _, err := sb.Stat(ctx, req.Msg.GetPath()); err == nil {
			return fmt.Errorf("path %s already exists: %w", req.Msg.GetPath(), errdefs.ErrAlreadyExists)
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
		var err error
		fi, err = sb.Mkdir(ctx, req.Msg.GetPath())
		return err
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.MakeDirResponse{Entry: entryInfo(fi)}), nil
}

func (s *filesystemService) Move(ctx context.Context, req *connect.Request[fspb.MoveRequest]) (*connect.Response[fspb.MoveResponse], error) {
	var fi *agent.FileInfo
	err := s.h.edge.Use(ctx, core.RefFrom(ctx), func(ctx context.Context, sb contexts.Sandbox) error {
		var err error
		fi, err = sb.Move(ctx, agent.MoveParams{From: req.Msg.GetSource(), To: req.Msg.GetDestination()})
		return err
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.MoveResponse{Entry: entryInfo(fi)}), nil
}

func (s *filesystemService) ListDir(ctx context.Context, req *connect.Request[fspb.ListDirRequest]) (*connect.Response[fspb.ListDirResponse], error) {
	var list []agent.FileInfo
	err := s.h.edge.Use(ctx, core.RefFrom(ctx), func(ctx context.Context, sb contexts.Sandbox) error {
		fi, err := sb.Stat(ctx, req.Msg.GetPath())
		if err != nil {
			return err
		}
		if fi.Type != "dir" {
			return fmt.Errorf("path %s is not a directory: %w", req.Msg.GetPath(), errdefs.ErrInvalidArgument)
		}
		list, err = sb.List(ctx, agent.ListParams{Path: req.Msg.GetPath(), Depth: int(max(req.Msg.GetDepth(), 1))})
		return err
	})
	if err != nil {
		return nil, connectError(err)
	}
	out := &fspb.ListDirResponse{Entries: []*fspb.EntryInfo{}}
	for i := range list {
		out.Entries = append(out.Entries, entryInfo(&list[i]))
	}
	return connect.NewResponse(out), nil
}

// Remove of a path that does not exist succeeds, as on E2B (envd removes
// with os.RemoveAll semantics).
func (s *filesystemService) Remove(ctx context.Context, req *connect.Request[fspb.RemoveRequest]) (*connect.Response[fspb.RemoveResponse], error) {
	err := s.h.edge.Use(ctx, core.RefFrom(ctx), func(ctx context.Context, sb contexts.Sandbox) error {
		if _, err := sb.Stat(ctx, req.Msg.GetPath()); errors.Is(err, errdefs.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		return sb.Remove(ctx, agent.RemoveParams{Path: req.Msg.GetPath(), Recursive: true})
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.RemoveResponse{}), nil
}
