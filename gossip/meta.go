package gossip

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"

	"github.com/edgecount/edgecount/engagement"
)

// Limits of the node metadata fields. With them the encoded metadata is at
// most 1+65+129+129+65+1+4*maxMetaKeys = 422 bytes, under memberlist's
// MetaMaxSize (512).
const (
	metaVersion     = 1
	maxHTTPAddrLen  = 128
	maxVersionLen   = 64
	maxMetaKeys     = 8
	fingerprintSize = 4
)

// errMeta is the cause of every metadata decoding error.
var errMeta = errors.New("invalid node metadata")

// Meta is what a node tells its peers about itself in memberlist's node
// metadata.
type Meta struct {
	// Region of the node; nodes of another region are refused.
	Region string
	// AgentID of the edge agent.
	AgentID string
	// HTTPAddr is where the agent serves its API (may be empty).
	HTTPAddr string
	// Version is the agent's build version (may be empty).
	Version string
	// Keys are fingerprints of the gossip keys the node has installed,
	// primary first (empty when gossip is not encrypted). See Fingerprint.
	Keys []string
}

// Fingerprint names a gossip key without revealing it: the first 4 bytes of
// SHA-256("edgecount-gossip-key" || key), in hex. Operators compare
// fingerprints across nodes during a key rotation.
func Fingerprint(key []byte) string {
	h := sha256.New()
	h.Write([]byte("edgecount-gossip-key"))
	h.Write(key)
	return hex.EncodeToString(h.Sum(nil)[:fingerprintSize])
}

// encodeMeta returns the wire form of m:
//
//	version:1 (=1)
//	len:1 region   len:1 agent id   len:1 http addr   len:1 build version
//	count:1 (≤ 8)  count × 4-byte key fingerprint
//
// A later version may append fields; decoders of version 1 ignore bytes
// after the fields they know only when the version byte is above 1.
func encodeMeta(m Meta) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 8+len(m.Region)+len(m.AgentID)+len(m.HTTPAddr)+len(m.Version)+fingerprintSize*len(m.Keys))
	b = append(b, metaVersion)
	for _, s := range []string{m.Region, m.AgentID, m.HTTPAddr, m.Version} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	b = append(b, byte(len(m.Keys)))
	for _, k := range m.Keys {
		raw, _ := hex.DecodeString(k) // validated
		b = append(b, raw...)
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("%w: %d bytes exceed %d", errMeta, len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// decodeMeta parses and validates metadata from the wire. It never panics
// and never keeps b.
func decodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) > memberlist.MetaMaxSize {
		return m, fmt.Errorf("%w: %d bytes exceed %d", errMeta, len(b), memberlist.MetaMaxSize)
	}
	if len(b) < 1 {
		return m, fmt.Errorf("%w: empty", errMeta)
	}
	vsn := b[0]
	if vsn < metaVersion {
		return m, fmt.Errorf("%w: version %d", errMeta, vsn)
	}
	b = b[1:]
	fields := []*string{&m.Region, &m.AgentID, &m.HTTPAddr, &m.Version}
	for _, f := range fields {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return Meta{}, fmt.Errorf("%w: truncated", errMeta)
		}
		*f = string(b[1 : 1+int(b[0])])
		b = b[1+int(b[0]):]
	}
	if len(b) < 1 {
		return Meta{}, fmt.Errorf("%w: truncated", errMeta)
	}
	n := int(b[0])
	b = b[1:]
	if n > maxMetaKeys || len(b) < n*fingerprintSize {
		return Meta{}, fmt.Errorf("%w: bad key list", errMeta)
	}
	for i := 0; i < n; i++ {
		m.Keys = append(m.Keys, hex.EncodeToString(b[:fingerprintSize]))
		b = b[fingerprintSize:]
	}
	if len(b) > 0 && vsn == metaVersion {
		return Meta{}, fmt.Errorf("%w: %d trailing bytes", errMeta, len(b))
	}
	if err := m.validate(); err != nil {
		return Meta{}, err
	}
	return m, nil
}

func (m Meta) validate() error {
	errs := m.identityErrors()
	if len(m.Keys) > maxMetaKeys {
		errs = append(errs, fmt.Errorf("%d key fingerprints exceed %d", len(m.Keys), maxMetaKeys))
	}
	for _, k := range m.Keys {
		if raw, err := hex.DecodeString(k); err != nil || len(raw) != fingerprintSize || hex.EncodeToString(raw) != k {
			errs = append(errs, fmt.Errorf("key fingerprint %q is not %d lower-case hex bytes", k, fingerprintSize))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", errMeta, err)
	}
	return nil
}

// identityErrors lists the problems of m's region, agent id, HTTP address
// and version: the rules a node's Config must obey and a peer's Meta is
// checked against.
func (m Meta) identityErrors() []error {
	var errs []error
	if !engagement.ValidRegion(m.Region) {
		errs = append(errs, fmt.Errorf("region %q is not a valid region name", m.Region))
	}
	if !engagement.ValidID(m.AgentID) {
		errs = append(errs, fmt.Errorf("agent id %q is not a valid id", m.AgentID))
	}
	if len(m.HTTPAddr) > maxHTTPAddrLen || !printable(m.HTTPAddr) {
		errs = append(errs, fmt.Errorf("http addr %q is longer than %d bytes or not printable ASCII", m.HTTPAddr, maxHTTPAddrLen))
	}
	if len(m.Version) > maxVersionLen || !printable(m.Version) {
		errs = append(errs, fmt.Errorf("version %q is longer than %d bytes or not printable ASCII", m.Version, maxVersionLen))
	}
	return errs
}

// printable reports whether s is printable ASCII without spaces (possibly
// empty).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
