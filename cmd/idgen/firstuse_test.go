package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
)

// What a new user runs into first: messages that say what to do, show no
// piece of a password and name no Go package.
func TestCLI_FirstUseMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	store := "sqlite://" + filepath.Join(dir, "idgen.db")
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		want    []string
		notWant []string
	}{
		{"password with @ and #", nil, []string{"tag", "list", "--store", "postgres://newc:p@ss:w#rd@localhost:5432/db"},
			[]string{"percent-encode", "%40"}, []string{"ss:w", "w#rd", "p@ss", "xxxxx"}},
		{"password with :", nil, []string{"tag", "list", "--store", "postgres://newc:pa:ss@localhost:x/db"},
			[]string{"percent-encode", "invalid port"}, []string{"pa:ss", "newc"}},
		{"step without a start", nil, []string{"tag", "step", "invoice", "abc", "--store", store},
			[]string{`invalid step: "abc" is not a whole number`}, []string{"start", "segment:"}},
		{"decode a number past int64", nil, []string{"decode", "18446744073709551615"},
			[]string{"is not a snowflake ID", "9223372036854775807"}, []string{"'_'", "readable:"}},
		{"decode a bad prefixed ID", nil, []string{"decode", "abc_"},
			[]string{"neither a snowflake ID nor a prefixed ID"}, []string{"readable:", "segment:"}},
		{"unknown IDGEN_ variable", []string{"IDGEN_ADMIN_TOKN=0123456789abcdef0123"}, []string{"version"},
			[]string{"IDGEN_ADMIN_TOKN is set but is no idgen setting", "did you mean IDGEN_ADMIN_TOKEN?"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), tc.env...)
			out, _ := cmd.CombinedOutput()
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("idgen %v: no %q in:\n%s", tc.args, w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(string(out), w) {
					t.Errorf("idgen %v: %q in:\n%s", tc.args, w, out)
				}
			}
		})
	}

	// No open-endpoints warning on a loopback address; the warning stays
	// for one that others reach.
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=" + store})
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.Log(), "the ID endpoints are open without auth") {
		t.Errorf("open-endpoints warning on 127.0.0.1:\n%s", p.Log())
	}
	all := proctest.Start(t, bin, []string{"IDGEN_STORE=" + store}, "serve", "--addr", "0.0.0.0:0")
	if err := all.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(all.Log(), "the ID endpoints are open without auth") {
		t.Errorf("no open-endpoints warning on 0.0.0.0:\n%s", all.Log())
	}
}
