package testkit_test

import (
	"testing"

	"github.com/idgen/idgen/internal/testkit"
)

func TestFreePortsDiffer(t *testing.T) {
	ports := testkit.FreePorts(t, 8)
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: want 8 distinct positive ones", ports)
		}
		seen[p] = true
	}
}
