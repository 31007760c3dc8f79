package dbtest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Etcd is an etcd cluster of Debian's etcd-server (3.4) on loopback,
// started by StartEtcd or StartEtcdCluster and killed when the test ends.
// It serves plaintext only: grpc-go enforces ALPN on TLS, which etcd 3.4
// lacks.
type Etcd struct {
	// Endpoints are the members' client URLs, http://127.0.0.1:P.
	Endpoints []string
	// ClientPorts are the ports of Endpoints.
	ClientPorts []int
	members     []*etcdMember
}

type etcdMember struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// EtcdOptions shape an etcd cluster. The zero value is one member.
type EtcdOptions struct {
	// Members is the number of members; zero means 1.
	Members int
	// Args are extra flags for every member, e.g. "--enable-v2=true".
	Args []string
}

// StartEtcd starts a single-member etcd and returns it once it is
// healthy. Without the etcd binary the test skips, unless CI or
// IDGEN_REQUIRE_DOCKER=1 is set: then it fails, as a missing database
// engine does.
func StartEtcd(tb testing.TB) *Etcd {
	tb.Helper()
	return StartEtcdCluster(tb, EtcdOptions{})
}

// StartEtcdCluster starts o.Members members forming one cluster, each
// with its data and log in a directory of its own, and returns once every
// member reports itself healthy (it has a leader). Each member is started
// and killed by its PID.
func StartEtcdCluster(tb testing.TB, o EtcdOptions) *Etcd {
	tb.Helper()
	if testing.Short() {
		// As a database container is: -short is the loop without servers
		// that take seconds to start and lease TTLs of seconds to wait out.
		tb.Skip("needs etcd: skipped under -short")
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		Missing(tb, "no etcd on PATH (apt-get install etcd-server)")
	}
	if o.Members == 0 {
		o.Members = 1
	}
	ports := FreePorts(tb, 2*o.Members)
	dir := tb.TempDir()
	e := &Etcd{}
	var cluster []string
	for i := range o.Members {
		cluster = append(cluster, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	for i := range o.Members {
		c, p := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]), fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		e.Endpoints = append(e.Endpoints, c)
		e.ClientPorts = append(e.ClientPorts, ports[2*i])
		mdir := filepath.Join(dir, fmt.Sprintf("m%d", i))
		if err := os.MkdirAll(mdir, 0o700); err != nil {
			tb.Fatal(err)
		}
		args := append([]string{
			"--name", fmt.Sprintf("m%d", i), "--data-dir", filepath.Join(mdir, "data"),
			"--listen-client-urls", c, "--advertise-client-urls", c,
			"--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
			"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", filepath.Base(dir),
		}, o.Args...)
		m := &etcdMember{name: fmt.Sprintf("m%d", i), log: filepath.Join(mdir, "etcd.log"), done: make(chan struct{})}
		f, err := os.Create(m.log)
		if err != nil {
			tb.Fatal(err)
		}
		m.cmd = exec.Command(bin, args...)
		m.cmd.Stdout, m.cmd.Stderr, m.cmd.Dir = f, f, mdir
		err = m.cmd.Start()
		f.Close() // the child holds its own descriptor
		if err != nil {
			tb.Fatalf("start etcd: %v", err)
		}
		go func() { _ = m.cmd.Wait(); close(m.done) }()
		e.members = append(e.members, m)
		tb.Cleanup(func() { e.Kill(i) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for i, c := range e.Endpoints {
		for !healthy(c) {
			if time.Now().After(deadline) {
				tb.Fatalf("etcd %s not healthy after 30s:\n%s", e.members[i].name, e.Log(i, 20))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return e
}

// healthy reports whether the member at client URL c has a leader.
func healthy(c string) bool {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get(c + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Kill ends member i as a crash would, with SIGKILL to its PID, and
// waits for it to exit. Killing a member that has exited does nothing.
func (e *Etcd) Kill(i int) {
	m := e.members[i]
	select {
	case <-m.done:
		return
	default:
	}
	_ = syscall.Kill(m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.done
}

// Log returns the last n lines of member i's log.
func (e *Etcd) Log(i, n int) string {
	b, err := os.ReadFile(e.members[i].log)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
