package lockcheck

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
)

// fleet is the worker processes of one run, live and dead, and every
// event they printed.
type fleet struct {
	t      *testing.T
	bin    string
	args   []string // every worker's flags but -worker
	writes int      // per hold: a fault lands after a hold's first and before its last

	mu     sync.Mutex
	procs  []*proc
	events map[string][]Event // by owner: one process each
	grants []Event            // in the order the test read them
}

// proc is one worker process.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}

	// Under fleet.mu:
	owner   string
	holding int64 // the token of the hold under way, 0 between holds
	wrote   int   // writes of that hold
	stopped bool  // SIGSTOP sent, no SIGCONT yet
	paused  bool  // stopped during this hold: left alone until its next grant
	stderr  strings.Builder
}

func newFleet(t *testing.T, bin string, writes int, args ...string) *fleet {
	args = append(slices.Clone(args), "-writes", strconv.Itoa(writes))
	return &fleet{t: t, bin: bin, args: args, writes: writes, events: map[string][]Event{}}
}

// start runs a worker named name and waits until it has started.
func (f *fleet) start(name string) *proc {
	f.t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(f.bin, append(slices.Clone(f.args), "-worker", name)...)
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	errs, err := p.cmd.StderrPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		f.t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.mu.Unlock()
	f.t.Cleanup(func() { f.kill(p) })
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(errs)
		for sc.Scan() {
			f.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			f.mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.record(p, sc.Bytes())
		}
	}()
	go func() {
		wg.Wait()
		_ = p.cmd.Wait()
		close(p.done)
	}()
	if err := testtime.WaitFor(30*time.Second, 10*time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		select {
		case <-p.done:
			return fmt.Errorf("worker %s exited: %s", name, p.stderr.String())
		default:
		}
		if p.owner == "" {
			return fmt.Errorf("worker %s has not started", name)
		}
		return nil
	}); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fleet) record(p *proc, line []byte) {
	e, err := ParseEvent(line)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		p.stderr.WriteString("stdout: " + err.Error() + "\n")
		return
	}
	p.owner = e.Owner
	f.events[e.Owner] = append(f.events[e.Owner], e)
	switch e.Kind {
	case Granted:
		p.holding, p.wrote, p.paused = e.Token, 0, false
		f.grants = append(f.grants, e)
	case Wrote:
		p.wrote++
	case Released, ReleaseError:
		p.holding = 0
	}
}

// holder waits for a live worker that holds the lock, has written at
// least once in this hold and will write again, so that a fault lands
// between two of its writes, and that was not paused in this hold (a
// paused one is left to write with its stale token), and returns it
// with its token.
func (f *fleet) holder() (*proc, int64) {
	f.t.Helper()
	var h *proc
	var token int64
	if err := testtime.WaitFor(30*time.Second, 2*time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.procs {
			if p.alive() && !p.paused && p.holding != 0 && p.wrote > 0 && p.wrote < f.writes {
				h, token = p, p.holding
				return nil
			}
		}
		return fmt.Errorf("no holder between two writes; %d grants so far", len(f.grants))
	}); err != nil {
		f.t.Fatalf("%v\n%s", err, f.stderrs())
	}
	return h, token
}

// grantedAbove waits until some worker other than p was granted a token
// above token, and returns it.
func (f *fleet) grantedAbove(p *proc, token int64, timeout time.Duration) (int64, error) {
	var got int64
	err := testtime.WaitFor(timeout, 5*time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, g := range f.grants {
			if g.Owner != p.owner && g.Token > token {
				got = g.Token
				return nil
			}
		}
		return fmt.Errorf("no grant above token %d", token)
	})
	return got, err
}

// grantCount returns how many grants the workers have printed.
func (f *fleet) grantCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.grants)
}

// waitGrants waits until the workers have printed n more grants than
// from.
func (f *fleet) waitGrants(from, n int, timeout time.Duration) error {
	return testtime.WaitFor(timeout, 5*time.Millisecond, func() error {
		if got := f.grantCount() - from; got < n {
			return fmt.Errorf("%d grants of %d", got, n)
		}
		return nil
	})
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig to p by its PID and records a stop or a continue.
func (f *fleet) signal(p *proc, sig syscall.Signal) {
	f.mu.Lock()
	switch sig {
	case syscall.SIGSTOP:
		p.stopped, p.paused = true, true
	case syscall.SIGCONT:
		p.stopped = false
	}
	f.mu.Unlock()
	if err := syscall.Kill(p.cmd.Process.Pid, sig); err != nil && p.alive() {
		f.t.Fatalf("signal %v to worker %s: %v", sig, p.name, err)
	}
}

// kill ends p with SIGKILL, by its PID, and waits for it.
func (f *fleet) kill(p *proc) {
	if !p.alive() {
		return
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// live returns the workers still running.
func (f *fleet) live() []*proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*proc
	for _, p := range f.procs {
		if p.alive() {
			out = append(out, p)
		}
	}
	return out
}

// stop ends every worker with SIGTERM (after a SIGCONT, for a stopped
// one): each releases what it holds and exits; one that does not within
// 10 s is killed.
func (f *fleet) stop() {
	for _, p := range f.live() {
		f.signal(p, syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range f.live() {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			f.t.Errorf("worker %s did not exit within 10s of SIGTERM", p.name)
			f.kill(p)
		}
	}
}

// history returns the events printed so far, with log.
func (f *fleet) history(log []Row) History {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := History{Events: map[string][]Event{}, Log: log}
	for o, es := range f.events {
		h.Events[o] = slices.Clone(es)
	}
	return h
}

// stderrs returns what the workers wrote on standard error.
func (f *fleet) stderrs() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, p := range f.procs {
		if s := p.stderr.String(); s != "" {
			fmt.Fprintf(&b, "--- worker %s (%s):\n%s", p.name, p.owner, s)
		}
	}
	return b.String()
}
