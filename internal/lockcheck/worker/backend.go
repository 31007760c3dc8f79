package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/lock/etcdstore"
	"github.com/idgen/idgen/lock/redisstore"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/fence"
)

// backend opens the lock store dsn names: redis://HOST:PORT[,HOST:PORT]
// (the first that says it is a master), etcd://HOST:PORT[,…] (a
// cluster's members), or a SQL store's DSN, fenced as serve fences it.
// close ends it.
func backend(ctx context.Context, dsn string, fenceTTL time.Duration) (b lock.Backend, close func() error, err error) {
	switch {
	case strings.HasPrefix(dsn, "redis://"):
		addrs := strings.Split(strings.TrimPrefix(dsn, "redis://"), ",")
		rdb := redis.NewClient(&redis.Options{Dialer: masterDialer(addrs), DialTimeout: time.Second, MaxRetries: -1})
		s, err := redisstore.New(ctx, rdb, redisstore.Options{})
		if err != nil {
			_ = rdb.Close()
			return nil, nil, err
		}
		return s, rdb.Close, nil
	case strings.HasPrefix(dsn, "etcd://"):
		cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(strings.TrimPrefix(dsn, "etcd://"), ","),
			DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, nil, err
		}
		s, err := etcdstore.New(ctx, cli, etcdstore.Options{})
		if err != nil {
			_ = cli.Close()
			return nil, nil, err
		}
		return s, func() error { return errors.Join(s.Close(), cli.Close()) }, nil
	}
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		return nil, nil, err
	}
	err = st.ConfigureFence(fence.Config{LeaseTTL: fenceTTL}, nil)
	if err == nil {
		err = st.RecordFence(ctx)
	}
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return st.Locks(), st.Close, nil
}

// masterDialer connects to the first of addrs whose ROLE is master: a
// client that follows a failover to a promoted replica without Sentinel.
func masterDialer(addrs []string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var errs []string
		for _, a := range addrs {
			probe := redis.NewClient(&redis.Options{Addr: a, DialTimeout: time.Second, MaxRetries: -1})
			role, err := probe.Do(ctx, "ROLE").Slice()
			_ = probe.Close()
			if err != nil || len(role) == 0 || role[0] != "master" {
				errs = append(errs, fmt.Sprintf("%s: %v %v", a, role, err))
				continue
			}
			var d net.Dialer
			return d.DialContext(ctx, network, a)
		}
		return nil, fmt.Errorf("no Redis master among %s", strings.Join(errs, "; "))
	}
}
