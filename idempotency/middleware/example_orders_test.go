package middleware_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	_ "modernc.org/sqlite" // the orders table

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/idempotency/middleware"
	"github.com/idgen/idgen/idgentest"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store/sqlite"
)

// orderService is the order flow of the pattern idgen grew from, on
// gin: POST /orders takes an Idempotency-Key through the middleware,
// asks idgen for the order's ID with the same key passed on, and
// inserts the order under that ID as its primary key. A retry of the
// order replays its answer; were the middleware's record lost, idgen
// would still give the retry the same ID, and the primary key would
// refuse a second row.
type orderService struct {
	db  *sql.DB
	ids *client.Client
}

func (s *orderService) routes(m *middleware.Middleware) *gin.Engine {
	r := gin.New()
	r.POST("/orders", m.Gin(), s.create)
	return r
}

func (s *orderService) create(c *gin.Context) {
	var in struct {
		Item string `json:"item"`
		Qty  int    `json:"qty"`
	}
	if err := c.ShouldBindJSON(&in); err != nil || in.Item == "" || in.Qty < 1 {
		c.JSON(http.StatusBadRequest, gin.H{"error": gin.H{"code": "invalid_order", "message": "send {\"item\": \"…\", \"qty\": 1 or more}"}})
		return
	}
	ctx := c.Request.Context()
	user := c.GetHeader("X-User")
	if key, err := idempotency.ParseKey(c.GetHeader(idempotency.KeyHeader)); err == nil {
		// The same key, qualified by the user: this service is one
		// caller of idgen for all its users, whose keys may collide.
		ctx = client.WithIdempotencyKey(ctx, user+"/"+key)
	}
	id, err := s.ids.Next(ctx, "order")
	if err != nil {
		c.JSON(http.StatusServiceUnavailable, gin.H{"error": gin.H{"code": "unavailable", "message": "no order ID; retry"}})
		return
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO orders (id, user_id, item, qty) VALUES (?, ?, ?, ?)`, id, user, in.Item, in.Qty); err != nil {
		// The primary key: this order exists already.
		c.JSON(http.StatusConflict, gin.H{"error": gin.H{"code": "order_exists", "message": "order " + strconv.FormatInt(id, 10) + " exists"}})
		return
	}
	c.Header("Location", "/orders/"+strconv.FormatInt(id, 10))
	c.JSON(http.StatusCreated, gin.H{"id": strconv.FormatInt(id, 10), "item": in.Item, "qty": in.Qty})
}

// newOrders runs the order service on gin over a real idgen server
// (idgentest), both keeping keys for ttl on clock c; the service's keys are in
// its own SQLite file, next to its orders.
func newOrders(t *testing.T, ttl time.Duration, c *testtime.Clock) (url string, db *sql.DB) {
	t.Helper()
	gin.SetMode(gin.TestMode)
	ids := idgentest.NewServer(t, &idgentest.Options{IdempotencyTTL: ttl, IdempotencyNow: c.Now})
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id TEXT NOT NULL, item TEXT NOT NULL, qty INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys, err := sqlite.Open(ctx, filepath.Join(dir, "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keys.Close() })
	if _, err := keys.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	k, err := idempotency.New(keys.Idempotency(), idempotency.Config{TTL: ttl, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	m, err := middleware.New(k, middleware.Options{
		Headers: []string{"Location"},
		Scope: func(r *http.Request) (string, error) {
			if u := r.Header.Get("X-User"); u != "" {
				return u, nil
			}
			return "", errors.New("no user")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := &orderService{db: db, ids: ids.Client()}
	ts := httptest.NewServer(svc.routes(m))
	t.Cleanup(ts.Close)
	return ts.URL, db
}

type order struct {
	status   int
	id       string
	replayed bool
}

func placeOrder(t *testing.T, url, key string) order {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/orders", bytes.NewReader([]byte(`{"item":"book","qty":2}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", "ann")
	req.Header.Set(idempotency.KeyHeader, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return order{}
	}
	defer resp.Body.Close()
	var out struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return order{resp.StatusCode, out.ID, resp.Header.Get(idempotency.ReplayedHeader) == "true"}
}

func rows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The order flow's three cases: a retried order gets the same ID and
// one row; a double click (two simultaneous requests) makes one order;
// a replay after the TTL is a new order.
func TestOrders(t *testing.T) {
	c := newClock()
	url, db := newOrders(t, time.Second, c)

	first := placeOrder(t, url, "order-1")
	retry := placeOrder(t, url, "order-1")
	if first.status != 201 || first.id == "" || retry.status != 201 || retry.id != first.id || !retry.replayed || rows(t, db) != 1 {
		t.Fatalf("retried order: %+v then %+v, %d rows; want the same ID replayed and 1 row", first, retry, rows(t, db))
	}

	var wg sync.WaitGroup
	var clicks [2]order
	for i := range clicks {
		wg.Go(func() { clicks[i] = placeOrder(t, url, "order-2") })
	}
	wg.Wait()
	if clicks[0].status != 201 || clicks[1].status != 201 || clicks[0].id != clicks[1].id || clicks[0].id == first.id || rows(t, db) != 2 {
		t.Fatalf("double click: %+v and %+v, %d rows; want one new order, answered twice", clicks[0], clicks[1], rows(t, db))
	}

	// Both keys, the service's and idgen's, live a second.
	c.Advance(1500 * time.Millisecond)
	later := placeOrder(t, url, "order-1")
	if later.status != 201 || later.replayed || later.id == first.id || rows(t, db) != 3 {
		t.Fatalf("after the TTL: %+v (first %s), %d rows; want a new order", later, first.id, rows(t, db))
	}
}
