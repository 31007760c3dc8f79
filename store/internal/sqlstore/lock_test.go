package sqlstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// fakeListener hands out the names sent on ch, and fails once ch is
// closed: a connection that drops.
type fakeListener struct{ ch chan string }

func (f fakeListener) Next(ctx context.Context) (string, error) {
	select {
	case n, ok := <-f.ch:
		if !ok {
			return "", errors.New("connection lost")
		}
		return n, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (f fakeListener) Close() error { return nil }

func TestLocks_ListenerWakesWaitersOfTheName(t *testing.T) {
	ch := make(chan string)
	l := NewLocks(nil, Dialect{}, LockStatements{}, nil, func(context.Context, string) (Listener, error) {
		return fakeListener{ch}, nil
	})
	defer l.Close()
	mine, unsubscribe := l.subscribe("a")
	defer unsubscribe()
	other, unsubscribeOther := l.subscribe("b")
	defer unsubscribeOther()
	for deadline := time.Now().Add(5 * time.Second); !l.push(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listener never listened")
		}
	}
	// Connecting woke everyone: anything released before is looked at.
	<-mine
	<-other
	ch <- "a"
	select {
	case <-mine:
	case <-time.After(5 * time.Second):
		t.Fatal("a notification for a did not wake a's waiter")
	}
	select {
	case <-other:
		t.Fatal("a notification for a woke b's waiter")
	case <-time.After(20 * time.Millisecond):
	}
}

func TestLocks_ListenerBacksOffAfterLosses(t *testing.T) {
	var connects atomic.Int64
	l := NewLocks(nil, Dialect{}, LockStatements{}, nil, func(context.Context, string) (Listener, error) {
		connects.Add(1)
		ch := make(chan string)
		close(ch) // dropped as soon as it listens
		return fakeListener{ch}, nil
	})
	_, unsubscribe := l.subscribe("a")
	time.Sleep(200 * time.Millisecond)
	unsubscribe()
	l.Close()
	// 10, 20, 40, 80 ms: a handful, not a spin.
	if n := connects.Load(); n < 2 || n > 6 {
		t.Fatalf("%d connections in 200 ms to a server that drops each at once; want a backoff", n)
	}
	if l.push() {
		t.Fatal("waiters are told to rely on a listener that is gone")
	}
}
