package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idgen/idgen/internal/testkit"
	"github.com/idgen/idgen/store/dbtest"
)

const pgBin = "/usr/lib/postgresql/15/bin"

// PatroniOptions shape a Patroni cluster.
type PatroniOptions struct {
	// Nodes is the number of PostgreSQL nodes; default 3.
	Nodes int
	// Async turns synchronous_mode off: replicas stream asynchronously
	// and a failover may lose the last commits of the old leader.
	Async bool
	// TTL is Patroni's leader key TTL, which bounds the failover time;
	// default 10 s (retry_timeout 2/5 of it).
	TTL time.Duration
	// LoopWait is Patroni's loop_wait, how often each node runs its HA
	// loop; default 2 s. Patroni's own defaults are TTL 30 s and
	// loop_wait 10 s.
	LoopWait time.Duration
}

// Patroni is a running etcd plus PostgreSQL nodes under Patroni.
type Patroni struct {
	t     testing.TB
	dir   string
	u     *user.User
	opts  PatroniOptions
	etcd  *dbtest.Etcd
	Nodes []*PGNode
	// Password is the password of the idgen user (and, in this test
	// cluster, of every PostgreSQL role), for checking log redaction.
	Password string
	// DSN lists every node, read-write sessions only:
	// postgres://idgen:…@127.0.0.1:P1,…/idgen?target_session_attrs=read-write&connect_timeout=1
	DSN string
}

// PGNode is one PostgreSQL node and its Patroni.
type PGNode struct {
	Name    string
	Port    int // PostgreSQL
	APIPort int // Patroni REST API
	dir     string
	config  string
	patroni *proc
}

// Addr is 127.0.0.1:Port.
func (n *PGNode) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.Port) }

func (n *PGNode) String() string { return n.Name }

// StartPatroni starts etcd and the PostgreSQL nodes, waits until every
// node runs (and, in synchronous mode, a synchronous standby is chosen),
// and creates the idgen role and database.
func StartPatroni(t testing.TB, opts PatroniOptions) *Patroni {
	t.Helper()
	u := require(t, "postgres", "etcd", "patroni", pgBin+"/postgres", pgBin+"/pg_rewind")
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.TTL == 0 {
		opts.TTL = 10 * time.Second
	}
	if opts.LoopWait == 0 {
		opts.LoopWait = 2 * time.Second
	}
	p := &Patroni{t: t, dir: workDir(t, "idgen-patroni-", u), u: u, opts: opts, Password: secret()}
	// Patroni's postmasters are not our children: after the Patroni
	// processes (killed by their own cleanups, which run first), kill
	// every postmaster by the PID in its postmaster.pid.
	t.Cleanup(func() {
		for _, n := range p.Nodes {
			if _, err := killPIDFile(filepath.Join(n.dir, "data", "postmaster.pid"), n.dir); err != nil {
				t.Logf("%s: %v", n, err)
			}
		}
	})
	began := time.Now()
	etcdPort := p.startEtcd()
	ports := testkit.FreePorts(t, 2*opts.Nodes)
	var hosts []string
	for i := range opts.Nodes {
		n := &PGNode{Name: fmt.Sprintf("pg%d", i+1), Port: ports[2*i], APIPort: ports[2*i+1]}
		n.dir = filepath.Join(p.dir, n.Name)
		mkdirs(t, u, n.dir)
		n.config = filepath.Join(n.dir, "patroni.yml")
		writeFile(t, u, n.config, p.patroniYAML(n, etcdPort))
		p.Nodes = append(p.Nodes, n)
		hosts = append(hosts, n.Addr())
	}
	p.DSN = fmt.Sprintf("postgres://idgen:%s@%s/idgen?target_session_attrs=read-write&connect_timeout=1&sslmode=disable",
		p.Password, strings.Join(hosts, ","))

	// The first node bootstraps; the others clone it once it leads.
	p.Start(p.Nodes[0])
	if _, err := p.WaitLeader(60*time.Second, nil); err != nil {
		t.Fatalf("patroni: no leader: %v\n%s", err, p.Nodes[0].patroni.tail(30))
	}
	for _, n := range p.Nodes[1:] {
		p.Start(n)
	}
	if err := p.WaitHealthy(90 * time.Second); err != nil {
		t.Fatalf("patroni: cluster not healthy: %v\n%s", err, p.Logs(20))
	}
	p.createDatabase()
	t.Logf("patroni: %d nodes (synchronous_mode %v, ttl %v) healthy after %v; etcd on %d",
		opts.Nodes, !opts.Async, opts.TTL, time.Since(began).Round(100*time.Millisecond), etcdPort)
	return p
}

