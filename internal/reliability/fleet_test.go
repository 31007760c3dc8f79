package reliability_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	// SQL drivers for reading and editing worker_node directly.
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store"
)

const adminToken = "reliability-admin-token"

// fleet is the idgen serve processes of one scenario, all on one
// database and started with the same flags. Each slot holds one live
// process at a time; a killed process is replaced in its slot by a new
// one, and the load clients of the slot follow it.
type fleet struct {
	t    *testing.T
	bin  string
	env  []string
	args []string
	ttl  time.Duration
	db   *sqlDB
	// slotArgs, if set, adds serve flags per slot, such as a --store or
	// --mode of its own.
	slotArgs [][]string
	// presence: the processes hold presence leases, not worker leases
	// (--snowflake=false), and log no worker claim.
	presence bool
	ctl      *http.Client // probes and admin calls

	slots []atomic.Pointer[instance]

	mu  sync.Mutex
	all []*instance // every process started, in start order
}

// newFleet prepares n slots for processes on dsn with a worker lease TTL
// of ttl and extra serve flags; start fills them.
func newFleet(t *testing.T, dsn string, n int, ttl time.Duration, extra ...string) *fleet {
	t.Helper()
	f := &fleet{
		t:   t,
		bin: binary(t),
		env: []string{"IDGEN_STORE=" + dsn},
		args: append([]string{"--lease-ttl", ttl.String(), "--access-log=false", "--admin-token", adminToken,
			"--shutdown-timeout", "10s"}, extra...),
		ttl:   ttl,
		ctl:   &http.Client{Timeout: 10 * time.Second},
		slots: make([]atomic.Pointer[instance], n),
	}
	// A SQLite file is read through idgen only: f.db stays nil.
	if !strings.HasPrefix(dsn, "sqlite://") {
		f.db = openSQL(t, dsn)
	}
	return f
}

// instance is one `idgen serve` process.
type instance struct {
	seq    int // start order in the fleet, from 0
	slot   int
	p      *proctest.Proc
	url    string
	start  time.Time // when the process was started
	ready  time.Time // when it logged its address
	claims []claim   // worker IDs claimed, from its log; the first at start

	killed time.Time // zero unless killed with SIGKILL
	final  leaseRow  // its worker_node row read after the kill, if it held one
	held   bool      // final is set
}

func (i *instance) String() string {
	pid := 0
	if i.p != nil {
		pid = i.p.PID()
	}
	return fmt.Sprintf("instance #%d (slot %d, pid %d, worker %d)", i.seq, i.slot, pid, i.worker())
}

// worker returns the worker ID claimed at start, or -1.
func (i *instance) worker() int64 {
	if len(i.claims) == 0 {
		return -1
	}
	return i.claims[0].worker
}

// claim is a worker lease claim as the process logged it.
type claim struct {
	owner     string
	worker    int64
	at        int64 // Unix ms of the claim on the process's clock: expiry less TTL
	expiresAt int64 // Unix ms
	floor     int64 // Unix ms of the lease's LastTimestamp: no ID at or before it; 0 for none
}

var claimRE = regexp.MustCompile(`msg="snowflake: worker ID claimed" owner=(\S+) worker_id=(\d+) expires_at=(\S+) last_timestamp=(\S+)`)

// claimsIn parses every "worker ID claimed" line of a process log.
func claimsIn(log string, ttl time.Duration) ([]claim, error) {
	var out []claim
	for _, m := range claimRE.FindAllStringSubmatch(log, -1) {
		w, _ := strconv.ParseInt(m[2], 10, 64)
		exp, err := time.Parse(time.RFC3339Nano, m[3])
		if err != nil {
			return nil, fmt.Errorf("expires_at %q: %w", m[3], err)
		}
		last, err := time.Parse(time.RFC3339Nano, m[4])
		if err != nil {
			return nil, fmt.Errorf("last_timestamp %q: %w", m[4], err)
		}
		c := claim{owner: strings.Trim(m[1], `"`), worker: w, expiresAt: exp.UnixMilli(), at: exp.Add(-ttl).UnixMilli()}
		if last.Year() > 1 {
			c.floor = last.UnixMilli()
		}
		out = append(out, c)
	}
	return out, nil
}

// start starts a process in slot, replacing whatever was there, and
// returns it once it serves.
func (f *fleet) start(slot int) *instance {
	f.t.Helper()
	t0 := time.Now()
	args := f.args
	if slot < len(f.slotArgs) {
		args = append(append([]string(nil), args...), f.slotArgs[slot]...)
	}
	p := proctest.Serve(f.t, f.bin, f.env, args...)
	inst := &instance{slot: slot, p: p, url: p.URL, start: t0, ready: time.Now()}
	claims, err := claimsIn(p.Log(), f.ttl)
	switch {
	case f.presence && !strings.Contains(p.Log(), `msg="presence lease"`):
		f.t.Fatalf("no presence lease in the log of %s:\n%s", p.URL, p.Log())
	case !f.presence && (err != nil || len(claims) == 0):
		f.t.Fatalf("no worker claim in the log of %s (%v):\n%s", p.URL, err, p.Log())
	}
	inst.claims = claims
	f.mu.Lock()
	inst.seq = len(f.all)
	f.all = append(f.all, inst)
	f.mu.Unlock()
	f.slots[slot].Store(inst)
	return inst
}

