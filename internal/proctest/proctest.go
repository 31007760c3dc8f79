// Package proctest runs the real idgen binary in tests: it builds it once,
// starts `idgen serve` processes on loopback ports, and talks to them over
// real HTTP, so end-to-end tests exercise exactly what users run.
package proctest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary builds ./cmd/idgen into dir and returns its path.
func Binary(t testing.TB, dir string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(dir, "idgen")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/idgen")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/idgen: %v\n%s", err, out)
	}
	return bin
}

// Tool builds a command pinned in api/tools/go.mod (grpcurl,
// grpc-health-probe) into dir and returns its path: the third-party
// clients the end-to-end tests run against idgen serve.
func Tool(t testing.TB, dir, pkg string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "api", "tools")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s (api/tools): %v\n%s", pkg, err, out)
	}
	return bin
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
