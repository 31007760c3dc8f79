package idgentest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/idgentest"
	"github.com/idgen/idgen/segment"
)

func TestNewServer_Modes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, wantSeries string
		first            func(int64) bool
	}{
		// Segment IDs of an auto-created tag start at 1; snowflake IDs
		// carry a millisecond timestamp in their top bits.
		{"segment", `idgen_ids_issued_total{mode="segment",tag="order"} 100`, func(id int64) bool { return id == 1 }},
		{"snowflake", `idgen_ids_issued_total{mode="snowflake",tag=""} 100`, func(id int64) bool { return id > 1<<40 }},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			srv := idgentest.NewServer(t, &idgentest.Options{Mode: tc.mode})
			ids, err := srv.Client().NextN(context.Background(), "order", 100)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.first(ids[0]) {
				t.Errorf("first %s ID = %d", tc.mode, ids[0])
			}
			for i := 1; i < len(ids); i++ {
				if ids[i] <= ids[i-1] {
					t.Fatalf("IDs not increasing at %d: %d after %d", i, ids[i], ids[i-1])
				}
			}
			if code, _ := get(t, srv.URL+"/readyz"); code != http.StatusOK {
				t.Errorf("/readyz = %d, want 200", code)
			}
			if _, body := get(t, srv.URL+"/metrics"); !strings.Contains(body, tc.wantSeries) {
				t.Errorf("/metrics lacks %s", tc.wantSeries)
			}
		})
	}
}

func TestNewServer_NoAutoCreate(t *testing.T) {
	t.Parallel()
	srv := idgentest.NewServer(t, &idgentest.Options{NoAutoCreate: true, AdminToken: "idgentest-admin-token"})
	ctx := context.Background()
	c := srv.Client()
	if _, err := c.Next(ctx, "typo"); !errors.Is(err, segment.ErrTagNotFound) {
		t.Fatalf("Next on an unknown tag: %v, want segment.ErrTagNotFound", err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/admin/tags", strings.NewReader(`{"tag":"invoice","step":10,"start":5000}`))
	req.Header.Set("Authorization", "Bearer "+srv.AdminToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /admin/tags: %s, want 201", resp.Status)
	}
	if id, err := c.Next(ctx, "invoice"); err != nil || id != 5000 {
		t.Fatalf("Next = %d, %v; want 5000", id, err)
	}
}

// TestNewServer_NoFileLeft checks that a finished test leaves nothing in
// the temporary directory root the go command gave it.
func TestNewServer_NoFileLeft(t *testing.T) {
	root := t.TempDir()
	t.Setenv("TMPDIR", root)
	t.Run("user test", func(t *testing.T) {
		srv := idgentest.NewServer(t, nil)
		if _, err := srv.Client().Next(context.Background(), "order"); err != nil {
			t.Fatal(err)
		}
		a := idgentest.NewAllocator(t)
		if _, err := a.Next(context.Background(), "order"); err != nil {
			t.Fatal(err)
		}
	})
	left, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind: %s", filepath.Join(root, e.Name()))
	}
}

func TestNewAllocator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := idgentest.NewAllocator(t), idgentest.NewAllocator(t)
	var got []int64
	for range 3 {
		id, err := a.Next(ctx, "order")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if want := []int64{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("IDs = %v, want %v", got, want)
	}
	// Each allocator has a store of its own.
	if id, err := b.Next(ctx, "order"); err != nil || id != 1 {
		t.Errorf("second allocator's first ID = %d, %v; want 1", id, err)
	}
}

func TestServer_ClientMode(t *testing.T) {
	t.Parallel()
	srv := idgentest.NewServer(t, nil)
	id, err := srv.Client(client.WithMode("snowflake")).Next(context.Background(), "order")
	if err != nil || id < 1<<40 {
		t.Fatalf("snowflake ID from a segment-mode server = %d, %v", id, err)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
