package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/idgen/idgen/store/fence"
)

// sidecar is the file beside the database, PATH.fence, in which the
// store keeps what it last saw of the file's history (fence.Memory):
// its store_id, generation and ticks, and the highest tag floor. A process that starts after the
// database was put back from an older copy, while the sidecar stayed,
// finds ticks or a generation below what the sidecar says and fences.
//
// It is written after every checked transaction that committed, never
// before (a sidecar ahead of the file would fence a store that lost
// nothing): merged with what is there, so that of several processes the
// furthest position stays, unless two write at once, which leaves it
// behind; by rename, so a reader never sees half a file; and without
// fsync. A sidecar that is behind costs detection of a restore to
// exactly the transactions it missed, never a false fence.
type sidecar string

// load reads the sidecar; a missing one is a process that knows nothing.
func (p sidecar) load() (fence.Memory, error) {
	b, err := os.ReadFile(string(p))
	if errors.Is(err, fs.ErrNotExist) {
		return fence.Memory{}, nil
	}
	if err != nil {
		return fence.Memory{}, fmt.Errorf("sqlite: read %s: %w", p, err)
	}
	const what = "it records what idgen saw of the database, so remove it only if the database beside it is the right one"
	var m fence.Memory
	if err := json.Unmarshal(b, &m); err != nil {
		return fence.Memory{}, fmt.Errorf("sqlite: %s is not idgen's fence sidecar (%w); %s", p, err, what)
	}
	if m.Known && m.Identity.Kind != fence.SQLite {
		return fence.Memory{}, fmt.Errorf("sqlite: %s is not idgen's fence sidecar (kind %q); %s", p, m.Identity.Kind, what)
	}
	return m, nil
}

func (p sidecar) save(m fence.Memory) error {
	if old, err := p.load(); err == nil && old.Known && m.Known {
		// Observe keeps old where it is newer, the furthest position
		// where both saw one record, and the higher floor (without
		// Floor here, an older sidecar's would win and a fence after a
		// loss of fences would not add what they added).
		m = old.Observe(fence.Identity{Kind: m.Identity.Kind, System: m.Identity.System, Timeline: m.Identity.Timeline,
			Position: m.Positions[""]}, fence.Record{Identity: m.Identity, Generation: m.Generation, Floor: m.Floor})
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(string(p))
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, base+".tmp*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), string(p)); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return nil
}
