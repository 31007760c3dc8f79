package reliability_test

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/snowflake"
)

// request is one ID request a load client sends.
type request struct {
	mode  string // "segment" or "snowflake": the ID space
	tag   string
	path  string // with the query
	count int    // IDs expected
	track bool   // keep the IDs for the duplicate check (fresh tags are only counted)
}

// mix picks a client's next request.
type mix func(c *client) request

// steadyMix asks for segment and snowflake IDs of a few long-lived tags,
// one at a time or in batches, through /segment, /id (the segment mode
// route) and /snowflake.
func steadyMix(tags ...string) mix {
	counts := []int{1, 1, 5, 20, 50}
	return func(c *client) request {
		r := request{mode: "segment", tag: tags[c.rng.IntN(len(tags))], count: counts[c.rng.IntN(len(counts))], track: true}
		route := "/segment/"
		switch c.rng.IntN(8) {
		case 0:
			route = "/id/" // --mode segment
		case 1, 2, 3, 4:
			r.mode, route = "snowflake", "/snowflake/"
		}
		r.path = route + r.tag
		if r.count > 1 || c.rng.IntN(2) == 0 {
			r.path += "?count=" + strconv.Itoa(r.count)
		}
		return r
	}
}

// freshMix asks for segment IDs of a tag never used before, so every
// request needs the database: it creates the tag and reserves its first
// segment.
func freshMix(prefix string) mix {
	return func(c *client) request {
		tag := fmt.Sprintf("%s-%d-%d", prefix, c.id, c.sent)
		return request{mode: "segment", tag: tag, path: "/segment/" + tag + "?count=3", count: 3}
	}
}

// load is a set of clients, each bound to one slot of a fleet, sending
// requests one after another until stopped.
type load struct {
	f       *fleet
	hc      *http.Client
	clients []*client
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	start   time.Time
	elapsed time.Duration

	answered atomic.Int64 // successful answers, all clients
	inFlight atomic.Int64 // requests sent and not yet answered
}

// answers is a phase of a scenario: the load goes on until its clients
// have had n more successful answers. A phase is the work done, not a
// duration: a slow or loaded machine makes it last longer, never do
// less. Each count here is about half what the load of its scenario
// answered in the duration it replaces on 2 CPUs (results/*.md: some
// 3,000 answers a second on Galera, 16,000 with 3 processes on one
// PostgreSQL). It fails the test if the load makes no such progress
// within answersBound.
func (l *load) answers(n int64) {
	l.f.t.Helper()
	want := l.answered.Load() + n
	if !testtime.Until(answersBound, 20*time.Millisecond, func() bool { return l.answered.Load() >= want }) {
		l.f.t.Fatalf("the load had %d of %d answers after %v", n-(want-l.answered.Load()), n, answersBound)
	}
}

// answersBound bounds a phase of answers: far more than a phase takes
// even on a starved machine, so only a load that has stopped succeeding
// reaches it.
const answersBound = 5 * time.Minute

// quiet waits until none of the load's requests is in flight.
func (l *load) quiet() {
	l.f.t.Helper()
	if !testtime.Until(clientTimeout+5*time.Second, 5*time.Millisecond, func() bool { return l.inFlight.Load() == 0 }) {
		l.f.t.Fatalf("%d requests still in flight after the client timeout", l.inFlight.Load())
	}
}

// clientTimeout is how long a load client waits for an answer. A request
// that takes longer has hung: the server bounds every wait on the store
// well below it.
const clientTimeout = 20 * time.Second

// startLoad starts perSlot clients with each mix on every slot of f.
func startLoad(f *fleet, seed uint64, perSlot map[string]int, mixes map[string]mix) *load {
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	f.t.Cleanup(tr.CloseIdleConnections)
	l := &load{f: f, hc: &http.Client{Transport: tr, Timeout: clientTimeout}, start: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for slot := range f.slots {
		for _, name := range []string{"steady", "fresh"} {
			for range perSlot[name] {
				c := &client{id: len(l.clients), slot: slot, kind: name, mix: mixes[name],
					rng: rand.New(rand.NewPCG(seed, uint64(len(l.clients)))),
					ids: map[idKey][]int64{}, pendingMode: map[string]time.Time{},
					errors: map[string]int{}, prev: map[string]int64{}}
				l.clients = append(l.clients, c)
				l.wg.Go(func() { c.run(ctx, l) })
			}
		}
	}
	return l
}

// stop ends the load and waits for every client.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
	l.elapsed = time.Since(l.start)
}

// idKey files the IDs a client received: by the process that issued
// them (its seq; -1 if that cannot be told), ID space and, for segment
// IDs, tag.
type idKey struct {
	inst int
	mode string
	tag  string
}

