package server

// RouteInfo describes one registered JSON route, for tests.
type RouteInfo struct {
	Method, Path string
	Auth         bool
}

// RouteInfos lists the server's JSON routes.
func (s *Server) RouteInfos() []RouteInfo {
	var out []RouteInfo
	for _, rt := range s.routes() {
		out = append(out, RouteInfo{rt.method, rt.path, rt.auth})
	}
	return out
}

// ContextOf exports contextOf for tests.
var ContextOf = contextOf
