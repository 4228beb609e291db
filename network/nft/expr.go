package nft

import (
	"net/netip"
	"sort"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// The expressions below build rules the way the nft tool compiles them;
// each comment gives the nft syntax.

func cat(parts ...any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		switch v := p.(type) {
		case expr.Any:
			out = append(out, v)
		case []expr.Any:
			out = append(out, v...)
		}
	}
	return out
}

// meta nfproto
func loadNFProto() []expr.Any { return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}} }

// meta l4proto
func loadL4() []expr.Any { return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}} }

// ip saddr (callers check nfproto first where the family is mixed)
func loadSaddr() []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}}
}

// ip daddr
func loadDaddr() []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}}
}

// th dport (after an l4proto check)
func loadDport() []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}}
}

// meta mark
func loadMark() []expr.Any { return []expr.Any{&expr.Meta{Key: expr.MetaKeyMARK, Register: 1}} }

// a mark's value as meta mark holds it (host byte order)
func mark(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }

func cmpEq(b []byte) expr.Any  { return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b} }
func cmpNeq(b []byte) expr.Any { return &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: b} }

func accept() expr.Any { return &expr.Verdict{Kind: expr.VerdictAccept} }
func drop() expr.Any   { return &expr.Verdict{Kind: expr.VerdictDrop} }

// iifname "sl-*" (eq) or iifname != "sl-*": a comparison of only the
// prefix's bytes is how nft matches a trailing wildcard.
func (t *Table) ifPrefix(key expr.MetaKey, eq bool) []expr.Any {
	op := expr.CmpOpEq
	if !eq {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: []byte(t.cfg.IfPrefix)},
	}
}

// ct state { bits } (in) or ct state != { bits } (!in)
func ctStateIn(bits uint32, in bool) []expr.Any {
	op := expr.CmpOpEq
	if in {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: op, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// <register 1> vmap @set
func vmap(s *nftables.Set) []expr.Any {
	return []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, IsDestRegSet: true, DestRegister: 0}}
}

// <register 1> @set
func lookup(s *nftables.Set) expr.Any {
	return &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID}
}

// redirect to :port
func redirect(p uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: port(p)},
		&expr.Redir{RegisterProtoMin: 1},
	}
}

func port(p uint16) []byte { return binaryutil.BigEndian.PutUint16(p) }

// ifname pads an interface name to IFNAMSIZ, the key of the maps.
func ifname(s string) []byte {
	b := make([]byte, 16)
	copy(b, s)
	return b
}

// intervals turns IPv4 prefixes into interval set elements: overlapping
// and adjacent ranges merged (the kernel refuses overlaps), each range a
// start element and an end element one past its last address (none when
// it ends at 255.255.255.255).
func intervals(ps []netip.Prefix) []nftables.SetElement {
	type span struct{ lo, hi uint32 }
	var spans []span
	for _, p := range ps {
		if !p.Addr().Is4() {
			continue
		}
		p = p.Masked()
		lo := u32(p.Addr())
		hi := lo | (^uint32(0) >> p.Bits())
		if p.Bits() == 0 {
			hi = ^uint32(0)
		}
		spans = append(spans, span{lo, hi})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	var merged []span
	for _, s := range spans {
		if n := len(merged); n > 0 && (s.lo <= merged[n-1].hi || (merged[n-1].hi != ^uint32(0) && s.lo == merged[n-1].hi+1)) {
			if s.hi > merged[n-1].hi {
				merged[n-1].hi = s.hi
			}
			continue
		}
		merged = append(merged, s)
	}
	var out []nftables.SetElement
	for _, s := range merged {
		out = append(out, nftables.SetElement{Key: b4(s.lo)})
		if s.hi != ^uint32(0) {
			out = append(out, nftables.SetElement{Key: b4(s.hi + 1), IntervalEnd: true})
		}
	}
	return out
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func b4(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
