package redispolicy

import "testing"

func TestInfoField(t *testing.T) {
	info := "# Memory\r\nused_memory:1024\r\nmaxmemory_policy:allkeys-lru\r\n"
	for _, tc := range []struct{ name, want string }{
		{"maxmemory_policy", "allkeys-lru"},
		{"used_memory", "1024"},
		{"absent", ""},
	} {
		if got := InfoField(info, tc.name); got != tc.want {
			t.Errorf("InfoField(%q) = %q; want %q", tc.name, got, tc.want)
		}
	}
}
