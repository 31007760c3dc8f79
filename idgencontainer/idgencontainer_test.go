package idgencontainer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/idgencontainer"
	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/dbtest"
)

func run(t *testing.T, ctx context.Context, opts ...testcontainers.ContainerCustomizer) *idgencontainer.Container {
	t.Helper()
	img := proctest.Image(t)
	ctr, err := idgencontainer.Run(ctx, img, opts...)
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatal(err)
	}
	return ctr
}

// TestRun_Modes starts one container per mode and takes IDs through the
// client it hands out. The log line gives the time from Run to the first
// ID, what a user's test pays.
func TestRun_Modes(t *testing.T) {
	for _, mode := range []string{"segment", "snowflake"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			img := proctest.Image(t)
			t0 := time.Now()
			ctr, err := idgencontainer.Run(ctx, img, idgencontainer.WithMode(mode))
			testcontainers.CleanupContainer(t, ctr)
			if err != nil {
				t.Fatal(err)
			}
			ready := time.Since(t0)
			c, err := ctr.Client(ctx)
			if err != nil {
				t.Fatal(err)
			}
			first, err := c.Next(ctx, "order")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: Run to ready %v, Run to first ID %v (ID %d)", mode, ready.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), first)

			ids, err := c.NextN(ctx, "order", 500)
			if err != nil {
				t.Fatal(err)
			}
			prev := first
			for _, id := range ids {
				if id <= prev {
					t.Fatalf("ID %d after %d: not increasing", id, prev)
				}
				prev = id
			}
			// /id/{tag} follows the mode: a fresh segment tag starts at 1,
			// snowflake IDs carry a millisecond timestamp in their top bits.
			if mode == "segment" && first != 1 || mode == "snowflake" && first < 1<<40 {
				t.Errorf("first ID %d does not look like a %s ID", first, mode)
			}
		})
	}
}

func TestRun_AdminTokenAndAutoCreate(t *testing.T) {
	ctx := context.Background()
	ctr := run(t, ctx, idgencontainer.WithAutoCreate(false), idgencontainer.WithAdminToken("container-admin-token"))
	if ctr.AdminToken() != "container-admin-token" {
		t.Fatalf("AdminToken() = %q", ctr.AdminToken())
	}
	c, err := ctr.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(ctx, "typo"); !errors.Is(err, segment.ErrTagNotFound) {
		t.Fatalf("Next on an unknown tag with auto-create off: %v, want segment.ErrTagNotFound", err)
	}
	base, err := ctr.BaseURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"wrong", http.StatusForbidden}, {ctr.AdminToken(), http.StatusCreated}} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/admin/tags", strings.NewReader(`{"tag":"invoice","step":50,"start":7000}`))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("POST /admin/tags with token %q: %s, want %d", tc.token, resp.Status, tc.want)
		}
	}
	if id, err := c.Next(ctx, "invoice"); err != nil || id != 7000 {
		t.Fatalf("first ID of the created tag = %d, %v; want 7000", id, err)
	}
}

func TestRun_InvalidOption(t *testing.T) {
	ctx := context.Background()
	for _, opt := range []testcontainers.ContainerCustomizer{
		idgencontainer.WithMode("leaf"),
		idgencontainer.WithAdminToken(""),
		idgencontainer.WithAdminToken("short"),
		idgencontainer.WithStore("localhost:5432"),
	} {
		// No Docker needed: options are checked before anything starts.
		ctr, err := idgencontainer.Run(ctx, "idgen:never-pulled", opt)
		if !errors.Is(err, idgencontainer.ErrInvalidOption) {
			t.Errorf("Run: %v, want ErrInvalidOption", err)
		}
		if ctr != nil {
			testcontainers.CleanupContainer(t, ctr)
			t.Errorf("Run returned a container for an invalid option")
		}
	}
}

// TestRun_TwoInstancesOnePostgres is what a user's fleet test looks like:
// two idgen containers and a PostgreSQL container on one Docker network,
// both instances issuing segment and snowflake IDs concurrently. Segment
// IDs come from one id_sequence row and snowflake IDs from two leased
// worker IDs: no ID may appear twice.
func TestRun_TwoInstancesOnePostgres(t *testing.T) {
	ctx := context.Background()
	img := proctest.Image(t)
	nw, err := network.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nw.Remove(context.Background()) })
	_, dsn := dbtest.StartOnNetwork(t, dbtest.Postgres, nw.Name, "postgres")

	ctrs := make([]*idgencontainer.Container, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range ctrs {
		wg.Go(func() {
			ctrs[i], errs[i] = idgencontainer.Run(ctx, img,
				idgencontainer.WithStore(dsn), network.WithNetwork([]string{fmt.Sprintf("idgen-%d", i)}, nw))
		})
	}
	wg.Wait()
	for i := range ctrs {
		testcontainers.CleanupContainer(t, ctrs[i])
		if errs[i] != nil {
			t.Fatalf("%v\n%s", errs[i], logs(ctrs[i]))
		}
	}

	const workers, calls, count = 4, 25, 20
	var (
		mu    sync.Mutex
		seen  = map[string]map[int64]string{"segment": {}, "snowflake": {}}
		dups  []string
		total int
	)
	for i, ctr := range ctrs {
		for _, mode := range []string{"segment", "snowflake"} {
			c, err := ctr.Client(ctx, client.WithMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			for w := range workers {
				wg.Go(func() {
					for range calls {
						ids, err := c.NextN(ctx, "order", count)
						if err != nil {
							t.Error(err)
							return
						}
						who := fmt.Sprintf("idgen-%d/%s/%d", i, mode, w)
						mu.Lock()
						for _, id := range ids {
							if prev, ok := seen[mode][id]; ok {
								dups = append(dups, fmt.Sprintf("%s ID %d from %s and %s", mode, id, prev, who))
							}
							seen[mode][id] = who
						}
						total += len(ids)
						mu.Unlock()
					}
				})
			}
		}
	}
	wg.Wait()
	if want := len(ctrs) * 2 * workers * calls * count; total != want && !t.Failed() {
		t.Fatalf("got %d IDs, want %d", total, want)
	}
	if len(dups) > 0 {
		t.Fatalf("%d duplicate IDs, first: %s", len(dups), dups[0])
	}
	t.Logf("%d segment and %d snowflake IDs from 2 containers on one PostgreSQL, no duplicates", len(seen["segment"]), len(seen["snowflake"]))
}

// logs returns the container's output, for a failure message.
func logs(ctr *idgencontainer.Container) string {
	if ctr == nil {
		return "(no container)"
	}
	r, err := ctr.Logs(context.Background())
	if err != nil {
		return err.Error()
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}
