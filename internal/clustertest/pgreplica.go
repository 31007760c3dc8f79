package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testkit"
)

// PGServer is one PostgreSQL 15 server run by this package without a
// manager: a standalone server (StartPostgres) or one side of an
// asynchronous streaming pair (StartPGReplica). Its postmaster is a child
// of the test; its data directory can be stopped, copied and put back, as
// an operator restoring a backup would.
type PGServer struct {
	Name string
	Port int
	t    testing.TB
	u    *user.User
	dir  string // owned by postgres: data/, the socket, postgres.log
	pw   string
	proc *proc
}

// Addr is 127.0.0.1:Port.
func (s *PGServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

func (s *PGServer) String() string { return s.Name }

func (s *PGServer) data() string { return filepath.Join(s.dir, "data") }

// Postgres is a standalone PostgreSQL server with an idgen role and
// database.
type Postgres struct {
	*PGServer
	// Password is the password of every role, idgen's included.
	Password string
	// DSN is idgen's --store URL for the server.
	DSN string
}

// StartPostgres initializes and starts a standalone PostgreSQL 15 server
// on a free loopback port, and creates the idgen role and database.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	u := require(t, "postgres", pgBin+"/postgres", pgBin+"/initdb")
	dir := workDir(t, "idgen-pg-", u)
	pw := secret()
	s := initPG(t, u, dir, "pg", testkit.FreePorts(t, 1)[0], pw)
	s.Start()
	s.createIdgen()
	return &Postgres{PGServer: s, Password: pw, DSN: pgDSN(pw, s)}
}

// pgDSN is idgen's --store URL for servers, in order, read-write
// sessions only.
func pgDSN(password string, servers ...*PGServer) string {
	var hosts []string
	for _, s := range servers {
		hosts = append(hosts, s.Addr())
	}
	return fmt.Sprintf("postgres://idgen:%s@%s/idgen?target_session_attrs=read-write&connect_timeout=1&sslmode=disable",
		password, strings.Join(hosts, ","))
}

