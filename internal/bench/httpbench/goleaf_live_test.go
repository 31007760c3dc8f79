package httpbench

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // goLeaf's table, created before it starts
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store/dbtest"
)

// goLeafEnv names a goLeaf binary: the Go port of Meituan Leaf that
// serves gRPC through kratos on grpc-go's transport
// (github.com/younglifestyle/goLeaf), built from a fetched copy outside
// this repository and never part of it. Unset, TestLiveGRPCNative
// measures idgen and its floors alone.
const goLeafEnv = "IDGEN_BENCH_GOLEAF"

// goLeafTag is the tag both servers are asked for in the peer rows.
const goLeafTag = "order"

// goLeafMethod is goLeaf's segment-mode call: leafgrpc.v1.IdRequest
// {string tag = 1} in, IdReply {int64 id = 1} out. Those messages are, on
// the wire, google.protobuf.StringValue and Int64Value (one field
// numbered 1 of the same type), which is what the load sends and reads,
// so that no generated code of goLeaf's enters this module.
const goLeafMethod = "/leafgrpc.v1.LeafSegmentService/GenSegmentId"

// goLeafCall is GRPCLoad.Call for goLeaf: one ID of goLeafTag.
func goLeafCall(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
	out := new(wrapperspb.Int64Value)
	if err := cc.Invoke(ctx, goLeafMethod, wrapperspb.String(goLeafTag), out); err != nil {
		return 0, err
	}
	if out.GetValue() <= 0 {
		return 0, errNoID
	}
	return out.GetValue(), nil
}

// startGoLeaf runs the goLeaf binary bin in segment mode on the MySQL or
// MariaDB server db, with goLeafTag created at step 1000 (idgen's default
// step for a new tag), and returns its gRPC address and PID once it
// answers.
func startGoLeaf(t *testing.T, bin string, db *dbtest.Server) (string, int) {
	t.Helper()
	u, err := url.Parse(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	pass, _ := u.User.Password()
	dsn := fmt.Sprintf("%s:%s@tcp(%s)%s?charset=utf8&parseTime=True&loc=Local", u.User.Username(), pass, u.Host, u.Path)
	conn, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	// The table of goLeaf's README, with the tag, before goLeaf starts:
	// it reads its tags from the table at start and once a minute.
	for _, q := range []string{
		"CREATE TABLE leaf_alloc (biz_tag varchar(128) NOT NULL DEFAULT '', max_id bigint(20) NOT NULL DEFAULT '1', " +
			"step int(11) NOT NULL, description varchar(256) DEFAULT NULL, " +
			"update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, " +
			"created_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP, auto_clean tinyint(1) DEFAULT 0 NULL, PRIMARY KEY (biz_tag)) ENGINE=InnoDB",
		"INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('" + goLeafTag + "', 1, 1000, 'idgen benchmark')",
	} {
		if _, err := conn.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("goLeaf's table: %v", err)
		}
	}
	ports := dbtest.FreePorts(t, 2)
	grpcAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	conf := fmt.Sprintf(`server:
  server_name: "leaf"
  http:
    addr: 127.0.0.1:%d
    timeout: 5s
  grpc:
    addr: %s
    timeout: 5s
data:
  database:
    segment_enable: true
    table_name: "leaf_alloc"
    driver: mysql
    source: %s
    open_conn: 50
    idle: 10
    idle_timeout: 14400s
  etcd:
    snowflake_enable: false
    discovery_enable: false
    endpoints: ["127.0.0.1:2379"]
    dial_timeout: 2s
    time_deviation: 50
`, ports[1], grpcAddr, dsn)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-conf", path)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	if err := testtime.WaitFor(30*time.Second, 200*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := goLeafCall(ctx, cc)
		return err
	}); err != nil {
		t.Fatalf("goLeaf did not answer: %v\n%s", err, out.String())
	}
	return grpcAddr, cmd.Process.Pid
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}
