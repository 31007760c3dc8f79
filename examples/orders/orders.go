package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/idempotency/dedup"
	"github.com/idgen/idgen/idempotency/middleware"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store"
	_ "github.com/idgen/idgen/store/mysql"    // mysql:// stores
	_ "github.com/idgen/idgen/store/postgres" // postgres:// stores
	_ "github.com/idgen/idgen/store/sqlite"   // sqlite:// stores
)

// Config configures the service. The zero value of every field but DSN
// selects the default written next to it.
type Config struct {
	// DSN is idgen's store, which also holds the service's own tables:
	// sqlite://PATH, postgres://… or mysql://….
	DSN string
	// LockTTL is how long a user's lock lasts unless renewed: 10s.
	LockTTL time.Duration
	// LockWait bounds how long an order waits for its user's lock: 5s.
	LockWait time.Duration
	// KeyTTL is how long an Idempotency-Key's answer is kept: 24h.
	KeyTTL time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
}

// service is the order flow: the idempotency middleware, then the
// user's lock, then an ID, then the order and its outbox row in one
// transaction that the guard admits, then the recorded answer.
type service struct {
	cfg    Config
	st     *store.Store
	db     *sql.DB
	d      lock.Dialect
	ids    *segment.Allocator
	locks  *lock.Locker
	guard  *lock.Guard
	keeper *idempotency.Keeper
	mw     *middleware.Middleware
	dedup  *dedup.Deduper
	q      statements
}

// statements are the service's SQL, in the store's placeholders.
type statements struct {
	userCount, userAdd, userSet, orderAdd, outboxAdd, orderGet, outboxUnsent, outboxSent, shipmentAdd, shipmentCount string
}

// schema is the service's own tables, in SQL all three databases read.
// users.orders is read, then written, by each order: without the
// per-user lock, two concurrent orders of one user would lose one count.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS orders (id BIGINT PRIMARY KEY, user_id VARCHAR(100) NOT NULL, item VARCHAR(100) NOT NULL, qty INTEGER NOT NULL, token BIGINT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS outbox (id BIGINT PRIMARY KEY, topic VARCHAR(100) NOT NULL, payload TEXT NOT NULL, sent INTEGER NOT NULL DEFAULT 0)`,
	`CREATE TABLE IF NOT EXISTS users (user_id VARCHAR(100) PRIMARY KEY, orders INTEGER NOT NULL)`,
	// One row per shipment, no unique key of its own: a second shipment
	// of one order would show as a second row, which dedup prevents.
	`CREATE TABLE IF NOT EXISTS shipments (order_id BIGINT NOT NULL)`,
}