// kill ends the process in slot with SIGKILL and reads its lease row,
// which the dead process can no longer change. The slot keeps pointing
// at the dead process until start replaces it.
func (f *fleet) kill(slot int) *instance {
	f.t.Helper()
	inst := f.slots[slot].Load()
	inst.p.Kill()
	inst.killed = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	row, ok, err := f.db.leaseOf(ctx, inst.lastClaim().owner)
	if err != nil {
		f.t.Fatalf("read the lease of killed %s: %v", inst, err)
	}
	inst.final, inst.held = row, ok
	return inst
}

func (i *instance) lastClaim() claim { return i.claims[len(i.claims)-1] }

// refreshClaims re-reads the claims from the process log: a process that
// lost its lease claims again, possibly another worker ID.
func (f *fleet) refreshClaims() {
	f.mu.Lock()
	all := append([]*instance(nil), f.all...)
	f.mu.Unlock()
	for _, inst := range all {
		if c, err := claimsIn(inst.p.Log(), f.ttl); err == nil && len(c) > 0 {
			inst.claims = c
		}
	}
}

// instances returns every process started so far.
func (f *fleet) instances() []*instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*instance(nil), f.all...)
}

// live returns the process of every slot.
func (f *fleet) live() []*instance {
	out := make([]*instance, len(f.slots))
	for i := range f.slots {
		out[i] = f.slots[i].Load()
	}
	return out
}

// stopAll stops every live process with SIGTERM and checks that each
// drained and exited cleanly.
func (f *fleet) stopAll() {
	f.t.Helper()
	for _, inst := range f.live() {
		if inst == nil || !inst.killed.IsZero() {
			continue
		}
		if err := inst.p.Stop(20 * time.Second); err != nil {
			f.t.Errorf("graceful stop of %s: %v\n%s", inst, err, tail(inst.p.Log(), 20))
		}
	}
}

// workerStatus is the snowflake part of GET /admin/segments.
type workerStatus struct {
	WorkerID int64  `json:"worker_id"`
	Ready    bool   `json:"ready"`
	Error    string `json:"error"`
}

