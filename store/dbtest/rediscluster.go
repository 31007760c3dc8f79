package dbtest

import (
	"bufio"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartRedisCluster runs a Redis Cluster of n masters and no replicas,
// each a redis-server as StartRedis runs one, joined with redis-cli
// --cluster create, and returns their addresses once every node reports
// cluster_state:ok. The servers are stopped when tb ends; without the
// binaries the test skips as StartRedis does.
func StartRedisCluster(tb testing.TB, n int) []string {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Missing(tb, "no redis-cli on PATH (apt-get install redis-tools)")
	}
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = startRedis(tb, 1, func(dir string, bus []int) []string {
			return []string{"--cluster-enabled", "yes", "--cluster-config-file", dir + "/nodes.conf",
				"--cluster-port", strconv.Itoa(bus[0]), "--cluster-node-timeout", "5000"}
		})
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	out, err := exec.Command(cli, append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		if !waitClusterOK(cli, a, 30*time.Second) {
			tb.Fatalf("redis cluster node %s did not reach cluster_state:ok", a)
		}
	}
	return addrs
}

// waitClusterOK waits until the node at addr sees every slot served.
func waitClusterOK(cli, addr string, d time.Duration) bool {
	host, port, _ := net.SplitHostPort(addr)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		out, err := exec.Command(cli, "-h", host, "-p", port, "CLUSTER", "INFO").Output()
		if err == nil {
			s := bufio.NewScanner(strings.NewReader(string(out)))
			for s.Scan() {
				if strings.TrimSpace(s.Text()) == "cluster_state:ok" {
					return true
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
