package nettest

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// DNS is a fake authoritative name server for the tests' internet. Zone
// maps a name (no trailing dot) to addresses or to "cname:<target>".
// Names in TruncateUDP are answered over UDP with the TC bit only, to
// drive a resolver to TCP.
type DNS struct {
	Zone        map[string][]string
	TruncateUDP map[string]bool

	mu      sync.Mutex
	queries []string // "name type", in order
}

// Queries returns the questions received so far.
func (d *DNS) Queries() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.queries...)
}

// ServeDNS answers from Zone.
func (d *DNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(strings.TrimSuffix(q.Name, "."))
	d.mu.Lock()
	d.queries = append(d.queries, name+" "+dns.TypeToString[q.Qtype])
	d.mu.Unlock()
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp && d.TruncateUDP[name] {
		m.Truncated = true
		w.WriteMsg(m)
		return
	}
	for hops := 0; hops < 8; hops++ {
		vals, ok := d.Zone[name]
		if !ok {
			if len(m.Answer) == 0 {
				m.Rcode = dns.RcodeNameError
			}
			break
		}
		if len(vals) == 1 && strings.HasPrefix(vals[0], "cname:") {
			target := strings.TrimPrefix(vals[0], "cname:")
			m.Answer = append(m.Answer, &dns.CNAME{Hdr: hdr(name, dns.TypeCNAME), Target: dns.Fqdn(target)})
			name = target
			continue
		}
		for _, v := range vals {
			a := netip.MustParseAddr(v)
			switch {
			case a.Is4() && q.Qtype == dns.TypeA:
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr(name, dns.TypeA), A: net.IP(a.AsSlice())})
			case a.Is6() && q.Qtype == dns.TypeAAAA:
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA), AAAA: net.IP(a.AsSlice())})
			}
		}
		if q.Qtype == dns.TypeTXT {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr(name, dns.TypeTXT), Txt: []string{"hello from " + name}})
		}
		break
	}
	w.WriteMsg(m)
}

func hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: dns.Fqdn(name), Rrtype: t, Class: dns.ClassINET, Ttl: 60}
}

// Serve runs d on pc and l until the test ends.
func (d *DNS) Serve(t testing.TB, pc net.PacketConn, l net.Listener) {
	t.Helper()
	var started sync.WaitGroup
	started.Add(2)
	udp := &dns.Server{PacketConn: pc, Handler: d, NotifyStartedFunc: started.Done}
	tcp := &dns.Server{Listener: l, Handler: d, NotifyStartedFunc: started.Done}
	go udp.ActivateAndServe()
	go tcp.ActivateAndServe()
	started.Wait()
	t.Cleanup(func() {
		udp.Shutdown()
		tcp.Shutdown()
	})
}
