package httpbench

import (
	"bufio"
	"io"
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

// proc is a server process this test started: the floor or idgen serve.
// It is stopped by its own PID, never by name.
type proc struct {
	addr string // host:port
	cmd  *exec.Cmd
	done chan struct{}

	mu  sync.Mutex
	log strings.Builder
}

// Both idgen ("msg=serving addr=…") and the floor ("serving addr=…") log
// their address in this form.
var servingRE = regexp.MustCompile(`serving addr=(\S+)`)

// startProc starts bin with args and env added, waits until it logs its
// address, and stops it when the test ends.
func startProc(t testing.TB, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = io.Discard
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
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
			if m := servingRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	select {
	case p.addr = <-addr:
	case <-p.done:
		t.Fatalf("%s exited before serving:\n%s", bin, p.logText())
	case <-time.After(30 * time.Second):
		p.stop()
		t.Fatalf("%s did not serve within 30s:\n%s", bin, p.logText())
	}
	return p
}

func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// stop sends SIGTERM, and SIGKILL after 15 s, to this process only.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// buildFloor builds cmd/floor of this module into dir.
func buildFloor(t testing.TB, dir string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(dir, "floor")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/floor")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/floor: %v\n%s", err, out)
	}
	return bin
}