// initPG runs initdb for a new server in dir/name. Every role gets
// password pw; the server listens on 127.0.0.1 only and is configured
// to be a streaming primary (wal_level replica, WAL senders).
func initPG(t testing.TB, u *user.User, dir, name string, port int, pw string) *PGServer {
	t.Helper()
	s := &PGServer{Name: name, Port: port, t: t, u: u, dir: filepath.Join(dir, name), pw: pw}
	mkdirs(t, u, s.dir)
	pwfile := filepath.Join(s.dir, "pwfile")
	writeFile(t, u, pwfile, pw+"\n")
	if out, err := runAs(u, s.dir, nil, pgBin+"/initdb", "-D", s.data(), "-U", "postgres", "--pwfile="+pwfile,
		"--auth=scram-sha-256", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb %s: %v\n%s", name, err, out)
	}
	_ = os.Remove(pwfile)
	// initdb's pg_hba.conf already admits 127.0.0.1 with scram-sha-256,
	// replication connections included.
	conf := `
listen_addresses = '127.0.0.1'
wal_level = replica
max_wal_senders = 5
hot_standby = on
shared_buffers = 32MB
logging_collector = off
`
	f, err := os.OpenFile(filepath.Join(s.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runAs runs prog args as u in dir, with env added, and returns its
// combined output.
func runAs(u *user.User, dir string, env []string, prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(prog, args...)
	cmd.Dir = dir
	uid, gid := ids(u)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	cmd.Env = append(append(os.Environ(), "HOME="+dir, "USER="+u.Username, "LOGNAME="+u.Username), env...)
	return cmd.CombinedOutput()
}

// Start starts the postmaster (port and socket directory on its command
// line, so that a copied data directory keeps its own) and waits until
// it accepts connections, as a primary or as a hot standby.
func (s *PGServer) Start() {
	s.t.Helper()
	if s.proc != nil && s.proc.running() {
		s.t.Fatalf("%s: already running", s)
	}
	s.proc = start(s.t, s.u, filepath.Join(s.dir, "postgres.log"), pgBin+"/postgres",
		"-D", s.data(), "-p", fmt.Sprint(s.Port), "-k", s.dir)
	err := testkit.WaitFor(60*time.Second, pollEvery, func() error {
		if !s.proc.running() {
			return errors.New("postgres exited")
		}
		_, err := s.Query("SELECT 1")
		return err
	})
	if err != nil {
		s.t.Fatalf("%s did not start: %v\n%s", s, err, s.proc.tail(30))
	}
}

// Stop shuts the server down cleanly (SIGINT: the fast shutdown, which
// ends the sessions and writes a checkpoint) and waits for it to exit.
func (s *PGServer) Stop() error {
	if s.proc == nil || !s.proc.running() {
		return nil
	}
	if err := syscall.Kill(s.proc.pid(), syscall.SIGINT); err != nil {
		return err
	}
	select {
	case <-s.proc.done:
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s: no exit within 60s of SIGINT", s)
	}
}

// Kill kills the postmaster and its children with SIGKILL, as a crashed
// machine would, and returns once they are gone.
func (s *PGServer) Kill() error {
	if s.proc == nil || !s.proc.running() {
		return nil
	}
	_, err := killPIDFile(filepath.Join(s.data(), "postmaster.pid"), s.data())
	s.proc.kill()
	return err
}

// Copy copies the data directory of the stopped server to a new
// directory and returns it: a cold backup.
func (s *PGServer) Copy() (string, error) {
	if s.proc != nil && s.proc.running() {
		return "", fmt.Errorf("%s: stop the server before copying its data directory", s)
	}
	dst := filepath.Join(s.dir, fmt.Sprintf("copy-%d", time.Now().UnixNano()))
	if out, err := exec.Command("cp", "-a", s.data(), dst).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy %s: %v: %s", s.data(), err, out)
	}
	return dst, nil
}

// Restore replaces the data directory of the stopped server with a copy
// that Copy made; the copy stays, for another restore.
func (s *PGServer) Restore(copyDir string) error {
	if s.proc != nil && s.proc.running() {
		return fmt.Errorf("%s: stop the server before restoring its data directory", s)
	}
	if err := os.RemoveAll(s.data()); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", copyDir, s.data()).CombinedOutput(); err != nil {
		return fmt.Errorf("restore %s: %v: %s", copyDir, err, out)
	}
	return nil
}

// Query runs one statement as the postgres superuser and returns the
// first column of its first row as text ("" without rows).
func (s *PGServer) Query(q string, args ...any) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := superuser(ctx, s.Name, s.Port, s.pw)
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", s, err)
	}
	defer rows.Close()
	var out string
	if rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return "", err
		}
		if len(vals) > 0 && vals[0] != nil {
			out = fmt.Sprint(vals[0])
		}
	}
	return out, rows.Err()
}

func (s *PGServer) createIdgen() {
	s.t.Helper()
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE idgen LOGIN PASSWORD '%s'", s.pw),
		"CREATE DATABASE idgen OWNER idgen",
	} {
		if _, err := s.Query(q); err != nil {
			s.t.Fatalf("%s: %v", strings.Replace(q, s.pw, "…", 1), err)
		}
	}
}

// PGReplica is a PostgreSQL primary and a replica streaming from it
// asynchronously, without a manager: the test decides when the replica
// stops and when it is promoted.
type PGReplica struct {
	Primary, Replica *PGServer
	// Password is the password of every role, idgen's included.
	Password string
	// DSN lists the primary, then the replica, read-write sessions
	// only: a client follows a promotion by itself.
	DSN string
	// stoppedAt is the last WAL position the replica received before
	// StopReplica.
	stoppedAt string
}

