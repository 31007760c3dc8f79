//go:build idgenplant

package plant

import "os"

// On reports whether the plant named by finding is selected
// (IDGEN_PLANT).
func On(finding string) bool { return os.Getenv("IDGEN_PLANT") == finding }
