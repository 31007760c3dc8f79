package dbtest_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The offline test images this package starts in CI are debootstrapped
// from the Debian mirror that .ci/debian-mirror.sh finds in the machine's
// apt sources. Each case is a machine's /etc/apt under a temporary root.
func TestDebianMirror(t *testing.T) {
	const debian12 = `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`
	for _, tc := range []struct {
		name  string
		files map[string]string // path under /etc/apt: content
		want  string            // "" means no mirror: exit 1 with a message
	}{
		{"Debian 12 deb822 debian.sources", map[string]string{"sources.list.d/debian.sources": debian12},
			"http://deb.debian.org/debian"},
		{"one-line sources.list", map[string]string{"sources.list": `
# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb http://security.example/debian-security bookworm-security main
deb http://updates.example/debian bookworm-updates main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example/debian bookworm main contrib # the archive
`}, "http://mirror.example/debian"},
		{"options with spaces, https", map[string]string{"sources.list": "deb [ arch=amd64 ] https://mirror.example/debian/ bookworm main\n"},
			"https://mirror.example/debian/"},
		{"sources.list before sources.list.d", map[string]string{
			"sources.list":                  "deb http://first.example/debian bookworm main\n",
			"sources.list.d/debian.sources": debian12,
		}, "http://first.example/debian"},
		{"sources.list.d in name order, both formats", map[string]string{
			"sources.list.d/b.list":    "deb http://b.example/debian bookworm main\n",
			"sources.list.d/a.sources": "Types: deb\nURIs: http://a.example/debian\nSuites: bookworm\nComponents: main\n",
		}, "http://a.example/debian"},
		{"deb822: disabled stanza, deb-src only, folded fields, embedded key", map[string]string{"sources.list.d/x.sources": `Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Enabled: no

Types: deb-src
URIs: http://src.example/debian
Suites: bookworm

types: deb-src
 deb
uris: cdrom:[Debian]/
 http://folded.example/debian
suites: bookworm-updates
 bookworm
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBGPL0BUBEADmW5NdOOHwPIJlgPu6JDcKw/NZJPR8lsD3K87ZM18gzyQZJD+w
 -----END PGP PUBLIC KEY BLOCK-----
`}, "http://folded.example/debian"},
		{"file: mirror", map[string]string{"sources.list": "deb file:/srv/mirror/debian bookworm main\n"},
			"file:/srv/mirror/debian"},
		{"last stanza without a blank line after it", map[string]string{"sources.list.d/x.sources": "Types: deb\nURIs: http://last.example/debian\nSuites: bookworm"},
			"http://last.example/debian"},
		{"no apt sources at all", nil, ""},
		{"only security, updates and other suites", map[string]string{
			"sources.list":                  "deb http://security.example/debian-security bookworm-security main\ndeb http://deb.example/debian trixie main\n",
			"sources.list.d/debian.sources": "Types: deb\nURIs: http://deb.example/debian\nSuites: bookworm-updates bookworm-backports\n",
		}, ""},
		{"ignored file names", map[string]string{
			"sources.list.d/google-cloud-sdk.list.disabled-by-farm": "deb http://disabled.example/debian bookworm main\n",
			"sources.list.d/old.list.save":                          "deb http://saved.example/debian bookworm main\n",
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "etc/apt/sources.list.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(root, "etc/apt", name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr bytes.Buffer
			cmd := exec.Command("bash", "../../.ci/debian-mirror.sh", "bookworm", root)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			got := strings.TrimSpace(stdout.String())
			if tc.want != "" {
				if err != nil || got != tc.want {
					t.Fatalf("mirror = %q, %v (stderr %q); want %q", got, err, stderr.String(), tc.want)
				}
				return
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || got != "" {
				t.Fatalf("with no bookworm source: stdout %q, err %v; want nothing on stdout and exit status 1", got, err)
			}
			msg := stderr.String()
			for _, want := range []string{"no apt source for the Debian suite 'bookworm'", "IDGEN_DEBIAN_MIRROR", "deb http://MIRROR/debian bookworm main"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
		})
	}
}
