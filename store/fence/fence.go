package fence

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Kind is the kind of server a store runs on: it says what an Identity's
// fields mean and how positions compare.
type Kind string

// The kinds of server idgen tells apart.
const (
	// PostgreSQL: System is pg_control_system().system_identifier, the
	// same on a primary and every physical replica of it; Timeline is
	// the first 8 hex digits of pg_walfile_name(pg_current_wal_lsn()),
	// which a promotion or a point-in-time recovery moves on; Position is
	// pg_current_wal_lsn().
	Postgres Kind = "postgres"
	// MySQL: System is @@server_uuid, Position @@GLOBAL.gtid_executed
	// (empty unless gtid_mode is ON).
	MySQL Kind = "mysql"
	// MariaDB without Galera: System is @@server_id, which replication
	// requires to differ between servers, Position @@gtid_binlog_pos
	// (empty without a binary log).
	MariaDB Kind = "mariadb"
	// MariaDB Galera (wsrep_on): System is wsrep_cluster_state_uuid, the
	// same on every node of one cluster; Position is wsrep_last_committed,
	// compared only with what the same Node said before.
	Galera Kind = "galera"
	// SQLite: System is a random ID the file holds from its first
	// migration on, Position a counter every reservation, claim and
	// renewal moves up in the same transaction.
	SQLite Kind = "sqlite"
)

// Identity is what a server says, at one moment, about whose history it
// carries and how far along it is.
type Identity struct {
	Kind Kind
	// System and Timeline name one history: two identities whose Kind,
	// System and Timeline are equal are the same history
	// (SameHistory).
	System   string
	Timeline string
	// Position is how far along the history is, in the Kind's own
	// notation (see Behind). Empty means unknown: nothing to compare.
	Position string
	// Node is the node of a multi-primary cluster the reading came from;
	// positions are compared per node. Empty elsewhere.
	Node string
}

// SameHistory reports whether a and b name the same history.
func (a Identity) SameHistory(b Identity) bool {
	return a.Kind == b.Kind && a.System == b.System && a.Timeline == b.Timeline
}

// String is the identity as one log field: kind, system, timeline and
// position, never anything secret.
func (a Identity) String() string {
	if a.Kind == "" && a.System == "" {
		return "none"
	}
	var b strings.Builder
	b.WriteString(string(a.Kind))
	b.WriteString(":" + a.System)
	if a.Timeline != "" {
		b.WriteString(" timeline " + a.Timeline)
	}
	if a.Position != "" {
		b.WriteString(" at " + oneLine(a.Position))
	}
	if a.Node != "" {
		b.WriteString(" on " + a.Node)
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), "") }

// Record is what a store keeps in its idgen_fence row: the identity it
// last recorded and the fence generation that recorded it. The zero
// Record (Generation 0) means none was recorded yet.
type Record struct {
	Identity
	// Generation changes with every write of the row; see NewGeneration.
	Generation int64
	// FenceUntil is, in Unix milliseconds, the end of the last fence's
	// hold: a worker ID claimed before then starts its IDs at it (see
	// Plan). 0 if the store was never fenced.
	FenceUntil int64
	// Floor is the sum of the margins of every fence in the store's
	// history (Plan.Floor). Every row's max_id is at least the start it
	// was created with plus Floor: a fence moves every row up by its
	// margin and the Floor with it, and a tag created afterwards starts
	// Floor above the start it asks for. So a tag whose creation a
	// failover lost, made again from its start, starts above every ID
	// handed out from the lost row, and a process that saw a Floor the
	// record no longer has knows the sum of the margins of the fences
	// the record lost. 0 if the store was never fenced.
	Floor int64
	// Covers is the newest generation the writer of the record knew of
	// (Plan.Covers): every generation a process may have seen in the
	// history this record descends from is at most Covers. A record newer
	// than the one a process saw but covering less was written by a
	// fence that did not know of the one the process saw: that fence was
	// lost (Decide). 0 means unknown (a record from before Covers
	// existed, or a first recording), and is never evidence.
	Covers int64
}

// Recorded reports whether r holds an identity.
func (r Record) Recorded() bool { return r.Generation != 0 }

// Memory is what one process saw of a store: the record and identity of
// its last check, and the highest position seen per node. The zero
// Memory is a process that has not looked yet (or, for SQLite, one
// without a sidecar file). Memory is a value; Observe returns a new one.
type Memory struct {
	Known      bool
	Identity   Identity // System, Timeline and Kind; Position is per node below
	Generation int64
	Positions  map[string]string // by Identity.Node
	// Floor is the highest Record.Floor the process saw. It outlives a
	// record the store loses: the fence after the loss adds to its
	// margin what the lost fences added (NewPlan).
	Floor int64
}

// Verdict is what a check says to do.
type Verdict int

// The verdicts of Decide.
const (
	// Proceed: the history is the one this process knew, or one it has
	// not seen but the store has recorded; reserve or claim.
	Proceed Verdict = iota
	// Record: the store has no identity recorded yet (a new store, or
	// one migrated from before fencing existed) and this process knew
	// none: record the current one, under the lock, without fencing.
	Initialize
	// Fence: the history changed or went back; fence before anything
	// else is reserved or claimed.
	Fence
)