// startEtcd starts the single etcd member Patroni keeps its state in
// (dbtest's etcd, which lock/etcdstore's tests start too) and returns its
// client port. It runs as the test's own user: Patroni only talks to it.
// The v2 API stays on, as it was when this package started etcd itself.
func (p *Patroni) startEtcd() int {
	p.etcd = dbtest.StartEtcdCluster(p.t, dbtest.EtcdOptions{Args: []string{"--enable-v2=true"}})
	return p.etcd.ClientPorts[0]
}

// patroniYAML is the configuration of node n: the settings of
// docs/deploy.md, with this test's ports and directories.
func (p *Patroni) patroniYAML(n *PGNode, etcdPort int) string {
	ttl := int(p.opts.TTL.Seconds())
	return fmt.Sprintf(`scope: idgen
namespace: /service/
name: %[1]s
restapi:
  listen: 127.0.0.1:%[2]d
  connect_address: 127.0.0.1:%[2]d
etcd3:
  hosts: 127.0.0.1:%[3]d
bootstrap:
  dcs:
    ttl: %[5]d
    loop_wait: %[11]d
    retry_timeout: %[6]d
    maximum_lag_on_failover: 1048576
    synchronous_mode: %[7]v
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_log_hints: "on"
  initdb:
    - encoding: UTF8
    - data-checksums
  pg_hba:
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
postgresql:
  listen: 127.0.0.1:%[8]d
  connect_address: 127.0.0.1:%[8]d
  data_dir: %[4]s/data
  bin_dir: %[9]s
  pgpass: %[4]s/pgpass
  authentication:
    superuser: {username: postgres, password: %[10]s}
    replication: {username: replicator, password: %[10]s}
    rewind: {username: rewinder, password: %[10]s}
  parameters:
    unix_socket_directories: %[4]s
    shared_buffers: 32MB
    logging_collector: "off"
`, n.Name, n.APIPort, etcdPort, n.dir, ttl, max(ttl*2/5, 2), !p.opts.Async, n.Port, pgBin, p.Password, int(p.opts.LoopWait.Seconds()))
}

// Start starts node n's Patroni, which starts (or rejoins, by pg_rewind
// or a fresh clone) its PostgreSQL.
func (p *Patroni) Start(n *PGNode) {
	p.t.Helper()
	n.patroni = start(p.t, p.u, filepath.Join(n.dir, "patroni.out"), "patroni", n.config)
}

// Kill kills node n's Patroni, its postmaster and the postmaster's
// children with SIGKILL, as a crashed machine would, and returns once
// they are gone.
func (p *Patroni) Kill(n *PGNode) error {
	n.patroni.kill()
	_, err := killPIDFile(filepath.Join(n.dir, "data", "postmaster.pid"), n.dir)
	return err
}

// Member is one node in Patroni's GET /cluster.
type Member struct {
	Name  string `json:"name"`
	Role  string `json:"role"`  // leader, sync_standby, replica
	State string `json:"state"` // running, streaming, starting, …
	Port  int    `json:"port"`
	Lag   any    `json:"lag"`
}

// Members asks the live Patroni nodes for the cluster's members.
func (p *Patroni) Members() ([]Member, error) {
	var lastErr error
	for _, n := range p.Nodes {
		if n.patroni == nil || !n.patroni.running() {
			continue
		}
		var body struct {
			Members []Member `json:"members"`
		}
		if err := getJSON(fmt.Sprintf("http://127.0.0.1:%d/cluster", n.APIPort), &body); err != nil {
			lastErr = err
			continue
		}
		return body.Members, nil
	}
	return nil, fmt.Errorf("no Patroni REST API answered: %v", lastErr)
}

