package clustertest

import (
	"fmt"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testkit"
)

// MariaDBServer is one mariadbd of a MariaDBReplica.
type MariaDBServer struct {
	Name     string
	Port     int
	ServerID int
	dir      string
	cnf      string
	proc     *proc
}

// Addr is 127.0.0.1:Port.
func (s *MariaDBServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

func (s *MariaDBServer) String() string { return s.Name }

func (s *MariaDBServer) socket() string { return filepath.Join(s.dir, "run", "mysqld.sock") }

// MariaDBReplica is a MariaDB primary and a replica that replicates from
// it asynchronously by GTID (CHANGE MASTER TO … MASTER_USE_GTID =
// slave_pos), read-only until promoted: MariaDB's default replication,
// without a manager.
type MariaDBReplica struct {
	t       testing.TB
	u       *user.User
	Primary *MariaDBServer
	Replica *MariaDBServer
	// Password is the idgen user's password (and the replication
	// user's), for checking log redaction.
	Password string
	// stoppedAt is the replica's gtid_slave_pos when its IO thread
	// stopped.
	stoppedAt string
}

// StartMariaDBReplica starts a primary and a replica, both with binary
// logs (the replica logs what it applies, so that it can become a
// primary), creates the idgen user and database on the primary and waits
// until the replica has them.
func StartMariaDBReplica(t testing.TB) *MariaDBReplica {
	t.Helper()
	u := require(t, "mysql", "mariadbd", "mariadb-install-db", "mariadb")
	dir := workDir(t, "idgen-mariadb-", u)
	r := &MariaDBReplica{t: t, u: u, Password: secret()}
	ports := testkit.FreePorts(t, 2)
	began := time.Now()
	for i, name := range []string{"primary", "replica"} {
		s := &MariaDBServer{Name: name, Port: ports[i], ServerID: i + 1, dir: filepath.Join(dir, name)}
		mkdirs(t, u, s.dir, filepath.Join(s.dir, "data"), filepath.Join(s.dir, "run"))
		s.cnf = filepath.Join(s.dir, "my.cnf")
		writeFile(t, u, s.cnf, s.myCnf(i == 1))
		if err := installMariaDB(s.cnf); err != nil {
			t.Fatal(err)
		}
		s.proc = start(t, u, filepath.Join(s.dir, "mariadbd.out"), "mariadbd", "--defaults-file="+s.cnf)
		if err := testkit.WaitFor(60*time.Second, pollEvery, func() error {
			if !s.proc.running() {
				return fmt.Errorf("mariadbd exited")
			}
			_, err := r.query(s, "SELECT 1")
			return err
		}); err != nil {
			t.Fatalf("%s: %v\n%s", s, err, tailFile(filepath.Join(s.dir, "error.log"), 30))
		}
		if i == 0 {
			r.Primary = s
		} else {
			r.Replica = s
		}
	}
	r.SQL(r.Primary, fmt.Sprintf(`CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY '%[1]s';
GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1';
CREATE DATABASE idgen;
CREATE USER 'idgen'@'127.0.0.1' IDENTIFIED BY '%[1]s';
GRANT ALL ON idgen.* TO 'idgen'@'127.0.0.1'`, r.Password))
	// An empty gtid_slave_pos starts from the primary's first binary
	// log: the replica replays the users and the database too.
	r.SQL(r.Replica, fmt.Sprintf(`CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='repl',
MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1; START SLAVE`, r.Primary.Port, r.Password))
	if err := testkit.WaitFor(60*time.Second, pollEvery, func() error {
		out, err := r.query(r.Replica, "SELECT COUNT(*) FROM mysql.user WHERE User = 'idgen'")
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "1" {
			return fmt.Errorf("the replica lacks the idgen user: %s", r.slaveStatus())
		}
		return nil
	}); err != nil {
		t.Fatalf("replica: %v\n%s", err, r.Logs(20))
	}
	t.Logf("mariadb: primary on %d, asynchronous replica on %d, replicating after %v",
		r.Primary.Port, r.Replica.Port, time.Since(began).Round(100*time.Millisecond))
	return r
}

// myCnf is the configuration of s; a replica starts read-only, so that
// idgen, whose user lacks the READ ONLY ADMIN privilege, cannot write to
// it before it is promoted.
func (s *MariaDBServer) myCnf(replica bool) string {
	cnf := fmt.Sprintf(`[mysqld]
datadir=%[1]s/data
socket=%[1]s/run/mysqld.sock
pid-file=%[1]s/run/mysqld.pid
log-error=%[1]s/error.log
port=%[2]d
bind-address=127.0.0.1
skip-name-resolve
server_id=%[3]d
log_bin=binlog
log_slave_updates=ON
binlog_format=ROW
default_storage_engine=InnoDB
innodb_buffer_pool_size=64M
innodb_log_file_size=48M
performance_schema=OFF
`, s.dir, s.Port, s.ServerID)
	if replica {
		cnf += "read_only=ON\n"
	}
	return cnf
}

// DSN returns idgen's --store URL: the primary, then the replica, which
// the store's connector falls back to when the primary refuses
// connections. query, if not empty, is added as the URL's query.
func (r *MariaDBReplica) DSN(query string) string {
	dsn := fmt.Sprintf("mysql://idgen:%s@%s,%s/idgen", r.Password, r.Primary.Addr(), r.Replica.Addr())
	if query != "" {
		dsn += "?" + query
	}
	return dsn
}

// StopReplicaIO stops the replica's IO thread: the primary goes on
// committing what the replica never receives.
func (r *MariaDBReplica) StopReplicaIO() error {
	if _, err := r.query(r.Replica, "STOP SLAVE IO_THREAD"); err != nil {
		return err
	}
	pos, err := r.query(r.Replica, "SELECT @@GLOBAL.gtid_slave_pos")
	r.stoppedAt = strings.TrimSpace(pos)
	return err
}

// KillPrimary kills the primary's mariadbd with SIGKILL and returns the
// primary's and the replica's GTID positions at that moment: the
// transactions between them are lost.
func (r *MariaDBReplica) KillPrimary() (primary, replica string, err error) {
	pos, err := r.query(r.Primary, "SELECT @@GLOBAL.gtid_binlog_pos")
	if err != nil {
		return "", "", err
	}
	r.Primary.proc.kill()
	return strings.TrimSpace(pos), r.stoppedAt, nil
}

// Promote makes the replica a primary: it applies what it has received,
// forgets its primary and accepts writes.
func (r *MariaDBReplica) Promote() error {
	if err := testkit.WaitFor(30*time.Second, pollEvery, func() error {
		out, err := r.query(r.Replica, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Slave_SQL' AND STATE LIKE 'Slave has read all relay log%'")
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "1" {
			return fmt.Errorf("relay log not applied yet: %s", r.slaveStatus())
		}
		return nil
	}); err != nil {
		return err
	}
	_, err := r.query(r.Replica, "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF")
	return err
}

// SQL runs statements on s as root over its Unix socket and fails the
// test on an error.
func (r *MariaDBReplica) SQL(s *MariaDBServer, stmts string) string {
	r.t.Helper()
	out, err := r.query(s, stmts)
	if err != nil {
		r.t.Fatalf("%s: %v", s, err)
	}
	return out
}

func (r *MariaDBReplica) query(s *MariaDBServer, stmts string) (string, error) {
	out, err := mariadbQuery(s.socket(), r.Password, stmts)
	if err != nil {
		return "", fmt.Errorf("%s: %w", s, err)
	}
	return out, nil
}

// slaveStatus is the replica's IO and SQL thread state and last errors,
// for a failure message.
func (r *MariaDBReplica) slaveStatus() string {
	out, err := r.query(r.Replica, "SHOW SLAVE STATUS\\G")
	if err != nil {
		return err.Error()
	}
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		l := strings.TrimSpace(line)
		for _, k := range []string{"Slave_IO_Running:", "Slave_SQL_Running:", "Last_IO_Error:", "Last_SQL_Error:", "Gtid_IO_Pos:"} {
			if strings.HasPrefix(l, k) {
				keep = append(keep, strings.ReplaceAll(l, r.Password, "…"))
			}
		}
	}
	return strings.Join(keep, "; ")
}

// Logs returns the last n lines of both servers' error logs.
func (r *MariaDBReplica) Logs(n int) string {
	var b strings.Builder
	for _, s := range []*MariaDBServer{r.Primary, r.Replica} {
		fmt.Fprintf(&b, "--- %s\n%s\n", s, tailFile(filepath.Join(s.dir, "error.log"), n))
	}
	return b.String()
}
