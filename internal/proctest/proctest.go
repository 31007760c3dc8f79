// Package proctest runs the real idgen binary in tests: it builds it once,
// starts `idgen serve` processes on loopback ports, and talks to them over
// real HTTP, so end-to-end tests exercise exactly what users run.
package proctest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary puts the idgen binary, built from this checkout's ./cmd/idgen,
// at dir/idgen and returns that path. It is built once per `go test`
// run and shared by every package that needs it: see shared.
func Binary(t testing.TB, dir string) string {
	t.Helper()
	return BinaryTags(t, dir, "")
}

// BinaryTags is Binary built with tags, a comma-separated list as go
// build -tags takes it: "idgenplant" switches a fence fix off on
// IDGEN_PLANT (store/internal/plant), to show that a test finds the hole.
// The tags are part of the build's key.
func BinaryTags(t testing.TB, dir, tags string) string {
	t.Helper()
	if testing.Short() {
		// The -short loop is the in-process tests; the processes, ports
		// and waits of end-to-end tests are the full run's (CI).
		t.Skip("starts idgen processes: run without -short")
	}
	root := repoRoot()
	var flags []string
	if tags != "" {
		flags = []string{"-tags", tags}
	}
	return shared(t, dir, "idgen", root, flags, []string{"./cmd/idgen"}, func() (string, error) {
		return sourceHash(root, flags, "./cmd/idgen")
	})
}

// Program puts the main package pkg of this module (a path relative to
// its root, such as "./internal/lockcheck/worker") at dir/NAME, NAME
// being pkg's last element, and returns that path: a small program a
// test runs as real processes beside idgen. It is built as Binary is,
// once per run and keyed by its sources.
func Program(t testing.TB, dir, pkg string) string {
	t.Helper()
	root := repoRoot()
	return shared(t, dir, filepath.Base(pkg), root, nil, []string{pkg}, func() (string, error) {
		return sourceHash(root, nil, pkg)
	})
}

// Tool puts a command pinned in api/tools/go.mod (grpcurl,
// grpc-health-probe) at dir/NAME and returns that path: the third-party
// clients the end-to-end tests run against idgen serve. Its key is the
// pin (api/tools' go.mod and go.sum), so it too is built once per run.
func Tool(t testing.TB, dir, pkg string) string {
	t.Helper()
	tools := filepath.Join(repoRoot(), "api", "tools")
	return shared(t, dir, filepath.Base(pkg), tools, nil, []string{pkg}, func() (string, error) {
		h := sha256.New()
		io.WriteString(h, pkg+"\x00"+runtime.Version()+"\x00")
		for _, f := range []string{"go.mod", "go.sum"} {
			if err := hashFile(h, filepath.Join(tools, f)); err != nil {
				return "", err
			}
		}
		return hex.EncodeToString(h.Sum(nil))[:16], nil
	})
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// shared builds pkgs (in module directory modDir, with the go build
// flags given) once per `go test` run
// and links the result to dir/name. go test runs each package's test
// binary as a child of one go command, so the parent's PID names the run,
// and the key (a hash of what the binary is built from) keeps a build
// from serving another source: nothing built by an earlier run, or for
// other code, is ever used. Concurrent packages wait on a file lock for
// the one build. Directories of runs that have ended are removed.
func shared(t testing.TB, dir, name, modDir string, flags, pkgs []string, key func() (string, error)) string {
	t.Helper()
	k, err := key()
	if err != nil {
		t.Fatalf("hash the sources of %s: %v", name, err)
	}
	base := filepath.Join(os.TempDir(), "idgen-proctest")
	run := filepath.Join(base, strconv.Itoa(os.Getppid()))
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	removeEndedRuns(base)
	lock, err := os.OpenFile(filepath.Join(run, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(run, name+"-"+k)
	if _, err := os.Stat(built); err != nil {
		tmp := built + ".tmp"
		cmd := exec.Command("go", slices.Concat([]string{"build", "-o", tmp}, flags, pkgs)...)
		cmd.Dir = modDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
		}
		if err := os.Rename(tmp, built); err != nil {
			t.Fatal(err)
		}
	}
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	bin := filepath.Join(dir, name)
	if err := os.Link(built, bin); err != nil {
		// Another file system: copy.
		b, err := os.ReadFile(built)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// removeEndedRuns deletes the build directories of go commands that no
// longer run. A reused PID keeps its directory, which is harmless: its
// builds are found only under the same source hash.
func removeEndedRuns(base string) {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getppid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
}

// sourceHash hashes what `go build flags pkg` in root compiles from
// this module (Go files and embedded files of every package of the
// module it imports), with the flags, go.mod, go.sum and the toolchain:
// third-party code is fixed by go.sum.
func sourceHash(root string, flags []string, pkg string) (string, error) {
	cmd := exec.Command("go", slices.Concat([]string{"list"}, flags, []string{"-deps", "-f",
		`{{if and .Module .Module.Main}}{{.Dir}}{{range .GoFiles}}{{"\t"}}{{.}}{{end}}{{range .EmbedFiles}}{{"\t"}}{{.}}{{end}}{{end}}`, pkg})...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list: %w", err)
	}
	h := sha256.New()
	io.WriteString(h, runtime.Version()+"\x00"+strings.Join(flags, " ")+"\x00")
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := hashFile(h, filepath.Join(root, f)); err != nil {
			return "", err
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Split(line, "\t")
		if len(fields) < 2 {
			continue
		}
		for _, f := range fields[1:] {
			io.WriteString(h, f+"\x00")
			if err := hashFile(h, filepath.Join(fields[0], f)); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}

// Proc is a running `idgen serve`.
type Proc struct {
	URL  string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
	done chan struct{}

	mu  sync.Mutex
	log strings.Builder
}

// addrRE matches the line in which idgen serve (msg=serving addr=…, or
// "msg":"serving","addr":"…" under --log-format json), or any other
// server of ours, logs the address it listens on.
var addrRE = regexp.MustCompile(`serving addr=(\S+)|"msg":"serving","addr":"([^"]+)"`)

// Serve starts `bin serve --addr 127.0.0.1:0 args…` with env added to the
// environment, waits until it logs its address, and stops it with SIGKILL
// when the test ends if it is still running.
func Serve(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	return Start(t, bin, env, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
}

// Start is Serve for any server binary that logs "serving addr=HOST:PORT"
// on stderr, run with exactly args.
func Start(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := addrRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1] + m[2]:
				default:
				}
			}
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.Kill() })
	select {
	case a := <-addr:
		p.URL = "http://" + a
	case <-p.done:
		t.Fatalf("%s exited before serving:\n%s", bin, p.Log())
	case <-time.After(30 * time.Second):
		p.Kill()
		t.Fatalf("%s did not start within 30s:\n%s", bin, p.Log())
	}
	return p
}

// Addr returns the host:port the process listens on.
func (p *Proc) Addr() string { return strings.TrimPrefix(p.URL, "http://") }

// Log returns what the process has written to stderr so far.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// PID returns the process ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout for a graceful exit. It
// returns the exit error, if any.
func (p *Proc) Stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if s := p.cmd.ProcessState; s != nil && !s.Success() {
			return fmt.Errorf("exit: %s", s)
		}
		return nil
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("no exit within %v after SIGTERM", timeout)
	}
}

// Get fetches path and returns the status and body.
func (p *Proc) Get(ctx context.Context, client *http.Client, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
