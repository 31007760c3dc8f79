package lockcheck

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idgen/idgen/store/dbtest"
)

// TestEtcd checks lock/etcdstore on a three-member etcd cluster whose
// leader is killed (SIGKILL) under the running workers. Leases are 2 s,
// etcd's shortest with its default election timeout.
func TestEtcd(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := dbtest.StartEtcdCluster(t, dbtest.EtcdOptions{Members: 3})
	var hosts []string
	for _, ep := range e.Endpoints {
		hosts = append(hosts, strings.TrimPrefix(ep, "http://"))
	}
	run(t, backend{name: "etcd", dsn: "etcd://" + strings.Join(hosts, ","), ttl: 2 * time.Second,
		failover: func(t *testing.T, f *fleet) (string, error) {
			cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				return "", err
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i, ep := range e.Endpoints {
				st, err := cli.Status(ctx, ep)
				if err == nil && st.Header.MemberId == st.Leader {
					e.Kill(i)
					return fmt.Sprintf("member killed: member %d of 3, the leader", i), nil
				}
			}
			return "", fmt.Errorf("no leader among %v", e.Endpoints)
		}})
}