// workerOf asks a process for its snowflake worker over the admin API.
func (f *fleet) workerOf(inst *instance) (workerStatus, error) {
	req, err := http.NewRequest(http.MethodGet, inst.url+"/admin/segments", nil)
	if err != nil {
		return workerStatus{}, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := f.ctl.Do(req)
	if err != nil {
		return workerStatus{}, err
	}
	defer resp.Body.Close()
	var body struct {
		Snowflake *workerStatus `json:"snowflake"`
	}
	if resp.StatusCode != http.StatusOK {
		return workerStatus{}, fmt.Errorf("GET /admin/segments: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Snowflake == nil {
		return workerStatus{}, fmt.Errorf("GET /admin/segments: no snowflake worker (%v)", err)
	}
	return *body.Snowflake, nil
}

// checkDistinctWorkers asserts that the live processes hold distinct
// worker IDs and returns them by slot.
func (f *fleet) checkDistinctWorkers(when string) []int64 {
	f.t.Helper()
	// A process whose renewals failed (a starved machine: the tests share
	// two cores) refuses snowflake IDs until it claims again, as it
	// should; it gets a few lease TTLs to, and only then is reported.
	// Two processes on one worker ID are reported at once.
	var ids []int64
	var unready, dups []string
	settled := testtime.Until(4*f.ttl, 200*time.Millisecond, func() bool {
		ids, unready, dups = nil, nil, nil
		seen := map[int64]*instance{}
		for _, inst := range f.live() {
			w, err := f.workerOf(inst)
			if err != nil {
				f.t.Errorf("%s: worker of %s: %v", when, inst, err)
				continue
			}
			if !w.Ready || w.WorkerID < 0 {
				unready = append(unready, fmt.Sprintf("%s has no usable worker ID: %+v\n%s", inst, w, tail(inst.p.Log(), 30)))
				continue
			}
			if other, dup := seen[w.WorkerID]; dup {
				dups = append(dups, fmt.Sprintf("%s and %s both hold worker ID %d", other, inst, w.WorkerID))
			}
			seen[w.WorkerID] = inst
			ids = append(ids, w.WorkerID)
		}
		return len(dups) > 0 || len(unready) == 0
	})
	for _, d := range dups {
		f.t.Errorf("%s: %s", when, d)
	}
	if !settled {
		for _, u := range unready {
			f.t.Errorf("%s, %v later: %s", when, 4*f.ttl, u)
		}
	}
	return ids
}

// get fetches path from a process with the control client.
func (f *fleet) get(inst *instance, path string) (int, string, http.Header, error) {
	resp, err := f.ctl.Get(inst.url + path)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, err
}

// runtimeSample is what /metrics says about a process's resources.
type runtimeSample struct {
	at         time.Time
	phase      string
	slot       int
	goroutines float64
	rss        float64 // bytes
}

// sample reads go_goroutines and process_resident_memory_bytes.
func (f *fleet) sample(inst *instance, phase string) (runtimeSample, error) {
	s := runtimeSample{at: time.Now(), phase: phase, slot: inst.slot}
	resp, err := f.ctl.Get(inst.url + "/metrics")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	found := 0
	for sc.Scan() {
		var dst *float64
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "go_goroutines "):
			dst = &s.goroutines
		case strings.HasPrefix(line, "process_resident_memory_bytes "):
			dst = &s.rss
		default:
			continue
		}
		_, v, _ := strings.Cut(line, " ")
		if *dst, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			return s, fmt.Errorf("/metrics: %q: %w", line, err)
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if found != 2 {
		return s, fmt.Errorf("/metrics lacks go_goroutines or process_resident_memory_bytes")
	}
	return s, nil
}

// sqlDB reads and edits idgen's tables directly, for checks and for
// faults the service cannot be asked to inject.
type sqlDB struct {
	db       *sql.DB
	postgres bool
}

// openSQL opens the database of an idgen DSN (postgres:// or mysql://).
func openSQL(t *testing.T, dsn string) *sqlDB {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	var d *sqlDB
	switch u.Scheme {
	case "postgres", "postgresql":
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		d = &sqlDB{db: db, postgres: true}
	case "mysql":
		pass, _ := u.User.Password()
		db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)%s", u.User.Username(), pass, u.Host, u.Path))
		if err != nil {
			t.Fatal(err)
		}
		d = &sqlDB{db: db}
	default:
		t.Fatalf("reliability tests need PostgreSQL or MySQL, not %q", u.Scheme)
	}
	d.db.SetMaxOpenConns(2)
	t.Cleanup(func() { _ = d.db.Close() })
	return d
}

// bind rewrites ? placeholders as $n for PostgreSQL.
func (d *sqlDB) bind(q string) string {
	if !d.postgres {
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

// leaseRow is a row of worker_node; times in Unix ms.
type leaseRow struct {
	worker    int64
	owner     string
	expiresAt int64
	lastTS    int64
}

// floor is the LastTimestamp the next claim of the row's worker ID gets:
// the later of last_timestamp and, for a lease that expired rather than
// being released, its expiry.
func (r leaseRow) floor() int64 { return max(r.lastTS, r.expiresAt) }

// presenceFrom leaves the presence leases out of the snowflake workers'
// rows: they share their owner with the process's worker lease.
var presenceFrom = strconv.Itoa(store.PresenceFrom)

func (d *sqlDB) leaseOf(ctx context.Context, owner string) (leaseRow, bool, error) {
	var r leaseRow
	err := d.db.QueryRowContext(ctx, d.bind(`SELECT worker_id, owner, lease_expires_at, last_timestamp FROM worker_node WHERE owner = ? AND worker_id < `+presenceFrom), owner).
		Scan(&r.worker, &r.owner, &r.expiresAt, &r.lastTS)
	if err == sql.ErrNoRows {
		return r, false, nil
	}
	return r, err == nil, err
}

func (d *sqlDB) leaseRow(ctx context.Context, worker int64) (leaseRow, error) {
	var r leaseRow
	err := d.db.QueryRowContext(ctx, d.bind(`SELECT worker_id, owner, lease_expires_at, last_timestamp FROM worker_node WHERE worker_id = ?`), worker).
		Scan(&r.worker, &r.owner, &r.expiresAt, &r.lastTS)
	return r, err
}

func (d *sqlDB) leaseRows(ctx context.Context) ([]leaseRow, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT worker_id, owner, lease_expires_at, last_timestamp FROM worker_node WHERE worker_id < `+presenceFrom+` ORDER BY worker_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []leaseRow
	for rows.Next() {
		var r leaseRow
		if err := rows.Scan(&r.worker, &r.owner, &r.expiresAt, &r.lastTS); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// lowestFree returns the worker ID a claim at nowMs takes from rows:
// the lowest that is released or expired.
func lowestFree(rows []leaseRow, nowMs int64) int64 {
	for _, r := range rows {
		if r.owner == "" || r.expiresAt <= nowMs {
			return r.worker
		}
	}
	return int64(len(rows))
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
