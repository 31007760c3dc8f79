package main

import (
	"errors"
	"strings"
	"testing"
)

// Every --lock-store form parses to the client it names, and a bad one
// says what to write without echoing a password.
func TestRedisOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec            string
		addrs           []string // the seed addresses; nil: nothing to dial
		cluster, tls    bool
		db              int
		prefix, wantErr string
	}{
		{spec: ""},
		{spec: "none"},
		{spec: "redis://127.0.0.1:6379", addrs: []string{"127.0.0.1:6379"}},
		{spec: "redis://:pw@redis:6380/2?prefix=orders:", addrs: []string{"redis:6380"}, db: 2, prefix: "orders:"},
		{spec: "rediss://redis.internal:6379", addrs: []string{"redis.internal:6379"}, tls: true},
		{spec: "redis+cluster://a:7000?addr=b:7001&addr=c:7002", addrs: []string{"a:7000", "b:7001", "c:7002"}, cluster: true},
		{spec: "postgres://h/db", wantErr: `scheme "postgres" is not a Redis one`},
		{spec: "redis://", wantErr: "no host"},
		{spec: "redis://:Secret@h:1/x", wantErr: `redis://:xxxxx@h:1/x: invalid database number: "x"`},
		{spec: "redis://h:1?prefix=", wantErr: "prefix= must be non-empty"},
		{spec: "redis://h:1?bogus=1", wantErr: "unexpected option: bogus"},
		{spec: "redis://user:pw@h:1", addrs: []string{"h:1"}},
		{spec: "redis://Secret@h:1/x", wantErr: `redis://xxxxx@h:1/x: invalid database number`},
		{spec: "redis://:Sec%ret@h:1", wantErr: "not a URL (percent-encode"},
		{spec: "redis+cluster://:Secret@h:1/5", wantErr: "a Redis Cluster has only database 0: drop /5"},
		{spec: "redis://h:1?prefix=a:&prefix=b:", wantErr: "prefix= is given more than once"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			p, err := redisOptions(tc.spec)
			if tc.wantErr != "" {
				if !errors.Is(err, errLockStore) || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "Secret") {
					t.Fatalf("err %v; want errLockStore saying %q, without the password", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var addrs []string
			var tls bool
			var db int
			switch {
			case p.cluster != nil:
				addrs, tls = p.cluster.Addrs, p.cluster.TLSConfig != nil
			case p.single != nil:
				addrs, tls, db = []string{p.single.Addr}, p.single.TLSConfig != nil, p.single.DB
			}
			if strings.Join(addrs, ",") != strings.Join(tc.addrs, ",") || (p.cluster != nil) != tc.cluster ||
				tls != tc.tls || db != tc.db || p.prefix != tc.prefix {
				t.Errorf("got addrs %v cluster %v tls %v db %d prefix %q; want %v %v %v %d %q",
					addrs, p.cluster != nil, tls, db, p.prefix, tc.addrs, tc.cluster, tc.tls, tc.db, tc.prefix)
			}
		})
	}
}