// client is one load client. Its fields belong to its goroutine until
// load.stop returns.
type client struct {
	id   int
	slot int
	kind string
	mix  mix
	rng  *rand.Rand

	sent, ok     int
	idsFresh     int // IDs of fresh tags, counted only
	ids          map[idKey][]int64
	errors       map[string]int // failed requests by status and code, or transport error
	maxStall     time.Duration  // longest wait from a first attempt to a success
	stalls       []stall        // waits of stallFloor or more per ID space, for stalls per fault
	pendingMode  map[string]time.Time
	pending      time.Time     // first attempt since the last success
	maxLatency   time.Duration // slowest answer, success or failure
	maxFailed    time.Duration // slowest failed answer
	noRetryAfter int           // 503 answers without Retry-After
	violations   []string      // ordering and shape violations (the first few)
	nViolations  int

	cur  *instance
	prev map[string]int64 // last ID from cur: per tag for segment, one for snowflake
}

func (c *client) violate(format string, args ...any) {
	c.nViolations++
	if len(c.violations) < 5 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

func (c *client) run(ctx context.Context, l *load) {
	var buf bytes.Buffer
	for ctx.Err() == nil {
		// In flight from before the slot is read: once a scenario has
		// emptied a slot and seen nothing in flight (load.quiet), no
		// client sends to the slot's old process.
		l.inFlight.Add(1)
		inst := l.f.slots[c.slot].Load()
		if inst == nil {
			l.inFlight.Add(-1)
			// A slot whose process starts later in the scenario.
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if inst != c.cur {
			// A new process: IDs increase per process, so start over.
			c.cur = inst
			clear(c.prev)
		}
		r := c.mix(c)
		c.sent++
		if c.pending.IsZero() {
			c.pending = time.Now()
		}
		t0 := time.Now()
		space := r.mode
		if !r.track {
			space = "new tag" // every request needs the database
		}
		if c.pendingMode[space].IsZero() {
			c.pendingMode[space] = t0
		}
		ids, key, retryAfter := l.do(ctx, inst.url+r.path, &buf)
		l.inFlight.Add(-1)
		lat := time.Since(t0)
		if ctx.Err() != nil {
			break // cut off by the end of the load
		}
		c.maxLatency = max(c.maxLatency, lat)
		if key != "" {
			c.errors[key]++
			c.maxFailed = max(c.maxFailed, lat)
			if strings.HasPrefix(key, "503 ") && !retryAfter {
				c.noRetryAfter++
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		now := time.Now()
		c.maxStall = max(c.maxStall, now.Sub(c.pending))
		if d := now.Sub(c.pendingMode[space]); d >= stallFloor {
			c.stalls = append(c.stalls, stall{mode: space, end: now, d: d})
		}
		c.pendingMode[space] = time.Time{}
		c.pending = time.Time{}
		c.ok++
		l.answered.Add(1)
		if len(ids) != r.count {
			c.violate("%s%s: %d IDs, want %d", inst.url, r.path, len(ids), r.count)
			continue
		}
		owner := inst.seq
		if cur := l.f.slots[c.slot].Load(); cur != nil && cur != inst && cur.url == inst.url {
			owner = -1 // the restarted process took the old one's port: cannot tell who answered
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				c.violate("%s%s: batch not increasing: %d after %d", inst.url, r.path, ids[i], ids[i-1])
			}
		}
		if !r.track {
			c.idsFresh += len(ids)
			continue
		}
		// Segment IDs increase per tag; snowflake IDs per process,
		// whatever the tag.
		k := "snowflake"
		if r.mode == "segment" {
			k = "segment/" + r.tag
		}
		if p, seen := c.prev[k]; seen && owner >= 0 && ids[0] <= p {
			c.violate("%s: %s %s: ID %d after %d from the same process", inst, r.mode, r.tag, ids[0], p)
		}
		c.prev[k] = ids[len(ids)-1]
		key2 := idKey{inst: owner, mode: r.mode}
		if r.mode == "segment" {
			key2.tag = r.tag
		}
		c.ids[key2] = append(c.ids[key2], ids...)
	}
	if !c.pending.IsZero() && c.ok > 0 {
		c.maxStall = max(c.maxStall, time.Since(c.pending))
	}
	// A wait the load's end cut off is a stall too, at least this long:
	// dropping it would report a fault that outlasted the load as none.
	now := time.Now()
	for space, t0 := range c.pendingMode {
		if d := now.Sub(t0); !t0.IsZero() && d >= stallFloor && c.ok > 0 {
			c.stalls = append(c.stalls, stall{mode: space, end: now, d: d})
		}
	}
}

// stall is a wait from a first attempt to a success of one kind of
// request (segment, snowflake, or "new tag": a fresh tag's first IDs),
// ended at end.
type stall struct {
	mode string
	end  time.Time
	d    time.Duration
}

// stallFloor is the shortest wait kept in client.stalls: far above an
// answer from memory or a normal segment load.
const stallFloor = 100 * time.Millisecond

// do sends one request and returns the IDs, or the error key of a
// failure and whether a 503 carried Retry-After.
func (l *load) do(ctx context.Context, url string, buf *bytes.Buffer) (ids []int64, key string, retryAfter bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "bad request: " + err.Error(), false
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := l.hc.Do(req)
	if err != nil {
		return nil, transportKey(err), false
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, transportKey(err), false
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusKey(resp.StatusCode, buf.Bytes()), resp.Header.Get("Retry-After") != ""
	}
	ids, err = parseIDs(buf.Bytes())
	if err != nil {
		return nil, "200 with a bad body", false
	}
	return ids, "", false
}

// parseIDs reads text/plain IDs, one per line.
func parseIDs(b []byte) ([]int64, error) {
	ids := make([]int64, 0, bytes.Count(b, []byte{'\n'})+1)
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) == 0 {
			continue
		}
		v, err := strconv.ParseInt(string(line), 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("bad ID %q", line)
		}
		ids = append(ids, v)
	}
	return ids, nil
}

// statusKey is "STATUS code" of an error answer.
func statusKey(status int, body []byte) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return strconv.Itoa(status) + " " + e.Error.Code
	}
	return strconv.Itoa(status) + " (no error body)"
}

