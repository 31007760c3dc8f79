package dbtest

import (
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// RedisServer is a redis-server, run as StartRedis runs one (no
// persistence unless extra asks for it), that a test can crash and
// start again on the same port: what a restart does to the data.
type RedisServer struct {
	Addr string
	bin  string
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// StartRedisServer starts a RedisServer with extra arguments (such as
// "--replicaof", host, port) and stops it when tb ends.
func StartRedisServer(tb testing.TB, extra ...string) *RedisServer {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Missing(tb, "no redis-server on PATH (apt-get install redis-server)")
	}
	for try := 0; ; try++ {
		port := freePorts(tb, 1)[0]
		args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no",
			"--dir", tb.TempDir(), "--protected-mode", "yes", "--loglevel", "warning"}, extra...)
		r := &RedisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), bin: bin, args: args}
		r.cmd = spawnRedis(tb, bin, args)
		if waitTCP(r.Addr, 10*time.Second) {
			tb.Cleanup(r.Kill)
			return r
		}
		r.Kill()
		if try == 2 {
			tb.Fatalf("redis-server did not listen on %s", r.Addr)
		}
	}
}

// Restart kills the server as a crash would (SIGKILL) and starts it
// again with the same arguments and port.
func (r *RedisServer) Restart(tb testing.TB) {
	tb.Helper()
	r.Kill()
	r.mu.Lock()
	r.cmd = spawnRedis(tb, r.bin, r.args)
	r.mu.Unlock()
	if !waitTCP(r.Addr, 10*time.Second) {
		tb.Fatalf("redis-server did not listen on %s after a restart", r.Addr)
	}
}

// Kill ends the server as a crash would (SIGKILL); Restart starts it
// again.
func (r *RedisServer) Kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
}
