package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/idgen/idgen/lock"
)

// Guarded is the resource's side of the lock for data kept in Redis: it
// runs cmds, in one script and so atomically, only if token is at least
// the highest token any Guarded call on resource has carried, and
// raises that fence to token; otherwise it writes nothing and returns
// an error wrapping lock.ErrStaleToken. Equal tokens pass, so that one
// holder can write more than once.
//
// Each command is a Redis command with its arguments, as redis.Do
// takes them: []any{"HSET", "{acct:7}:balance", "cents", 1200}. On a
// cluster its keys must hash to resource's slot: put "{resource}" in
// them, as the fence key does (FenceKey). The fence key has no TTL: it
// must outlive every lease on the resource, so delete it with the
// resource. As in a MULTI, a command that fails stops the script but
// does not undo the commands before it.
//
// The fence lives in the same Redis as the data it guards, so that a
// restart or failover that loses one loses both, or keeps both as far
// as replication got: a write the new master lost took its fence with
// it, and the writes it kept are fenced by the tokens that wrote them.
func (s *Store) Guarded(ctx context.Context, resource string, token int64, cmds ...[]any) error {
	if resource == "" || strings.ContainsAny(resource, "{}") {
		return fmt.Errorf("%w: redisstore: resource %q must be non-empty and brace-free, to be a hash tag", lock.ErrInvalidName, resource)
	}
	if token < 1 {
		return fmt.Errorf("%w: token %d", lock.ErrStaleToken, token)
	}
	args := []any{strconv.FormatInt(token, 10)}
	for _, c := range cmds {
		args = append(args, len(c))
		args = append(args, c...)
	}
	v, err := guardScript.Run(ctx, s.rdb, []string{s.FenceKey(resource)}, args...).StringSlice()
	if err != nil {
		return fmt.Errorf("redisstore: guarded write to %q: %w", resource, err)
	}
	if v[0] == "stale" {
		return fmt.Errorf("%w: %q has accepted token %s; token %d lost the lock", lock.ErrStaleToken, resource, v[1], token)
	}
	return nil
}

// FenceKey is the key holding resource's fence, the highest token a
// Guarded write to it has carried: Prefix + "fence:{" + resource + "}".
func (s *Store) FenceKey(resource string) string {
	return s.opts.Prefix + "fence:{" + resource + "}"
}
