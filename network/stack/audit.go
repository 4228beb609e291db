package stack

import (
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/sandlot/sandlot/network/audit"
	storeaudit "github.com/sandlot/sandlot/store/audit"
)

// Audit rates: a sandbox's events (connections and questions together)
// reach Config.Audit at DefaultAuditRate a second, in bursts of
// DefaultAuditBurst; past that they are counted, and the count reaches
// Config.Audit as one ProtoLimited event. A sandbox is a tenant's, and
// the audit trail is shared: a flood of questions must cost its tenant,
// not the trail (docs/security-walls-daemon.md, "Queues are tenants' too").
const (
	DefaultAuditRate  = 100
	DefaultAuditBurst = 1000
)

// ProtoLimited marks an event that stands for others: Suppressed events
// of its sandbox that its audit rate did not let through.
const ProtoLimited = "limited"

// auditLimiter holds each sandbox's audit rate and what it suppressed.
type auditLimiter struct {
	rate  rate.Limit
	burst int

	mu  sync.Mutex
	sbs map[string]*limited // by sandbox id
}

type limited struct {
	lim        *rate.Limiter
	tenant     string
	suppressed int64
}

func newAuditLimiter(perSecond float64, burst int) *auditLimiter {
	if perSecond == 0 {
		perSecond = DefaultAuditRate
	}
	if burst <= 0 {
		burst = DefaultAuditBurst
	}
	r := rate.Limit(perSecond)
	if perSecond < 0 {
		r = rate.Inf
	}
	return &auditLimiter{rate: r, burst: burst, sbs: map[string]*limited{}}
}

// allow reports whether ev may be recorded, and returns the count of the
// sandbox's events suppressed before it, to record first (nil: none).
func (l *auditLimiter) allow(ev audit.Event) (bool, *audit.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sbs[ev.SandboxID]
	if s == nil {
		s = &limited{lim: rate.NewLimiter(l.rate, l.burst), tenant: ev.Tenant}
		l.sbs[ev.SandboxID] = s
	}
	if !s.lim.Allow() {
		s.suppressed++
		return false, nil
	}
	return true, s.summary(ev.SandboxID)
}

// forget drops a sandbox (at teardown) and returns the count it still
// held.
func (l *auditLimiter) forget(sandboxID string) *audit.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sbs[sandboxID]
	delete(l.sbs, sandboxID)
	if s == nil {
		return nil
	}
	return s.summary(sandboxID)
}

// flush returns the counts every sandbox holds (at Close).
func (l *auditLimiter) flush() []audit.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []audit.Event
	for id, s := range l.sbs {
		if ev := s.summary(id); ev != nil {
			out = append(out, *ev)
		}
	}
	return out
}

// summary is the ProtoLimited event for what s suppressed (nil: none),
// and resets the count. Precondition: the limiter's mu.
func (s *limited) summary(sandboxID string) *audit.Event {
	if s.suppressed == 0 {
		return nil
	}
	ev := &audit.Event{SandboxID: sandboxID, Tenant: s.tenant, Proto: ProtoLimited, Start: time.Now(),
		Reason: "audit rate of the sandbox exceeded: events counted, not recorded", Suppressed: s.suppressed}
	s.suppressed = 0
	return ev
}

// StoreEvent is the audit trail's record of a proxy or resolver event:
// kind network.connection, network.dns or network.limited, with the
// tenant and the execution context, and the event's fields as detail.
func StoreEvent(ev audit.Event, contextID string) storeaudit.Event {
	d := map[string]string{"sandbox": ev.SandboxID}
	kind := storeaudit.KindNetConnection
	switch ev.Proto {
	case ProtoLimited:
		d["suppressed"] = strconv.FormatInt(ev.Suppressed, 10)
		d["reason"] = ev.Reason
		return storeaudit.Event{TenantID: ev.Tenant, ContextID: contextID, Kind: storeaudit.KindNetLimited, Detail: d, At: ev.Start}
	case audit.ProtoDNS:
		kind = storeaudit.KindNetDNS
	}
	d["proto"], d["allowed"], d["reason"] = ev.Proto, strconv.FormatBool(ev.Allowed), ev.Reason
	if ev.Host != "" {
		d["host"] = ev.Host
	}
	if ev.Addr.IsValid() {
		d["addr"] = ev.Addr.String()
	}
	if ev.Port != 0 {
		d["port"] = strconv.Itoa(int(ev.Port))
	}
	if ev.Proto != audit.ProtoDNS {
		d["bytesUp"] = strconv.FormatInt(ev.BytesUp, 10)
		d["bytesDown"] = strconv.FormatInt(ev.BytesDown, 10)
		d["durationMs"] = strconv.FormatInt(ev.Duration.Milliseconds(), 10)
	}
	if ev.Injected > 0 {
		d["injected"] = strconv.Itoa(ev.Injected)
	}
	return storeaudit.Event{TenantID: ev.Tenant, ContextID: contextID, Kind: kind, Detail: d, At: ev.Start}
}
