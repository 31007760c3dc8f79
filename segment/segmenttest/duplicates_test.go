package segmenttest_test

import (
	"testing"

	"github.com/idgen/idgen/segment/segmenttest"
)

func TestDuplicates(t *testing.T) {
	for _, tc := range []struct {
		name string
		ids  []int64
		want int
	}{
		{"none", nil, 0},
		{"distinct", []int64{3, 1, 2}, 0},
		{"one repeat", []int64{1, 2, 1}, 1},
		{"three of one", []int64{5, 5, 5}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := segmenttest.Duplicates(tc.ids); got != tc.want {
				t.Fatalf("Duplicates(%v) = %d, want %d", tc.ids, got, tc.want)
			}
		})
	}
}
