package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testkit"
)

const galeraLib = "/usr/lib/galera/libgalera_smm.so"

// Galera is a running MariaDB Galera cluster.
type Galera struct {
	t     testing.TB
	dir   string
	u     *user.User
	Nodes []*GaleraNode
	// Password is the idgen user's password, for checking log redaction.
	Password string
	gcomm    string
}

// GaleraNode is one mariadbd of the cluster.
type GaleraNode struct {
	Name  string
	Port  int // MySQL protocol
	dir   string
	cnf   string
	proc  *proc
	ports [3]int // group communication, IST, SST
}

// Addr is 127.0.0.1:Port.
func (n *GaleraNode) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.Port) }

func (n *GaleraNode) String() string { return n.Name }

// StartGalera starts a Galera cluster of n nodes (3 if n is 0): the first
// bootstraps a new cluster, the others join it by state transfer. It
// waits until every node is Synced and creates the idgen user and
// database.
func StartGalera(t testing.TB, n int) *Galera {
	t.Helper()
	u := require(t, "mysql", "mariadbd", "mariadb-install-db", "mariadb", "rsync", galeraLib)
	if n == 0 {
		n = 3
	}
	g := &Galera{t: t, dir: workDir(t, "idgen-galera-", u), u: u, Password: secret()}
	ports := testkit.FreePorts(t, 4*n)
	var peers []string
	for i := range n {
		node := &GaleraNode{Name: fmt.Sprintf("node%d", i+1), Port: ports[4*i],
			ports: [3]int{ports[4*i+1], ports[4*i+2], ports[4*i+3]}}
		node.dir = filepath.Join(g.dir, node.Name)
		mkdirs(t, u, node.dir, filepath.Join(node.dir, "data"), filepath.Join(node.dir, "run"))
		node.cnf = filepath.Join(node.dir, "my.cnf")
		g.Nodes = append(g.Nodes, node)
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", node.ports[0]))
	}
	g.gcomm = "gcomm://" + strings.Join(peers, ",")
	for _, node := range g.Nodes {
		writeFile(t, u, node.cnf, g.myCnf(node))
	}
	began := time.Now()

	first := g.Nodes[0]
	if err := installMariaDB(first.cnf); err != nil {
		t.Fatal(err)
	}
	g.start(first, "--wsrep-new-cluster")
	if err := g.WaitSynced(first, 60*time.Second); err != nil {
		t.Fatalf("galera: %s: %v\n%s", first, err, first.proc.tail(30))
	}
	g.SQL(first, fmt.Sprintf("CREATE DATABASE idgen; CREATE USER 'idgen'@'127.0.0.1' IDENTIFIED BY '%s'; GRANT ALL ON idgen.* TO 'idgen'@'127.0.0.1'", g.Password))
	// One joiner at a time: two state transfers from one donor at once
	// would be slower, not faster.
	for _, node := range g.Nodes[1:] {
		g.start(node)
		if err := g.WaitSynced(node, 90*time.Second); err != nil {
			t.Fatalf("galera: %s: %v\n%s", node, err, node.proc.tail(30))
		}
	}
	t.Logf("galera: %d nodes Synced after %v", n, time.Since(began).Round(100*time.Millisecond))
	return g
}

// myCnf is the configuration of node: the settings of docs/deploy.md,
// with this test's ports and directories.
func (g *Galera) myCnf(n *GaleraNode) string {
	return fmt.Sprintf(`[mysqld]
datadir=%[1]s/data
socket=%[1]s/run/mysqld.sock
pid-file=%[1]s/run/mysqld.pid
log-error=%[1]s/error.log
port=%[2]d
bind-address=127.0.0.1
skip-name-resolve
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=64M
innodb_log_file_size=48M
performance_schema=OFF
wsrep_on=ON
wsrep_provider=%[3]s
wsrep_cluster_name=idgen
wsrep_cluster_address=%[4]s
wsrep_node_name=%[5]s
wsrep_node_address=127.0.0.1:%[6]d
wsrep_node_incoming_address=127.0.0.1:%[2]d
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:%[8]d
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:%[6]d;ist.recv_addr=127.0.0.1:%[7]d;gcache.size=64M"
`, n.dir, n.Port, galeraLib, g.gcomm, n.Name, n.ports[0], n.ports[1], n.ports[2])
}

func (g *Galera) start(n *GaleraNode, extra ...string) {
	args := append([]string{"--defaults-file=" + n.cnf}, extra...)
	n.proc = start(g.t, g.u, filepath.Join(n.dir, "mariadbd.out"), "mariadbd", args...)
}

