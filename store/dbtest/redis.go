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
	return startRedis(tb, 0, nil)
}

// startRedis starts a redis-server as StartRedis does, with extra
// arguments; busPorts of them are free loopback ports it passes to
// extra, beside the server's own.
func startRedis(tb testing.TB, busPorts int, extra func(dir string, ports []int) []string) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Missing(tb, "no redis-server on PATH (apt-get install redis-server)")
	}
	// Free ports: listen, close, and let redis-server bind them. A race
	// with another process for one fails the start below, and is retried.
	for try := 0; ; try++ {
		ports := freePorts(tb, 1+busPorts)
		port, dir := ports[0], tb.TempDir()
		args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no",
			"--dir", dir, "--protected-mode", "yes", "--loglevel", "warning"}
		if extra != nil {
			args = append(args, extra(dir, ports[1:])...)
		}
		cmd := spawnRedis(tb, bin, args)
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

// spawnRedis starts redis-server with args, its log drained.
func spawnRedis(tb testing.TB, bin string, args []string) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command(bin, args...)
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
	return cmd
}

// freePorts returns n loopback ports free just now.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		defer l.Close() // held until all are picked, so that they differ
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
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
