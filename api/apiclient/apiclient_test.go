package apiclient_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/idgen/idgen/api/apiclient"
	"github.com/idgen/idgen/internal/proctest"
)

// The checked-in client must be what oapi-codegen, pinned in go.mod, makes
// of the document today: a document change without go generate fails here.
func TestGenerated_MatchesDocument(t *testing.T) {
	if testing.Short() {
		t.Skip("builds oapi-codegen")
	}
	out := filepath.Join(t.TempDir(), "apiclient.gen.go")
	cmd := exec.Command("go", "tool", "oapi-codegen", "-generate", "types,client", "-package", "apiclient", "-o", out, "../openapi.yaml")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as every build the tests make: see .ci/run
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen on api/openapi.yaml: %v\n%s", err, b)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("apiclient.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, have) {
		t.Fatal("api/apiclient/apiclient.gen.go is stale: run go generate ./api/apiclient")
	}
}

const adminToken = "apiclient-test-admin-token-0123456789"

// startServer runs the real idgen binary on a SQLite file and returns a
// generated client for it.
func startServer(t *testing.T) *apiclient.ClientWithResponses {
	t.Helper()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	env := []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")}
	p := proctest.Serve(t, bin, env, "--access-log=false", "--admin-token", adminToken, "--max-batch", "100")
	c, err := apiclient.NewClientWithResponses(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func withAdmin(_ context.Context, req *http.Request) error {
	req.Header.Set("Authorization", "Bearer "+adminToken)
	return nil
}

// The generated client against the real server: one ID, a batch, a
// prefixed ID and its decoding, admin calls, and errors, each answer
// landing in the field its status and shape call for.
func TestGenerated_AgainstRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the idgen binary")
	}
	c := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	one, err := c.NextIDsWithResponse(ctx, "order", nil)
	if err != nil {
		t.Fatal(err)
	}
	if one.StatusCode() != 200 || one.JSON200 == nil || one.JSON200.Id == nil || one.JSON200.Ids != nil {
		t.Fatalf("one ID: %d %s: want 200 with id and no ids", one.StatusCode(), one.Body)
	}
	first, err := strconv.ParseInt(*one.JSON200.Id, 10, 64)
	if err != nil || one.JSON200.Tag != "order" {
		t.Fatalf("one ID: tag %q id %q", one.JSON200.Tag, *one.JSON200.Id)
	}

	for _, n := range []int{1, 5} {
		batch, err := c.NextIDsWithResponse(ctx, "order", &apiclient.NextIDsParams{Count: &n})
		if err != nil {
			t.Fatal(err)
		}
		if batch.StatusCode() != 200 || batch.JSON200 == nil || batch.JSON200.Ids == nil || batch.JSON200.Id != nil {
			t.Fatalf("count=%d: %d %s: want 200 with ids and no id", n, batch.StatusCode(), batch.Body)
		}
		ids := *batch.JSON200.Ids
		if len(ids) != n {
			t.Fatalf("count=%d gave %d IDs", n, len(ids))
		}
		for _, s := range ids {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v <= first {
				t.Fatalf("count=%d: ID %q not after %d", n, s, first)
			}
			first = v
		}
	}

	prefixed := apiclient.NextSegmentIDsParamsFormatPrefixed
	p, err := c.NextSegmentIDsWithResponse(ctx, "invoice", &apiclient.NextSegmentIDsParams{Format: &prefixed})
	if err != nil {
		t.Fatal(err)
	}
	if p.JSON200 == nil || p.JSON200.Id == nil {
		t.Fatalf("prefixed: %d %s", p.StatusCode(), p.Body)
	}
	dec, err := c.DecodePrefixedIDWithResponse(ctx, *p.JSON200.Id)
	if err != nil {
		t.Fatal(err)
	}
	if dec.JSON200 == nil || dec.JSON200.Tag != "invoice" || dec.JSON200.Id != "1" {
		t.Fatalf("decode %q: %d %s, want tag invoice and id 1", *p.JSON200.Id, dec.StatusCode(), dec.Body)
	}

	sf, err := c.NextSnowflakeIDsWithResponse(ctx, "order", nil)
	if err != nil || sf.JSON200 == nil || sf.JSON200.Id == nil {
		t.Fatalf("snowflake: %v %s", err, sf.Body)
	}
	parts, err := c.DecodeSnowflakeIDWithResponse(ctx, *sf.JSON200.Id)
	if err != nil || parts.JSON200 == nil {
		t.Fatalf("snowflake decode: %v %s", err, parts.Body)
	}
	if age := time.Since(parts.JSON200.Time); age < -time.Minute || age > time.Minute {
		t.Fatalf("snowflake ID %s decodes to %v, not now", *sf.JSON200.Id, parts.JSON200.Time)
	}

	rng, err := c.ReserveRangeWithResponse(ctx, "order", &apiclient.ReserveRangeParams{Size: 10})
	if err != nil || rng.JSON200 == nil {
		t.Fatalf("range: %v %s", err, rng.Body)
	}
	start, _ := strconv.ParseInt(rng.JSON200.Start, 10, 64)
	end, _ := strconv.ParseInt(rng.JSON200.End, 10, 64)
	if start <= first || end-start < 10 {
		t.Fatalf("range [%d, %d) after ID %d", start, end, first)
	}

	// Errors decode into the documented error shape with a stable code.
	for _, tc := range []struct {
		name   string
		status int
		code   apiclient.ErrorErrorCode
		call   func() (*apiclient.Error, int, error)
	}{
		{"count=0", 400, apiclient.InvalidCount, func() (*apiclient.Error, int, error) {
			zero := 0
			r, err := c.NextIDsWithResponse(ctx, "order", &apiclient.NextIDsParams{Count: &zero})
			if err != nil {
				return nil, 0, err
			}
			return r.JSON400, r.StatusCode(), nil
		}},
		{"bad tag", 400, apiclient.InvalidTag, func() (*apiclient.Error, int, error) {
			r, err := c.NextIDsWithResponse(ctx, "no spaces", nil)
			if err != nil {
				return nil, 0, err
			}
			return r.JSON400, r.StatusCode(), nil
		}},
		{"bad checksum", 400, apiclient.InvalidId, func() (*apiclient.Error, int, error) {
			bad := []byte(*p.JSON200.Id)
			bad[len(bad)-1] ^= 1
			r, err := c.DecodePrefixedIDWithResponse(ctx, string(bad))
			if err != nil {
				return nil, 0, err
			}
			return r.JSON400, r.StatusCode(), nil
		}},
		{"no admin token", 401, apiclient.Unauthorized, func() (*apiclient.Error, int, error) {
			r, err := c.ListTagsWithResponse(ctx)
			if err != nil {
				return nil, 0, err
			}
			return r.JSON401, r.StatusCode(), nil
		}},
		{"unknown tag", 404, apiclient.TagNotFound, func() (*apiclient.Error, int, error) {
			r, err := c.SetTagStepWithResponse(ctx, "nosuch", apiclient.StepChange{Step: 10}, withAdmin)
			if err != nil {
				return nil, 0, err
			}
			return r.JSON404, r.StatusCode(), nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, status, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			if status != tc.status || e == nil || e.Error.Code != tc.code || e.Error.Message == "" {
				t.Fatalf("got %d %+v, want %d with code %s and a message", status, e, tc.status, tc.code)
			}
		})
	}
}

// updated_at has one precision, milliseconds, whether a tag was just
// created (POST) or listed (GET), and the two agree to the second.
func TestGenerated_UpdatedAtPrecision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the idgen binary")
	}
	c := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	step := int64(50)
	created, err := c.CreateTagWithResponse(ctx, apiclient.NewTag{Tag: "invoice", Step: &step}, withAdmin)
	if err != nil || created.JSON201 == nil {
		t.Fatalf("create: %v %d %s", err, created.StatusCode(), created.Body)
	}
	listed, err := c.ListTagsWithResponse(ctx, withAdmin)
	if err != nil || listed.JSON200 == nil || len(listed.JSON200.Tags) != 1 {
		t.Fatalf("list: %v %s", err, listed.Body)
	}
	millis := regexp.MustCompile(`"updated_at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"`)
	for name, body := range map[string][]byte{"POST": created.Body, "GET": listed.Body} {
		if !millis.Match(body) {
			t.Errorf("%s /admin/tags: updated_at not at millisecond precision in %s", name, body)
		}
	}
	got, want := listed.JSON200.Tags[0].UpdatedAt, created.JSON201.UpdatedAt
	if d := got.Sub(want); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("updated_at: POST said %v, GET says %v", want, got)
	}
}