// DSN returns an idgen --store URL for the nodes in order: the first is
// where connections go, the others are fallbacks. query, if not empty,
// is added as the URL's query (session variables such as
// wsrep_sync_wait=1).
func (g *Galera) DSN(query string, nodes ...*GaleraNode) string {
	var hosts []string
	for _, n := range nodes {
		hosts = append(hosts, n.Addr())
	}
	dsn := fmt.Sprintf("mysql://idgen:%s@%s/idgen", g.Password, strings.Join(hosts, ","))
	if query != "" {
		dsn += "?" + query
	}
	return dsn
}

// Kill kills node n's mariadbd with SIGKILL and waits for it to exit.
func (g *Galera) Kill(n *GaleraNode) { n.proc.kill() }

var recoveredRE = regexp.MustCompile(`WSREP: Recovered position: (\S+:-?\d+)`)

// Rejoin restarts a killed node. It recovers the last committed position
// from InnoDB first (mariadbd --wsrep-recover), so that the node asks for
// an incremental state transfer from a donor's gcache instead of a full
// copy, and returns once the node is Synced.
func (g *Galera) Rejoin(n *GaleraNode, timeout time.Duration) error {
	recoverLog := filepath.Join(n.dir, "recover.log")
	_ = os.Remove(recoverLog)
	rec := start(g.t, g.u, filepath.Join(n.dir, "recover.out"), "mariadbd",
		"--defaults-file="+n.cnf, "--wsrep-recover", "--log-error="+recoverLog)
	select {
	case <-rec.done:
	case <-time.After(60 * time.Second):
		rec.kill()
		return fmt.Errorf("%s: mariadbd --wsrep-recover did not finish in 60s", n)
	}
	var extra []string
	b, _ := os.ReadFile(recoverLog)
	if m := recoveredRE.FindSubmatch(b); m != nil {
		extra = append(extra, "--wsrep-start-position="+string(m[1]))
	}
	g.start(n, extra...)
	return g.WaitSynced(n, timeout)
}

// WaitSynced waits until node n reports wsrep_local_state_comment Synced
// and wsrep_ready ON.
func (g *Galera) WaitSynced(n *GaleraNode, timeout time.Duration) error {
	return testkit.WaitFor(timeout, pollEvery, func() error {
		if !n.proc.running() {
			return fmt.Errorf("mariadbd exited")
		}
		out, err := g.query(n, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('wsrep_local_state_comment','wsrep_ready') ORDER BY VARIABLE_NAME")
		if err != nil {
			return err
		}
		if f := strings.Fields(out); len(f) != 2 || f[0] != "Synced" || f[1] != "ON" {
			return fmt.Errorf("state %q", out)
		}
		return nil
	})
}

// Status returns a global status variable of node n, such as
// wsrep_cluster_size.
func (g *Galera) Status(n *GaleraNode, name string) (string, error) {
	out, err := g.query(n, fmt.Sprintf("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = '%s'", name))
	return strings.TrimSpace(out), err
}

// SQL runs statements on node n as root over its Unix socket and fails
// the test on an error.
func (g *Galera) SQL(n *GaleraNode, stmts string) string {
	g.t.Helper()
	out, err := g.query(n, stmts)
	if err != nil {
		g.t.Fatalf("%s: %v", n, err)
	}
	return out
}

func (g *Galera) query(n *GaleraNode, stmts string) (string, error) {
	return mariadbQuery(filepath.Join(n.dir, "run", "mysqld.sock"), g.Password, stmts)
}

// mariadbQuery runs statements as root over the Unix socket and returns
// what they print, tab-separated, without column names. password is
// blanked out of an error.
func mariadbQuery(socket, password, stmts string) (string, error) {
	cmd := exec.Command("mariadb", "--no-defaults", "--socket="+socket,
		"--user=root", "--batch", "--skip-column-names", "--connect-timeout=2", "-e", stmts)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mariadb: %v: %s", err, strings.ReplaceAll(strings.TrimSpace(string(out)), password, "…"))
	}
	return string(out), nil
}

// installMariaDB creates the system tables of a new data directory, with
// root reachable over the Unix socket only.
func installMariaDB(cnf string) error {
	cmd := exec.Command("mariadb-install-db", "--defaults-file="+cnf, "--user=mysql", "--skip-test-db",
		"--auth-root-authentication-method=socket")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
	}
	return nil
}

// Logs returns the last n lines of every node's error log.
func (g *Galera) Logs(n int) string {
	var b strings.Builder
	for _, node := range g.Nodes {
		fmt.Fprintf(&b, "--- %s\n%s\n", node.Name, tailFile(filepath.Join(node.dir, "error.log"), n))
	}
	return b.String()
}