func (v Verdict) String() string {
	switch v {
	case Proceed:
		return "proceed"
	case Initialize:
		return "record"
	case Fence:
		return "fence"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Decision is a Verdict with its reason, for the log.
type Decision struct {
	Verdict Verdict
	Reason  string
}

// Decide says what a process whose memory is mem does when the server
// says cur and the store's row says rec. It is the whole rule:
//
//  1. Nothing recorded: a process that knew nothing records cur; one
//     that had seen a record fences, since the row itself was lost.
//  2. cur is not the recorded history: a failover to another server, a
//     promotion (new timeline) or another database put in place; fence.
//  3. A process that knew nothing trusts the record (it cannot tell a
//     position that went back).
//  4. A record newer than the one this process saw: another process
//     fenced or recorded since; it has dealt with whatever happened
//     before, so proceed. (A record written before this process last
//     looked cannot be newer: generations only grow, see NewGeneration.)
//     Unless the record covers less than the generation this process saw
//     (Record.Covers): then its writer did not know of that generation,
//     which the store has lost with the fence that wrote it, and the
//     rows are not above the ranges reserved after that fence; fence.
//  5. A record older than the one this process saw: the row went back,
//     so the store was restored; fence.
//  6. The record this process saw: fence if the server is another
//     history than the one this process saw with it, or if the position
//     went back on the node it was read from (a restore, or a node that
//     lost what it had applied); otherwise proceed.
func Decide(mem Memory, cur Identity, rec Record) Decision {
	switch {
	case !rec.Recorded() && !mem.Known:
		return Decision{Initialize, "no identity recorded yet"}
	case !rec.Recorded():
		return Decision{Fence, "the recorded identity is gone (was " + mem.Identity.String() + ")"}
	case !cur.SameHistory(rec.Identity):
		return Decision{Fence, "the server is not the recorded history " + rec.String()}
	case !mem.Known:
		return Decision{Proceed, ""}
	case rec.Generation > mem.Generation && rec.Covers != 0 && rec.Covers < mem.Generation:
		return Decision{Fence, fmt.Sprintf("the record (generation %d) was written without the fence of generation %d this process saw: that fence was lost", rec.Generation, mem.Generation)}
	case rec.Generation > mem.Generation:
		return Decision{Proceed, ""}
	case rec.Generation < mem.Generation:
		return Decision{Fence, fmt.Sprintf("the recorded generation went back from %d to %d", mem.Generation, rec.Generation)}
	}
	if !mem.Identity.SameHistory(cur) {
		return Decision{Fence, "the server is not the history this process saw, " + mem.Identity.String()}
	}
	seen := mem.Positions[cur.Node]
	behind, err := Behind(cur.Kind, cur.Position, seen)
	if err != nil {
		// A position this code cannot read is no evidence of a change;
		// the identity above still is.
		return Decision{Proceed, ""}
	}
	if behind {
		return Decision{Fence, "the position went back from " + oneLine(seen) + " to " + oneLine(cur.Position)}
	}
	return Decision{Proceed, ""}
}

// Observe returns mem after a check that saw cur and rec committed: the
// record's generation and history, per node the furthest position, and
// the highest floor. Readings finish out of order, so a position never
// moves back here, and a reading from before a record this process has
// already seen changes nothing but the floor. The floor never goes down:
// a record read without its floor (the one a reservation takes from
// memory) leaves it, and one the store lost leaves it too, which is what
// the fence after the loss needs (NewPlan).
func (mem Memory) Observe(cur Identity, rec Record) Memory {
	if mem.Known && mem.Generation > rec.Generation {
		mem.Floor = max(mem.Floor, rec.Floor)
		return mem
	}
	out := Memory{Known: true, Identity: Identity{Kind: cur.Kind, System: cur.System, Timeline: cur.Timeline},
		Generation: rec.Generation, Positions: map[string]string{}, Floor: max(mem.Floor, rec.Floor)}
	if mem.Known && mem.Generation == rec.Generation && mem.Identity.SameHistory(cur) {
		for n, p := range mem.Positions {
			out.Positions[n] = p
		}
	}
	if p := furthest(cur.Kind, out.Positions[cur.Node], cur.Position); p != "" {
		out.Positions[cur.Node] = p
	}
	return out
}

// furthest returns whichever of two positions is further along, b if
// they cannot be compared.
func furthest(k Kind, a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	if behind, err := Behind(k, b, a); err == nil && behind {
		return a
	}
	return b
}

// NewGeneration returns the generation a write of the record after rec,
// by a process whose memory is mem, at now, stores: above both, and at
// least now in Unix milliseconds. Generations therefore only grow, even
// across a restore that took the row back to an older one, as long as
// fences are further apart than the clocks' skew.
func NewGeneration(rec Record, mem Memory, now time.Time) int64 {
	g := max(rec.Generation, mem.Generation)
	if g < math.MaxInt64 {
		g++
	}
	return max(g, now.UnixMilli())
}
