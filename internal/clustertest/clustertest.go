// Package clustertest starts real database clusters for tests, from the
// programs of Debian's packages: a single-node etcd with three PostgreSQL
// 15 nodes under Patroni (patroni, etcd-server, postgresql-15), and a
// three-node MariaDB Galera cluster (mariadb-server, galera-4, rsync);
// and, without a manager, a standalone PostgreSQL server (whose data
// directory a test can copy and put back), an asynchronous PostgreSQL
// primary with a streaming replica, and an asynchronous MariaDB primary
// with a GTID replica, whose replica a test stops, then promotes after
// killing the primary.
//
// Every node runs on loopback with ports picked at start and its data in
// a directory of its own under a fresh temporary directory, as the
// postgres or mysql user; a PostgreSQL or MariaDB service the machine may
// run is left alone. Every process is started and killed by PID, and
// t.Cleanup kills whatever is left and removes the directory.
//
// Without the programs, or without root (needed to run the servers as
// their users), the tests skip, unless CI or IDGEN_REQUIRE_DOCKER=1 is set,
// as in store/dbtest: then they fail. .ci/run installs the packages.
package clustertest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idgen/idgen/store/dbtest"
)

// require skips or fails t unless every program in progs exists, the
// test runs as root and the OS user exists.
func require(t testing.TB, osUser string, progs ...string) *user.User {
	t.Helper()
	if testing.Short() {
		t.Skip("a database cluster (several real servers and failovers): skipped under -short")
	}
	var missing []string
	for _, p := range progs {
		if strings.HasPrefix(p, "/") {
			if _, err := os.Stat(p); err != nil {
				missing = append(missing, p)
			}
		} else if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	u, uerr := user.Lookup(osUser)
	var why string
	switch {
	case len(missing) > 0:
		why = "missing " + strings.Join(missing, ", ")
	case uerr != nil:
		why = "no OS user " + osUser
	case os.Geteuid() != 0:
		why = "not root (the servers run as the " + osUser + " user)"
	default:
		return u
	}
	dbtest.Missing(t, "cluster test: "+why+"; install the Debian packages as .ci/run does, and run as root")
	return nil
}

// secret returns a random password, distinctive enough that a test can
// search logs for it.
func secret() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "pw" + hex.EncodeToString(b)
}

// workDir creates a temporary directory owned by u and readable by it,
// removed when the test ends (after the processes are killed: cleanups
// run last-registered first).
func workDir(t testing.TB, prefix string, u *user.User) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	chown(t, dir, u)
	return dir
}

func ids(u *user.User) (uid, gid int) {
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// chown gives path to u, with mode 0700 for directories.
func chown(t testing.TB, path string, u *user.User) {
	t.Helper()
	uid, gid := ids(u)
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// mkdirs creates directories under root owned by u with mode 0700, as
// PostgreSQL and MariaDB want their data directories.
func mkdirs(t testing.TB, u *user.User, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		chown(t, p, u)
	}
}

// writeFile writes a file owned by u, readable by u only.
func writeFile(t testing.TB, u *user.User, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	chown(t, path, u)
}

// proc is a server process this package started, as user u, with its
// output appended to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// start runs prog args as u with stdout and stderr appended to logPath.
// t.Cleanup kills it if it still runs.
func start(t testing.TB, u *user.User, logPath, prog string, args ...string) *proc {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(prog, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = filepath.Dir(logPath)
	uid, gid := ids(u)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Setpgid: true}
	cmd.Env = append(os.Environ(), "HOME="+filepath.Dir(logPath), "USER="+u.Username, "LOGNAME="+u.Username)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", prog, err)
	}
	p := &proc{name: filepath.Base(prog), cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// pid is the process ID.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// running reports whether the process has not exited.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the process, by its PID, and waits for it.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	_ = syscall.Kill(p.pid(), syscall.SIGKILL)
	<-p.done
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string { return tailFile(p.log, n) }

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// killPIDFile sends SIGKILL to the process whose PID is the first line of
// path (a postmaster.pid), if it runs and its command line contains mark,
// and to its children, and waits up to 10 s for it to be gone. It returns the PID, or 0 if
// there was none. The mark keeps a stale PID file from killing another
// process that got the PID since.
func killPIDFile(path, mark string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s: no PID in %q", path, first)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), mark) {
		return 0, nil // gone, or the PID is someone else's now
	}
	// Its children too, listed while they are still its children: a
	// crash takes them all at once, and a backend or WAL sender left
	// running could still send something.
	children := childrenOf(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return 0, nil
		}
		return 0, err
	}
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	// Not our child: wait until it is gone (or a zombie of init).
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return pid, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return pid, fmt.Errorf("pid %d still alive 10s after SIGKILL", pid)
}

// childrenOf returns the PIDs whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After "pid (comm) ": state, then ppid.
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE …; comm may hold spaces, so look after the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// pollEvery is how often the rigs look again at a cluster they wait for
// (testkit.WaitFor).
const pollEvery = 100 * time.Millisecond