// open opens the store, migrates it and the service's tables, and puts
// the flow together. Close releases everything.
func open(ctx context.Context, cfg Config) (_ *service, err error) {
	if cfg.LockTTL == 0 {
		cfg.LockTTL = 10 * time.Second
	}
	if cfg.LockWait == 0 {
		cfg.LockWait = 5 * time.Second
	}
	if cfg.KeyTTL == 0 {
		cfg.KeyTTL = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	scheme, _, _ := strings.Cut(cfg.DSN, "://")
	d := lock.Dialect(scheme)
	if d != lock.Postgres && d != lock.MySQL && d != lock.SQLite {
		return nil, fmt.Errorf("orders: the store %q is not sqlite://, postgres:// or mysql://", scheme)
	}
	st, err := store.Open(ctx, cfg.DSN, store.Options{})
	if err != nil {
		return nil, err
	}
	s := &service{cfg: cfg, st: st, db: st.DB(), d: d}
	s.q = statements{
		userCount:    s.sql(`SELECT orders FROM users WHERE user_id = ?`),
		userAdd:      s.sql(`INSERT INTO users (user_id, orders) VALUES (?, 1)`),
		userSet:      s.sql(`UPDATE users SET orders = ? WHERE user_id = ?`),
		orderAdd:     s.sql(`INSERT INTO orders (id, user_id, item, qty, token) VALUES (?, ?, ?, ?, ?)`),
		outboxAdd:    s.sql(`INSERT INTO outbox (id, topic, payload) VALUES (?, ?, ?)`),
		orderGet:     s.sql(`SELECT user_id, item, qty, token FROM orders WHERE id = ?`),
		outboxUnsent: s.sql(`SELECT id, payload FROM outbox WHERE sent = 0 ORDER BY id LIMIT 100`),
		outboxSent:   s.sql(`UPDATE outbox SET sent = 1 WHERE id = ?`),
		shipmentAdd:  s.sql(`INSERT INTO shipments (order_id) VALUES (?)`),
		// Rows, not a flag: a second shipment must be visible as 2.
		shipmentCount: s.sql(`SELECT COUNT(*) FROM shipments WHERE order_id = ?`),
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	if _, err := st.Migrate(ctx, cfg.Logger); err != nil {
		return nil, err
	}
	for _, q := range schema {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("orders: create the service's tables: %w", err)
		}
	}
	if s.guard, err = lock.NewGuard(lock.GuardConfig{Dialect: d}); err != nil {
		return nil, err
	}
	if err := s.guard.CreateTable(ctx, s.db); err != nil {
		return nil, err
	}
	if s.ids, err = segment.New(st, segment.Options{AutoCreate: true}); err != nil {
		return nil, err
	}
	if s.locks, err = lock.New(st.Locks(), lock.Options{Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if s.keeper, err = idempotency.New(st.Idempotency(), idempotency.Config{TTL: cfg.KeyTTL}); err != nil {
		return nil, err
	}
	if s.dedup, err = dedup.New(st.Dedup(), dedup.Config{Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	s.dedup.Start() // sweeps records past their retention
	s.mw, err = middleware.New(s.keeper, middleware.Options{
		Headers: []string{"Location"},
		// Keys are per user: one user cannot replay another's answer.
		Scope: func(r *http.Request) (string, error) { return user(r) },
	})
	return s, err
}

// Close hands unused IDs back and closes the store last.
func (s *service) Close() error {
	var errs []error
	if s.dedup != nil {
		errs = append(errs, s.dedup.Close())
	}
	if s.keeper != nil {
		errs = append(errs, s.keeper.Close())
	}
	if s.ids != nil {
		errs = append(errs, s.ids.Close())
	}
	return errors.Join(append(errs, s.st.Close())...)
}

// user is the caller: X-User stands in for an authenticated session.
func user(r *http.Request) (string, error) {
	u := r.Header.Get("X-User")
	if u == "" || len(u) > 100 {
		return "", errors.New("X-User must name the user, in 1 to 100 bytes")
	}
	return u, nil
}

func (s *service) routes() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.POST("/orders", s.mw.Gin(), s.create)
	r.GET("/orders/:id", s.get)
	r.GET("/readyz", s.ready)
	return r
}

// ready answers 200 while the store answers: the container's health
// check (orders health), which compose waits for.
func (s *service) ready(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	if err := s.db.PingContext(ctx); err != nil {
		fail(c, http.StatusServiceUnavailable, "not_ready", "the store does not answer")
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
}

type orderIn struct {
	Item string `json:"item"`
	Qty  int    `json:"qty"`
}

type orderOut struct {
	ID    string `json:"id"`
	User  string `json:"user"`
	Item  string `json:"item"`
	Qty   int    `json:"qty"`
	Token string `json:"token"` // the user's lock token the write was admitted with
}

// orderState is GET /orders/{id}: the order, and how often the consumer
// shipped it, so that a black-box test (deploy's compose stack test)
// can see exactly-once from outside.
type orderState struct {
	orderOut
	Shipped int `json:"shipped"`
}

func (s *service) create(c *gin.Context) {
	u, err := user(c.Request)
	if err != nil {
		fail(c, http.StatusUnauthorized, "no_user", err.Error())
		return
	}
	var in orderIn
	if err := c.ShouldBindJSON(&in); err != nil || in.Item == "" || len(in.Item) > 100 || in.Qty < 1 {
		fail(c, http.StatusBadRequest, "invalid_order", `send {"item": "…" (1 to 100 bytes), "qty": 1 or more}`)
		return
	}
	out, err := s.place(c.Request.Context(), u, in)
	switch {
	case errors.Is(err, lock.ErrHeld):
		c.Header("Retry-After", "1")
		fail(c, http.StatusServiceUnavailable, "user_busy", "another order of this user is being placed; retry")
	case err != nil:
		s.cfg.Logger.Error("orders: place an order", "user", u, "err", err)
		c.Header("Retry-After", "1")
		fail(c, http.StatusServiceUnavailable, "unavailable", "the order was not placed; retry with the same Idempotency-Key")
	default:
		c.Header("Location", "/orders/"+out.ID)
		c.JSON(http.StatusCreated, out)
	}
}

// place runs one order under its user's lock. Owners are per request,
// so that two requests of one user are two holders, not one reentrant.
func (s *service) place(ctx context.Context, u string, in orderIn) (orderOut, error) {
	var out orderOut
	wctx, cancel := context.WithTimeout(ctx, s.cfg.LockWait)
	defer cancel()
	le, err := s.locks.Acquire(wctx, "user:"+u, "orders/"+nonce(), s.cfg.LockTTL)
	if err != nil {
		return out, err
	}
	defer func() {
		// Released even when the request ended, but not waited on
		// forever: an unreleased lease lapses after its TTL anyway.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = le.Release(rctx)
	}()
	// The lease's context ends if the lock is lost; the guard refuses a
	// stale token in any case, since a pause can outlast both.
	ctx = le.Context()
	id, err := s.ids.Next(ctx, "order")
	if err != nil {
		return out, err
	}
	payload, err := json.Marshal(orderOut{ID: strconv.FormatInt(id, 10), User: u, Item: in.Item, Qty: in.Qty})
	if err != nil {
		return out, err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.guard.Check(ctx, tx, "user:"+u, le.Token()); err != nil {
			return err
		}
		var n int
		switch err := tx.QueryRowContext(ctx, s.q.userCount, u).Scan(&n); {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := tx.ExecContext(ctx, s.q.userAdd, u); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			if _, err := tx.ExecContext(ctx, s.q.userSet, n+1, u); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, s.q.orderAdd, id, u, in.Item, in.Qty, le.Token()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q.outboxAdd, id, "orders", string(payload))
		return err
	})
	if err != nil {
		return out, err
	}
	return orderOut{ID: strconv.FormatInt(id, 10), User: u, Item: in.Item, Qty: in.Qty, Token: strconv.FormatInt(le.Token(), 10)}, nil
}

func (s *service) get(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		fail(c, http.StatusBadRequest, "invalid_id", "an order ID is a decimal number")
		return
	}
	var o orderState
	var token int64
	err = s.db.QueryRowContext(c.Request.Context(), s.q.orderGet, id).Scan(&o.User, &o.Item, &o.Qty, &token)
	if err == nil {
		err = s.db.QueryRowContext(c.Request.Context(), s.q.shipmentCount, id).Scan(&o.Shipped)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		fail(c, http.StatusNotFound, "no_order", "no order "+c.Param("id"))
	case err != nil:
		s.cfg.Logger.Error("orders: read an order", "id", id, "err", err)
		fail(c, http.StatusServiceUnavailable, "unavailable", "retry")
	default:
		o.ID, o.Token = c.Param("id"), strconv.FormatInt(token, 10)
		c.JSON(http.StatusOK, o)
	}
}

// inTx runs fn in a transaction, committed if fn returns nil. (The
// SQLite store's pool begins with BEGIN IMMEDIATE, as lock.Guard asks.)
func (s *service) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// sql rewrites ? placeholders as PostgreSQL's $n.
func (s *service) sql(q string) string {
	if s.d != lock.Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func fail(c *gin.Context, status int, code, msg string) {
	c.JSON(status, gin.H{"error": gin.H{"code": code, "message": msg}})
}

// nonce is 8 random bytes in hex.
func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
