// Package audit is the record of one outbound connection or lookup of a
// sandbox, which the egress proxy and the resolver report through a Func.
// It never holds a secret's value or a byte of payload.
package audit

import (
	"net/netip"
	"time"
)

// Protocols of an Event.
const (
	ProtoTCP  = "tcp"              // spliced as bytes, named by address (or by the resolver's answer)
	ProtoTLS  = "tls"              // spliced as bytes, named by SNI
	ProtoHTTP = "http"             // spliced as bytes, named by the Host header
	ProtoMITM = "https-terminated" // TLS terminated to inject secrets or headers
	ProtoDNS  = "dns"
)

// Event is one outbound connection (or, for ProtoDNS, one question).
type Event struct {
	SandboxID string
	Tenant    string
	Proto     string
	Host      string     // the name used (SNI, Host header, DNS question), normalized; "" if none
	Addr      netip.Addr // the destination address (for DNS: unset)
	Port      uint16
	BytesUp   int64 // from the sandbox
	BytesDown int64 // to the sandbox
	Allowed   bool
	Reason    string // why allowed or denied
	Injected  int    // secret placeholders replaced in requests
	// Suppressed counts events of the sandbox that an event of its own
	// stands for: the ones its audit rate did not let through.
	Suppressed int64
	Start      time.Time
	Duration   time.Duration
}

// Func receives events. It is called from the connection's goroutine
// after the connection ends (or is refused) and must not block for long.
type Func func(Event)
