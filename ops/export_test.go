package ops

// AdminRoutes returns the patterns of the admin API's routes.
func AdminRoutes() []string {
	var out []string
	for _, rt := range routes {
		if rt.access == admin {
			out = append(out, rt.pattern)
		}
	}
	return out
}
