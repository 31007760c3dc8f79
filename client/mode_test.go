package client_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
)

// Next and NextN mean the server's default mode (/id/{tag}) unless
// WithMode pins a route; Snowflake and SnowflakeN always mean snowflake.
func TestClient_NextFollowsTheServersMode(t *testing.T) {
	t.Parallel()
	isSegment := func(id int64) bool { return id < 1<<20 } // an auto-created tag counts from 1
	isSnowflake := func(id int64) bool { return id > 1<<40 }
	for _, tc := range []struct {
		serverMode, clientMode string
		next                   func(int64) bool
	}{
		{server.ModeSegment, "", isSegment},
		{server.ModeSnowflake, "", isSnowflake},
		{server.ModeSegment, "snowflake", isSnowflake},
		{server.ModeSnowflake, "segment", isSegment},
	} {
		t.Run(tc.serverMode+"/"+tc.clientMode, func(t *testing.T) {
			sf, err := snowflake.New(snowflake.Config{WorkerID: 1})
			if err != nil {
				t.Fatal(err)
			}
			ts := startServer(t, filepath.Join(t.TempDir(), "idgen.db"),
				server.Config{Mode: tc.serverMode, Snowflake: snowflake.NewTagged(sf)})
			var opts []client.Option
			if tc.clientMode != "" {
				opts = append(opts, client.WithMode(tc.clientMode))
			}
			c, err := client.New(ts.URL, opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			id, err := c.Next(ctx, "order")
			if err != nil || !tc.next(id) {
				t.Errorf("Next = %d, %v", id, err)
			}
			ids, err := c.NextN(ctx, "order", 3)
			if err != nil || len(ids) != 3 || !tc.next(ids[0]) {
				t.Errorf("NextN = %v, %v", ids, err)
			}
			sid, err := c.Snowflake(ctx, "order")
			if err != nil || !isSnowflake(sid) {
				t.Errorf("Snowflake = %d, %v", sid, err)
			}
			sids, err := c.SnowflakeN(ctx, "order", 3)
			if err != nil || len(sids) != 3 || !isSnowflake(sids[0]) || sids[0] <= sid {
				t.Errorf("SnowflakeN = %v, %v (after %d)", sids, err, sid)
			}
		})
	}
}

// A name that does not resolve is the client's failure to reach the
// server: the error says so and names the route, not the segment store,
// yet an allocator from Segment still treats it as an outage to ride out.
func TestClient_UnreachableNamesTheCall(t *testing.T) {
	t.Parallel()
	// .invalid never resolves (RFC 6761).
	c, err := client.New("http://idgen.invalid:8080", client.WithRetries(0), client.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		route string
		// viaStore: the allocator's own wrapping says its store, which
		// is this server, is unavailable; the client's part follows.
		viaStore bool
		call     func() error
	}{
		{"/snowflake/order", false, func() error { _, err := c.Snowflake(ctx, "order"); return err }},
		{"/id/order", false, func() error { _, err := c.Next(ctx, "order"); return err }},
		{"/segment/order/range", true, func() error {
			alloc, err := c.Segment(segment.Options{})
			if err != nil {
				return err
			}
			defer alloc.Close()
			_, err = alloc.Next(ctx, "order")
			return err
		}},
	} {
		err := tc.call()
		if err == nil {
			t.Fatalf("%s: no error from an unresolvable host", tc.route)
		}
		msg := err.Error()
		if strings.Contains(msg, "store unavailable") != tc.viaStore || !strings.Contains(msg, "client: server unreachable") ||
			!strings.Contains(msg, "http://idgen.invalid:8080"+tc.route) {
			t.Errorf("%s: error reads %q; want the unreachable server and the route, not the store", tc.route, msg)
		}
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) {
			t.Errorf("%s: %v does not carry the *net.DNSError", tc.route, err)
		}
		if !errors.Is(err, client.ErrUnreachable) || !errors.Is(err, segment.ErrUnavailable) {
			t.Errorf("%s: %v matches neither ErrUnreachable nor segment.ErrUnavailable", tc.route, err)
		}
	}
}