// transportKey names a request that got no HTTP answer.
func transportKey(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.As(err, &ne) && ne.Timeout():
		return "no answer within " + clientTimeout.String()
	}
	return "transport error"
}

// summary is what a load produced, merged over its clients.
type summary struct {
	segment, snowflake int // IDs received, fresh tags included
	requests, ok       int
	errors             map[string]int
	stall              time.Duration
	stalls             []stall // every client's, unordered
	maxLatency         time.Duration
	maxFailed          time.Duration
	noRetryAfter       int
	violations         []string
	nViolations        int
	segIDs             map[string][]int64 // by tag, every process
	sfIDs              map[int][]int64    // by process seq; -1 unattributed
}

func (l *load) summary() summary {
	s := summary{errors: map[string]int{}, segIDs: map[string][]int64{}, sfIDs: map[int][]int64{}}
	for _, c := range l.clients {
		s.requests += c.sent
		s.ok += c.ok
		s.segment += c.idsFresh
		for k, v := range c.errors {
			s.errors[k] += v
		}
		s.stall = max(s.stall, c.maxStall)
		s.stalls = append(s.stalls, c.stalls...)
		s.maxLatency = max(s.maxLatency, c.maxLatency)
		s.maxFailed = max(s.maxFailed, c.maxFailed)
		s.noRetryAfter += c.noRetryAfter
		s.violations = append(s.violations, c.violations...)
		s.nViolations += c.nViolations
		for k, ids := range c.ids {
			if k.mode == "segment" {
				s.segment += len(ids)
				s.segIDs[k.tag] = append(s.segIDs[k.tag], ids...)
			} else {
				s.snowflake += len(ids)
				s.sfIDs[k.inst] = append(s.sfIDs[k.inst], ids...)
			}
		}
		c.ids = nil // copied: a long run holds tens of millions of IDs
	}
	return s
}

// duplicates counts repeated values; it sorts ids.
func duplicates(ids []int64) int {
	slices.Sort(ids)
	n := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			n++
		}
	}
	return n
}

// duplicates returns the duplicate segment IDs (per tag: each tag is its
// own ID space) and snowflake IDs (one space for every tag and process).
// It sorts the IDs in place.
func (s summary) duplicates() (seg, sf int) {
	for _, ids := range s.segIDs {
		seg += duplicates(ids)
	}
	lists := make([][]int64, 0, len(s.sfIDs))
	for _, ids := range s.sfIDs {
		slices.Sort(ids)
		lists = append(lists, ids)
	}
	return seg, mergedDuplicates(lists)
}

// mergedDuplicates counts the values repeated within or across sorted
// lists, merging them rather than copying them into one.
func mergedDuplicates(lists [][]int64) int {
	h := &heads{}
	for _, l := range lists {
		if len(l) > 0 {
			*h = append(*h, l)
		}
	}
	heap.Init(h)
	n, first := 0, true
	var prev int64
	for h.Len() > 0 {
		l := (*h)[0]
		if !first && l[0] == prev {
			n++
		}
		prev, first = l[0], false
		if len(l) == 1 {
			heap.Pop(h)
		} else {
			(*h)[0] = l[1:]
			heap.Fix(h, 0)
		}
	}
	return n
}

