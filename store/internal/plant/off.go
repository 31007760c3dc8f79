//go:build !idgenplant

package plant

// On reports whether the plant named by finding is selected: never,
// outside a build with the idgenplant tag.
func On(string) bool { return false }
