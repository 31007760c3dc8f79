package dedupcheck

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// fleet is the consumer processes of one run, live and dead, and the
// counts of what they said.
type fleet struct {
	t   *testing.T
	env []string // every consumer's, but its name

	mu      sync.Mutex
	procs   []*proc
	started int // consumers started
	skips   int // redeliveries dedup skipped
	claimed int // messages taken over from other consumers
	acked   int // acknowledgements, redeliveries included
	errs    []string
}

// proc is one consumer process.
type proc struct {
	name  string
	cmd   *exec.Cmd
	done  chan struct{}
	ready bool // said "start"; under fleet.mu
	acked int  // acknowledgements; under fleet.mu
}

func newFleet(t *testing.T, env ...string) *fleet {
	return &fleet{t: t, env: append(os.Environ(), env...)}
}

// start runs a new consumer: this test binary, which TestMain turns
// into one by its environment.
func (f *fleet) start() *proc {
	f.t.Helper()
	f.mu.Lock()
	f.started++
	p := &proc{name: "c" + strconv.Itoa(f.started), done: make(chan struct{})}
	f.mu.Unlock()
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(f.env, envConsumer+"="+p.name)
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	var stderr strings.Builder
	p.cmd.Stderr = &stderr
	if err := p.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.mu.Unlock()
	f.t.Cleanup(func() { f.kill(p) })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.record(p, sc.Text())
		}
		err := p.cmd.Wait()
		if s := stderr.String(); s != "" && !killed(err) {
			f.mu.Lock()
			f.errs = append(f.errs, fmt.Sprintf("%s exited (%v): %s", p.name, err, s))
			f.mu.Unlock()
		}
		close(p.done)
	}()
	return p
}

// killed reports whether err is a process's end by SIGKILL.
func killed(err error) bool {
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (f *fleet) record(p *proc, line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	word, rest, _ := strings.Cut(line, " ")
	switch word {
	case "start":
		p.ready = true
	case "skip":
		f.skips++
	case "claimed":
		n, _ := strconv.Atoi(rest)
		f.claimed += n
	case "acked":
		n, _ := strconv.Atoi(rest)
		f.acked += n
		p.acked += n
	default:
		f.errs = append(f.errs, p.name+": "+line)
	}
}

// working returns the live consumers that have acknowledged messages,
// or if none has, those that have started reading.
func (f *fleet) working() []*proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	var acked, ready []*proc
	for _, p := range f.procs {
		switch {
		case !p.alive():
		case p.acked > 0:
			acked = append(acked, p)
		case p.ready:
			ready = append(ready, p)
		}
	}
	if len(acked) > 0 {
		return acked
	}
	return ready
}

// ackCount returns the acknowledgements the consumers said so far.
func (f *fleet) ackCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acked
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
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

// killAll ends every consumer.
func (f *fleet) killAll() {
	f.mu.Lock()
	procs := append([]*proc(nil), f.procs...)
	f.mu.Unlock()
	for _, p := range procs {
		f.kill(p)
	}
}

// counts returns consumers started, skips, claims and errors said.
func (f *fleet) counts() (started, skips, claimed int, errs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started, f.skips, f.claimed, append([]string(nil), f.errs...)
}