// heads is a min-heap of sorted lists by their first value.
type heads [][]int64

func (h heads) Len() int           { return len(h) }
func (h heads) Less(i, j int) bool { return h[i][0] < h[j][0] }
func (h heads) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *heads) Push(x any)        { *h = append(*h, x.([]int64)) }
func (h *heads) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// run is a stretch of snowflake IDs one process issued under one worker
// ID, in Unix ms.
type run struct {
	inst         int
	worker       int64
	first, last  int64 // ms of the first and last ID
	firstID, ids int64
}

// runs splits each process's snowflake IDs into runs of one worker ID.
// A process changes worker ID only when it loses its lease and claims
// another. It sorts the IDs of each process in place.
func (s summary) runs() []run {
	var out []run
	for inst, ids := range s.sfIDs {
		if inst < 0 {
			continue
		}
		slices.Sort(ids)
		var cur *run
		for _, id := range ids {
			p, _ := snowflake.Decode(id)
			ms := p.Time.UnixMilli()
			if cur == nil || cur.worker != p.WorkerID {
				out = append(out, run{inst: inst, worker: p.WorkerID, first: ms, firstID: id})
				cur = &out[len(out)-1]
			}
			cur.last = ms
			cur.ids++
		}
	}
	return out
}

// checkRuns asserts that no two processes issued under one worker ID in
// overlapping stretches of time, and returns the worker IDs each process
// used.
func checkRuns(t *testing.T, runs []run) map[int][]int64 {
	t.Helper()
	for _, p := range overlaps(runs) {
		t.Error(p)
	}
	workers := map[int][]int64{}
	for _, r := range runs {
		if !slices.Contains(workers[r.inst], r.worker) {
			workers[r.inst] = append(workers[r.inst], r.worker)
		}
	}
	return workers
}

// overlaps describes every pair of processes that issued under one
// worker ID in overlapping stretches of time: what the lease fencing
// exists to prevent.
func overlaps(runs []run) []string {
	var out []string
	byWorker := map[int64][]run{}
	for _, r := range runs {
		byWorker[r.worker] = append(byWorker[r.worker], r)
	}
	for w, rs := range byWorker {
		slices.SortFunc(rs, func(a, b run) int { return int(a.first - b.first) })
		reach := rs[0] // the run that reaches latest so far
		for _, r := range rs[1:] {
			if r.inst != reach.inst && r.first <= reach.last {
				out = append(out, fmt.Sprintf("worker ID %d: instance #%d issued IDs stamped %d..%d ms and instance #%d %d..%d ms: overlapping holders",
					w, reach.inst, reach.first, reach.last, r.inst, r.first, r.last))
			}
			if r.last > reach.last {
				reach = r
			}
		}
	}
	return out
}

// checkLeases asserts the takeover rules (see leaseViolations).
func checkLeases(t *testing.T, f *fleet, runs []run) {
	t.Helper()
	for _, p := range leaseViolations(f.instances(), runs) {
		t.Error(p)
	}
}

// leaseViolations checks the takeover rules against what the processes
// logged and the lease rows of the killed ones, read after the kill:
//   - a killed process issued no ID under its worker ID at or after its
//     lease's expiry;
//   - no process claimed the worker ID of a killed one before that
//     lease expired;
//   - a process that claimed a worker ID issued only after the floor its
//     claim carried.
//
// insts are indexed by seq.
func leaseViolations(insts []*instance, runs []run) []string {
	var out []string
	for _, d := range insts {
		if d.killed.IsZero() || !d.held {
			continue
		}
		for _, r := range runs {
			if r.inst == d.seq && r.worker == d.final.worker && r.last >= d.final.expiresAt {
				out = append(out, fmt.Sprintf("killed %s issued an ID at %d ms, at or after its lease expiry %d", d, r.last, d.final.expiresAt))
			}
		}
		for _, n := range insts {
			if !n.start.After(d.killed) {
				continue
			}
			for _, c := range n.claims {
				if c.worker == d.final.worker && c.at < d.final.expiresAt {
					out = append(out, fmt.Sprintf("%s claimed worker ID %d at %d ms, before the lease of killed %s expired at %d ms",
						n, c.worker, c.at, d, d.final.expiresAt))
				}
			}
		}
	}
	for _, r := range runs {
		n := insts[r.inst]
		var floor int64 = -1
		for _, c := range n.claims {
			if c.worker == r.worker && c.at <= r.first && c.floor > floor {
				floor = c.floor
			}
		}
		if floor >= 0 && r.first <= floor {
			out = append(out, fmt.Sprintf("%s issued an ID at %d ms under worker %d, not after its claim's floor %d ms", n, r.first, r.worker, floor))
		}
	}
	return out
}
