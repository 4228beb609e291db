package agent

// run_code's params read without reflection, on the agent's side. The
// host's Client encodes RunCodeParams with encoding/json, which writes the
// struct's fields in their order and leaves out the empty ones; decoding
// them by reflection was about 2.5 µs of the agent's 25 before a warm cell
// reached its kernel (BenchmarkDecodeRunCodeParams; BENCHMARKS.md, notes). The fast path takes only that
// layout without an environment, with the strings and integers rcParser
// reads exactly as encoding/json does; anything else goes to encoding/json,
// which stays the reference (FuzzRunCodeParams holds the two to the same
// value).

// DecodeRunCodeParams decodes raw, a run_code request's params, into p when
// raw is in the layout encoding/json gives a RunCodeParams without Env,
// and reports whether it did. On false p is untouched and the caller
// decodes raw with encoding/json.
func DecodeRunCodeParams(raw []byte, p *RunCodeParams) bool {
	d := rcParser{b: raw}
	var r RunCodeParams
	if !d.lit(`{"language":`) || !d.str(&r.Language) || !d.lit(`,"code":`) || !d.str(&r.Code) {
		return false
	}
	if d.lit(`,"kernel":`) && !d.str(&r.Kernel) {
		return false
	}
	if d.lit(`,"timeoutMs":`) && !d.integer(&r.TimeoutMs) {
		return false
	}
	if d.lit(`,"maxOutput":`) && !d.integer(&r.MaxOutput) {
		return false
	}
	if d.lit(`,"stream":`) && !d.boolean(&r.Stream) {
		return false
	}
	if d.lit(`,"user":`) && !d.str(&r.User) {
		return false
	}
	if d.lit(`,"ipython":`) && !d.boolean(&r.IPython) {
		return false
	}
	if !d.lit(`}`) || d.i != len(d.b) {
		return false
	}
	*p = r
	return true
}