// Leader returns the node whose Patroni answers 200 on /primary, which it
// does only while its PostgreSQL runs as the leader.
func (p *Patroni) Leader() (*PGNode, error) {
	for _, n := range p.Nodes {
		if n.patroni == nil || !n.patroni.running() {
			continue
		}
		c := http.Client{Timeout: time.Second}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/primary", n.APIPort))
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node is the primary")
}

// WaitLeader waits until a node other than not leads and returns it.
func (p *Patroni) WaitLeader(timeout time.Duration, not *PGNode) (*PGNode, error) {
	var leader *PGNode
	err := testkit.WaitFor(timeout, pollEvery, func() error {
		n, err := p.Leader()
		if err != nil {
			return err
		}
		if n == not {
			return fmt.Errorf("%s still leads", n)
		}
		leader = n
		return nil
	})
	return leader, err
}

// WaitHealthy waits until every node runs, one leads, and in
// synchronous mode one is the synchronous standby.
func (p *Patroni) WaitHealthy(timeout time.Duration) error {
	return testkit.WaitFor(timeout, pollEvery, func() error {
		ms, err := p.Members()
		if err != nil {
			return err
		}
		roles := map[string]int{}
		for _, m := range ms {
			if m.State != "running" && m.State != "streaming" {
				return fmt.Errorf("%s is %s", m.Name, m.State)
			}
			roles[m.Role]++
		}
		if len(ms) != len(p.Nodes) || roles["leader"] != 1 || (!p.opts.Async && roles["sync_standby"] < 1) {
			return fmt.Errorf("members %+v", ms)
		}
		return nil
	})
}

// createDatabase creates the idgen role and database on the leader, as
// the postgres superuser.
func (p *Patroni) createDatabase() {
	p.t.Helper()
	leader, err := p.Leader()
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := p.connect(ctx, leader)
	if err != nil {
		p.t.Fatalf("connect to leader: %v", err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE idgen LOGIN PASSWORD '%s'", p.Password),
		"CREATE DATABASE idgen OWNER idgen",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			p.t.Fatalf("%s: %v", strings.Replace(q, p.Password, "…", 1), err)
		}
	}
}

// Logs returns the last n lines of every node's Patroni log, for a
// failure message.
func (p *Patroni) Logs(n int) string {
	var b strings.Builder
	for _, node := range p.Nodes {
		if node.patroni != nil {
			fmt.Fprintf(&b, "--- %s (patroni)\n%s\n", node.Name, node.patroni.tail(n))
		}
	}
	return b.String()
}

func getJSON(url string, v any) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// PauseReplication stops the leader's WAL senders with SIGSTOP, as a
// stalled network link would, and returns a function that resumes them
// with SIGCONT. While they are stopped, an asynchronous leader goes on
// committing what no replica has; a synchronous one holds its commits
// until the standby confirms them. Kill the leader before resuming and
// those commits are lost, or, synchronously, were never acknowledged.
func (p *Patroni) PauseReplication() (resume func(), err error) {
	leader, err := p.Leader()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := p.connect(ctx, leader)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_replication")
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("%s has no WAL sender", leader)
	}
	var stopped []int
	resume = func() {
		for _, pid := range stopped {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			resume()
			return nil, fmt.Errorf("stop WAL sender %d: %w", pid, err)
		}
		stopped = append(stopped, pid)
	}
	return resume, nil
}

func (p *Patroni) connect(ctx context.Context, n *PGNode) (*pgx.Conn, error) {
	return superuser(ctx, n.Name, n.Port, p.Password)
}

// superuser connects to the postgres database of the server on port as
// the postgres superuser; name labels an error.
func superuser(ctx context.Context, name string, port int, password string) (*pgx.Conn, error) {
	c, err := pgx.Connect(ctx, fmt.Sprintf("host=127.0.0.1 port=%d user=postgres password=%s dbname=postgres sslmode=disable", port, password))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// ReplicationLag returns, per replica, how many bytes of WAL the leader
// has written that the replica has not received.
func (p *Patroni) ReplicationLag() (map[string]int64, error) {
	leader, err := p.Leader()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lc, err := p.connect(ctx, leader)
	if err != nil {
		return nil, err
	}
	defer lc.Close(ctx)
	out := map[string]int64{}
	for _, n := range p.Nodes {
		if n == leader || n.patroni == nil || !n.patroni.running() {
			continue
		}
		c, err := p.connect(ctx, n)
		if err != nil {
			return nil, err
		}
		var lsn string
		err = c.QueryRow(ctx, "SELECT COALESCE(pg_last_wal_receive_lsn(), '0/0')::text").Scan(&lsn)
		c.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		var lag int64
		if err := lc.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint", lsn).Scan(&lag); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out[n.Name] = lag
	}
	return out, nil
}
