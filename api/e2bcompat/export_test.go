package e2bcompat

// Holding names the parts of h that keep state of sandbox sid.
func (h *Handler) Holding(sid string) []string {
	var out []string
	for _, p := range []struct {
		name  string
		holds func(string) bool
	}{{"core", h.edge.Holds}, {"control", h.control.Holds}, {"envd", h.envd.Holds}, {"interp", h.interp.Holds}} {
		if p.holds(sid) {
			out = append(out, p.name)
		}
	}
	return out
}
