package dbtest

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// StartRedis runs a redis-server (Debian's redis-server package) on a
// loopback port of its own, without persistence, and returns its
// address; it is stopped when tb ends. Without the binary the test
// skips, unless CI or IDGEN_REQUIRE_DOCKER=1 is set: then it fails, as a
// missing database engine does.
func StartRedis(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Missing(tb, "no redis-server on PATH (apt-get install redis-server)")
	}
	// A free port: listen, close, and let redis-server bind it. A race
	// with another process for it fails the start below, and is retried.
	for try := 0; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no",
			"--dir", tb.TempDir(), "--protected-mode", "yes", "--loglevel", "warning")
		out, err := cmd.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start redis-server: %v", err)
		}
		go func() { // drain, so that the server never blocks on its log
			s := bufio.NewScanner(out)
			for s.Scan() {
			}
		}()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if waitTCP(addr, 10*time.Second) {
			tb.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
			return addr
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if try == 2 {
			tb.Fatal(fmt.Errorf("redis-server did not listen on %s", addr))
		}
	}
}

func waitTCP(addr string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			_ = c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