// StartPGReplica starts a primary, clones it with pg_basebackup -R into
// a replica and waits until the replica streams.
func StartPGReplica(t testing.TB) *PGReplica {
	t.Helper()
	u := require(t, "postgres", pgBin+"/postgres", pgBin+"/initdb", pgBin+"/pg_basebackup")
	dir := workDir(t, "idgen-pgreplica-", u)
	pw := secret()
	ports := testkit.FreePorts(t, 2)
	began := time.Now()
	p := &PGReplica{Password: pw}
	p.Primary = initPG(t, u, dir, "primary", ports[0], pw)
	p.Primary.Start()
	p.Primary.createIdgen()

	r := &PGServer{Name: "replica", Port: ports[1], t: t, u: u, dir: filepath.Join(dir, "replica"), pw: pw}
	mkdirs(t, u, r.dir)
	if out, err := runAs(u, r.dir, []string{"PGPASSWORD=" + pw}, pgBin+"/pg_basebackup",
		"-h", "127.0.0.1", "-p", fmt.Sprint(p.Primary.Port), "-U", "postgres",
		"-D", r.data(), "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, strings.ReplaceAll(string(out), pw, "…"))
	}
	p.Replica = r
	r.Start()
	if err := p.WaitStreaming(30 * time.Second); err != nil {
		t.Fatalf("replica: %v\n%s", err, r.proc.tail(20))
	}
	p.DSN = pgDSN(pw, p.Primary, p.Replica)
	t.Logf("postgres: primary on %d, asynchronous replica on %d, streaming after %v",
		p.Primary.Port, p.Replica.Port, time.Since(began).Round(100*time.Millisecond))
	return p
}

// WaitStreaming waits until the primary has a WAL sender in state
// streaming.
func (p *PGReplica) WaitStreaming(timeout time.Duration) error {
	return testkit.WaitFor(timeout, pollEvery, func() error {
		n, err := p.Primary.Query("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
		if err != nil {
			return err
		}
		if n != "1" {
			return fmt.Errorf("%s WAL senders streaming", n)
		}
		return nil
	})
}

// StopReplica shuts the replica down cleanly: from now on the primary
// commits what the replica does not have, as with a replica that fell
// behind.
func (p *PGReplica) StopReplica() error {
	lsn, err := p.Replica.Query("SELECT pg_last_wal_receive_lsn()::text")
	if err != nil {
		return err
	}
	p.stoppedAt = lsn
	return p.Replica.Stop()
}

// KillPrimary kills the primary with SIGKILL and returns how many bytes
// of WAL it had written that the replica never received.
func (p *PGReplica) KillPrimary() (int64, error) {
	var lost int64 = -1
	if p.stoppedAt != "" {
		v, err := p.Primary.Query("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint", p.stoppedAt)
		if err != nil {
			return 0, err
		}
		if _, err := fmt.Sscan(v, &lost); err != nil {
			return 0, fmt.Errorf("WAL lag %q: %w", v, err)
		}
	}
	return lost, p.Primary.Kill()
}

// Promote starts the replica if it is stopped (as a standby: its primary
// is gone, so it has only what it received) and promotes it, and waits
// until it accepts writes, on a new timeline.
func (p *PGReplica) Promote() error {
	r := p.Replica
	if r.proc == nil || !r.proc.running() {
		r.Start()
	}
	if v, err := r.Query("SELECT pg_promote(true, 60)"); err != nil || v != "true" {
		return fmt.Errorf("pg_promote: %q, %v", v, err)
	}
	return testkit.WaitFor(30*time.Second, pollEvery, func() error {
		v, err := r.Query("SELECT pg_is_in_recovery()")
		if err != nil {
			return err
		}
		if v != "false" {
			return errors.New("still in recovery")
		}
		return nil
	})
}

// Logs returns the last n lines of both servers' logs.
func (p *PGReplica) Logs(n int) string {
	var b strings.Builder
	for _, s := range []*PGServer{p.Primary, p.Replica} {
		fmt.Fprintf(&b, "--- %s\n%s\n", s, tailFile(filepath.Join(s.dir, "postgres.log"), n))
	}
	return b.String()
}
