package sqlstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idgen/idgen/internal/testtime"
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
	// The listener starts at the first subscribe; it connects once both
	// waiters are in, or its wake-up could come before b's.
	both := make(chan struct{})
	l := NewLocks(nil, Dialect{}, LockStatements{}, nil, func(context.Context, string) (Listener, error) {
		<-both
		return fakeListener{ch}, nil
	})
	defer l.Close()
	mine, unsubscribe := l.subscribe("a")
	defer unsubscribe()
	other, unsubscribeOther := l.subscribe("b")
	defer unsubscribeOther()
	close(both)
	if !testtime.Until(5*time.Second, time.Millisecond, l.push) {
		t.Fatal("the listener never listened")
	}
	// Connecting woke everyone: anything released before is looked at.
	for _, w := range []<-chan struct{}{mine, other} {
		select {
		case <-w:
		case <-time.After(5 * time.Second):
			t.Fatal("connecting did not wake every waiter")
		}
	}
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

// In a synctest bubble, whose clock moves only while everything waits:
// the fifth connection comes after the backoff's 10+20+40+80 ms, not in
// a spin.
func TestLocks_ListenerBacksOffAfterLosses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var connects atomic.Int64
		fifth := make(chan struct{})
		l := NewLocks(nil, Dialect{}, LockStatements{}, nil, func(context.Context, string) (Listener, error) {
			if connects.Add(1) == 5 {
				close(fifth)
			}
			ch := make(chan string)
			close(ch) // dropped as soon as it listens
			return fakeListener{ch}, nil
		})
		start := time.Now()
		_, unsubscribe := l.subscribe("a")
		<-fifth
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Errorf("5 connections to a server that drops each at once in %v; want the backoff's 150 ms at least", d)
		}
		unsubscribe()
		l.Close()
	})
}
