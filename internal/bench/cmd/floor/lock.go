package main

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
)

// compareAndDelete is the release every Redis lock guide gives: delete
// the key only while it still holds the caller's owner.
var compareAndDelete = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// floorLocks is idgen.v1.LockService for grpc-go with Acquire and
// Release only, on Redis: the floor of idgen serve --grpc-addr's locks.
// Acquire is one SET name owner NX PX ttl, Release one EVALSHA of
// compareAndDelete; no fencing token (the grant's token is always 1), no
// waiting, no checks of name, owner or TTL beyond what Redis needs.
type floorLocks struct {
	idgenv1.UnimplementedLockServiceServer
	rdb *redis.Client
}

func (f floorLocks) Acquire(ctx context.Context, in *idgenv1.AcquireRequest) (*idgenv1.AcquireResponse, error) {
	ttl := in.GetTtl().AsDuration()
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	err := f.rdb.Do(ctx, "SET", in.GetName(), in.GetOwner(), "NX", "PX", ttl.Milliseconds()).Err()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, status.Error(codes.FailedPrecondition, "lock_held")
	case err != nil:
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &idgenv1.AcquireResponse{Grant: &idgenv1.LockGrant{Name: in.GetName(), Owner: in.GetOwner(), Token: 1,
		ExpiresAt: timestamppb.New(time.Now().Add(ttl))}}, nil
}

func (f floorLocks) Release(ctx context.Context, in *idgenv1.ReleaseRequest) (*idgenv1.ReleaseResponse, error) {
	n, err := compareAndDelete.Run(ctx, f.rdb, []string{in.GetName()}, in.GetOwner()).Int()
	switch {
	case err != nil && !errors.Is(err, redis.Nil):
		return nil, status.Error(codes.Unavailable, err.Error())
	case n != 1:
		return nil, status.Error(codes.FailedPrecondition, "lock_not_held")
	}
	return &idgenv1.ReleaseResponse{}, nil
}
