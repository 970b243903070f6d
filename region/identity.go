package region

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// identityFile is the name of the identity record in an agent's data
// directory.
const identityFile = "agent.json"

// identityPad is the length the record is padded to (an id of 128 bytes
// and a 20-digit epoch fit).
const identityPad = 200

// Identity is what an agent keeps in its data directory so that its
// partial-sum message ids stay its own across restarts: the agent id, made
// once, and the epoch of the run, which strictly increases from run to run.
type Identity struct {
	ID    string `json:"id"`
	Epoch uint64 `json:"epoch"`
}

// ErrIdentityMismatch means the configured agent id is not the one recorded
// in the data directory: the directory's log and outbox belong to another
// agent, and taking them under a new id would re-publish its flushes under
// ids the rollup does not know.
var ErrIdentityMismatch = errors.New("agent id differs from the one recorded in the data directory")

// LoadIdentity reads dir/agent.json, or creates it on first start, and
// records the epoch of this run. The id is configured (when not empty), or
// the one recorded, or on first start defaultPrefix + "-" + 8 random hex
// digits, so that two agents on one host never share an id. A configured id
// that differs from the recorded one is ErrIdentityMismatch. The epoch is
// max(last+1, now in ns): a wall clock that steps back never reuses or lowers
// it. The file is written atomically (temporary file, fsync, rename, fsync
// of the directory) before LoadIdentity returns.
func LoadIdentity(dir, configured, defaultPrefix string, now time.Time) (Identity, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Identity{}, fmt.Errorf("cannot create data directory: %w", err)
	}
	path := filepath.Join(dir, identityFile)
	var id Identity
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &id); err != nil || !engagement.ValidID(id.ID) {
			return Identity{}, fmt.Errorf("cannot read agent identity %s: not a valid identity record (%v); move it aside only if this directory holds no log of another agent", path, err)
		}
		if configured != "" && configured != id.ID {
			return Identity{}, fmt.Errorf("cannot start as agent %q: %w (%s says %q)", configured, ErrIdentityMismatch, path, id.ID)
		}
	case errors.Is(err, os.ErrNotExist):
		id.ID = configured
		if id.ID == "" {
			var b [4]byte
			if _, err := rand.Read(b[:]); err != nil {
				return Identity{}, fmt.Errorf("cannot make agent id: %w", err)
			}
			id.ID = defaultPrefix + "-" + hex.EncodeToString(b[:])
		}
		if !engagement.ValidID(id.ID) {
			return Identity{}, fmt.Errorf("cannot make agent id: %q is not a valid id", id.ID)
		}
	default:
		return Identity{}, fmt.Errorf("cannot read agent identity: %w", err)
	}
	if id.Epoch == math.MaxUint64 {
		return Identity{}, fmt.Errorf("cannot start agent %q: its epoch in %s cannot grow any more", id.ID, path)
	}
	id.Epoch = max(id.Epoch+1, uint64(max(now.UnixNano(), 0)))
	if err := writeFileSynced(path, id); err != nil {
		// A full disk must not keep an agent from starting to drain the
		// log that filled it: the record of a known id is rewritten in
		// place (same length, padded; no new block), then fsynced.
		if raw == nil || !(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
			return Identity{}, fmt.Errorf("cannot record agent identity: %w", err)
		}
		os.Remove(path + ".tmp")
		if err := overwriteInPlace(path, id, len(raw)); err != nil {
			return Identity{}, fmt.Errorf("cannot record agent identity on a full disk: %w", err)
		}
	}
	return id, nil
}

// overwriteInPlace writes v over the first size bytes of path, padded with
// spaces, and fsyncs it.
func overwriteInPlace(path string, v any, size int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b)+1 > size {
		return fmt.Errorf("the new record (%d bytes) is longer than the old (%d)", len(b)+1, size)
	}
	b = append(b, bytes.Repeat([]byte{' '}, size-len(b)-1)...)
	b = append(b, '\n')
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeFileSynced(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	// Padded so that a later in-place rewrite (full disk) always fits.
	b = append(b, bytes.Repeat([]byte{' '}, max(0, identityPad-len(b)))...)
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
