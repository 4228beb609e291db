package daemon

import (
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/provider/local"
)

// progress is /readyz's Config.Progress: the built-in templates' builds.
// The default template is waited for until it has an image (its first
// stage, or what the store had); its later stages and the other
// built-ins' builds are shown without being waited for.
func (b *builtinImages) progress(r *api.Readiness) {
	for _, s := range b.statuses() {
		if s.Ready {
			if r.Live == nil {
				r.Live = map[string]string{}
			}
			r.Live[s.Template] = s.Live
		}
		isDefault := s.Template == local.DefaultTemplate
		if isDefault {
			switch {
			case s.Ready:
				r.Checks["template default"] = "ok"
			case s.Err != nil:
				r.Checks["template default"] = "failed"
			default:
				r.Checks["template default"] = "building"
			}
		}
		if !s.Building && s.Err == nil {
			continue
		}
		w := workOf(s)
		if isDefault && !s.Ready {
			r.Waiting = append(r.Waiting, w)
		} else {
			r.Building = append(r.Building, w)
		}
	}
}

// workOf is a builder's state on the wire. A failure says only that it
// failed: /readyz answers anyone, and mmdebstrap's output names the
// host's paths; the log has it.
func workOf(s debian.Status) api.Work {
	p := s.Progress
	w := api.Work{What: "template " + s.Template, Stage: s.Stage, StageIndex: s.StageIndex, Stages: s.Stages,
		Step: p.Step, Steps: p.Steps, Phase: p.Phase, Done: p.Done, Total: p.Total, Package: p.Package,
		ElapsedSeconds: int64(p.Elapsed / time.Second), ETASeconds: int64(p.ETA / time.Second)}
	if s.Stages <= 1 {
		w.StageIndex, w.Stages = 0, 0
	}
	if s.Err != nil && !s.Building {
		w.Phase = "failed"
		w.Error = "the build failed; the server's log says why (the next use after a minute starts another)"
	}
	return w
}
