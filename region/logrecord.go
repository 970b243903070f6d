package region

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

// The agent's log records. Payloads are opaque to package wal; the first
// byte tells the kind. Integers are uvarints (deltas zig-zag varints),
// strings a uvarint length and the bytes.
//
// Intake log:
//   - recIncrements: one POST /v1/increments batch: region, count, then
//     (content id, counter, delta) each.
//   - recIntent: a reaction about to be written: intent id (random), user,
//     content, the region recording it, the operation, the row as read
//     (when there was one) and the row to write (insert and update). It
//     names no write (a record written before writer tokens).
//   - recNamedIntent: a recIntent whose write is named by the intent id
//     (its token), followed by the writer tokens of the undone row an
//     insert replaces (a count and the tokens).
//   - recResolution: how an intent ended: intent id, applied, content and
//     the transition's deltas (counted when the record is replayed), so
//     that it does not need its intent.
//
// Outbox log:
//   - recMessage: one encoded partial-sum message: the intake index its
//     flush covers, partition, message id, data.
const (
	recIncrements  byte = 'I'
	recIntent      byte = 'T'
	recNamedIntent byte = 'N'
	recResolution  byte = 'S'
	recMessage     byte = 'M'
)

// errRecord is returned for a payload that does not decode: the log's CRC
// passed, so this is a record of an unknown version or kind.
var errRecord = errors.New("malformed log record")

type op byte

const (
	opInsert op = 'i'
	opUpdate op = 'u'
	opDelete op = 'd'
)

// intent is a reaction write recorded before its compare-and-set.
type intent struct {
	id        uint64
	user      string
	content   string
	region    string
	op        op
	prev      engagement.Reaction // valid for update and delete
	next      engagement.Reaction // valid for insert and update
	action    engagement.Action   // the action asked for
	prevFound bool
	// named reports that the write carries the intent id as its token
	// (engagement.Reaction.Token), so the row's writers tell whether it
	// applied; prevWriters are, for an insert, the writers of the key as
	// read (an undone row's), so that settle can tell that nobody wrote
	// the key since.
	named       bool
	prevWriters []uint64
}

// resolution is how an intent ended.
type resolution struct {
	id      uint64
	applied bool
	content string
	deltas  []Delta
	// ambiguous (not logged) reports that settle could not tell whether
	// the write applied and took it as not applied.
	ambiguous bool
}

// outRecord is one message of a flush in the outbox log.
type outRecord struct {
	covered   uint64 // the intake log's checkpoint index the flush carries
	partition uint32
	id        string
	sums      int
	data      []byte
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes a payload; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint reads a zigzag varint (binary.AppendVarint's).
func (r *reader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errRecord
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string { return string(r.bytes()) }

func (r *reader) byte1() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errRecord
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errRecord
	}
	return r.err
}

// appendIncrements encodes one increments batch.
func appendIncrements(b []byte, region string, incs []Increment) []byte {
	b = append(b, recIncrements)
	b = appendStr(b, region)
	b = binary.AppendUvarint(b, uint64(len(incs)))
	for i := range incs {
		b = appendStr(b, incs[i].ContentID)
		b = appendStr(b, incs[i].Counter)
		b = binary.AppendVarint(b, incs[i].Delta)
	}
	return b
}

// decodeIncrements calls fn for each increment of an increments record.
// It checks the whole record before the first call, so a malformed record
// applies nothing.
func decodeIncrements(p []byte, fn func(k Key, delta int64)) error {
	for pass := 0; pass < 2; pass++ {
		r := reader{b: p}
		if r.byte1() != recIncrements {
			return errRecord
		}
		region := r.str()
		n := r.uvarint()
		if n > uint64(len(p)) {
			return errRecord
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			k := Key{ContentID: r.str(), Counter: r.str(), Region: region}
			d := r.varint()
			if r.err == nil && (d > MaxDelta || d < -MaxDelta) {
				r.err = errRecord
			}
			if pass == 1 && r.err == nil {
				fn(k, d)
			}
		}
		if err := r.done(); err != nil {
			return err
		}
	}
	return nil
}

func appendReaction(b []byte, x engagement.Reaction) []byte {
	b = append(b, byte(x.Action))
	b = appendStr(b, x.Region)
	b = binary.AppendVarint(b, x.Version)
	b = binary.AppendUvarint(b, x.Incarnation)
	return binary.AppendVarint(b, x.UpdatedAt.UnixNano())
}

func (r *reader) reaction(user, content string) engagement.Reaction {
	x := engagement.Reaction{UserID: user, ContentID: content}
	x.Action = engagement.Action(r.byte1())
	x.Region = r.str()
	x.Version = r.varint()
	x.Incarnation = r.uvarint()
	x.UpdatedAt = time.Unix(0, r.varint()).UTC()
	return x
}

func appendIntent(b []byte, in *intent) []byte {
	if in.named {
		b = append(b, recNamedIntent)
	} else {
		b = append(b, recIntent)
	}
	b = binary.AppendUvarint(b, in.id)
	b = appendStr(b, in.user)
	b = appendStr(b, in.content)
	b = appendStr(b, in.region)
	b = append(b, byte(in.action))
	b = append(b, byte(in.op))
	if in.op != opInsert {
		b = appendReaction(b, in.prev)
	}
	if in.op != opDelete {
		b = appendReaction(b, in.next)
	}
	if in.named {
		b = binary.AppendUvarint(b, uint64(len(in.prevWriters)))
		for _, w := range in.prevWriters {
			b = binary.AppendUvarint(b, w)
		}
	}
	return b
}

func decodeIntent(p []byte) (intent, error) {
	r := reader{b: p}
	var in intent
	switch r.byte1() {
	case recIntent:
	case recNamedIntent:
		in.named = true
	default:
		return in, errRecord
	}
	in.id = r.uvarint()
	in.user, in.content, in.region = r.str(), r.str(), r.str()
	in.action = engagement.Action(r.byte1())
	in.op = op(r.byte1())
	switch in.op {
	case opInsert, opUpdate, opDelete:
	default:
		return in, errRecord
	}
	if in.op != opInsert {
		in.prev, in.prevFound = r.reaction(in.user, in.content), true
	}
	if in.op != opDelete {
		in.next = r.reaction(in.user, in.content)
	}
	if in.named {
		n := r.uvarint()
		if n > engagement.MaxWritersKept {
			return in, errRecord
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			in.prevWriters = append(in.prevWriters, r.uvarint())
		}
	}
	return in, r.done()
}

func appendResolution(b []byte, rs *resolution) []byte {
	b = append(b, recResolution)
	b = binary.AppendUvarint(b, rs.id)
	if rs.applied {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendStr(b, rs.content)
	b = binary.AppendUvarint(b, uint64(len(rs.deltas)))
	for _, d := range rs.deltas {
		b = appendStr(b, d.Counter)
		b = appendStr(b, d.Region)
		b = binary.AppendVarint(b, d.Delta)
	}
	return b
}

func decodeResolution(p []byte) (resolution, error) {
	r := reader{b: p}
	var rs resolution
	if r.byte1() != recResolution {
		return rs, errRecord
	}
	rs.id = r.uvarint()
	switch r.byte1() {
	case 0:
	case 1:
		rs.applied = true
	default:
		return rs, errRecord
	}
	rs.content = r.str()
	n := r.uvarint()
	if n > 2 {
		return rs, errRecord
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		d := Delta{Counter: r.str(), Region: r.str(), Delta: r.varint()}
		if d.Delta != 1 && d.Delta != -1 {
			return rs, errRecord
		}
		rs.deltas = append(rs.deltas, d)
	}
	return rs, r.done()
}

func appendOutRecord(b []byte, m *outRecord) []byte {
	b = append(b, recMessage)
	b = binary.AppendUvarint(b, m.covered)
	b = binary.AppendUvarint(b, uint64(m.partition))
	b = binary.AppendUvarint(b, uint64(m.sums))
	b = appendStr(b, m.id)
	b = binary.AppendUvarint(b, uint64(len(m.data)))
	return append(b, m.data...)
}

// decodeOutRecord decodes an outbox record; data aliases p.
func decodeOutRecord(p []byte) (outRecord, error) {
	r := reader{b: p}
	var m outRecord
	if r.byte1() != recMessage {
		return m, errRecord
	}
	m.covered = r.uvarint()
	part := r.uvarint()
	sums := r.uvarint()
	m.id = r.str()
	m.data = r.bytes()
	if err := r.done(); err != nil {
		return m, err
	}
	if part > 1<<20 || sums > uint64(len(p)) || m.id == "" {
		return m, fmt.Errorf("%w: partition %d, %d sums, id %q", errRecord, part, sums, m.id)
	}
	m.partition, m.sums = uint32(part), int(sums)
	return m, nil
}

// Idempotency keys (docs/idempotency.md).
//
// Intake log:
//   - recKeyed: a keyed write: flags (keyAnswered: the record carries the
//     first answer), the key's id (scope, NUL, key), its body digest (16
//     bytes), the time (Unix ns), the answer when flagged, then the
//     guarded record itself (recIncrements, recIntent/recNamedIntent,
//     recResolution, or nothing: a reaction that changed nothing). The key
//     and the write are one record: one is durable exactly when the other
//     is.
//
// Keys log (Dir/keys):
//   - recKeys: the keys whose intake records a flush is about to truncate:
//     a count, then (id, digest, time, answer) each.
const (
	recKeyed byte = 'K'
	recKeys  byte = 'k'
)

// Flags of a recKeyed record: keyAnswered, it carries its answer (an
// intent carries only the key: its answer is known once it is resolved);
// keyAlone, it guards no record (a reaction that changed nothing), so that
// a record cut short never passes for one.
const (
	keyAnswered byte = 1
	keyAlone    byte = 2
)

// Answer kinds.
const (
	ansIncrements byte = 'i'
	ansReaction   byte = 'r'
)

// keyRecord is the key part of a recKeyed record or one entry of recKeys.
type keyRecord struct {
	id       string
	digest   digest
	at       int64 // Unix ns
	answered bool
	alone    bool // no guarded record follows
	ans      answer
}

func appendAnswer(b []byte, a *answer) []byte {
	b = append(b, a.kind)
	if a.kind == ansIncrements {
		return binary.AppendUvarint(b, uint64(a.accepted))
	}
	b = append(b, byte(a.react.Previous), byte(a.react.Action))
	b = binary.AppendVarint(b, a.react.Version)
	if a.react.Changed {
		return append(b, 1)
	}
	return append(b, 0)
}

func (r *reader) answer() answer {
	var a answer
	switch a.kind = r.byte1(); a.kind {
	case ansIncrements:
		n := r.uvarint()
		if n > 1<<24 {
			r.err = errRecord
		}
		a.accepted = int(n)
	case ansReaction:
		a.react.Previous = engagement.Action(r.byte1())
		a.react.Action = engagement.Action(r.byte1())
		a.react.Version = r.varint()
		switch r.byte1() {
		case 0:
		case 1:
			a.react.Changed = true
		default:
			r.err = errRecord
		}
		if !validAction(a.react.Previous) || !validAction(a.react.Action) {
			r.err = errRecord
		}
	default:
		r.err = errRecord
	}
	return a
}

func validAction(a engagement.Action) bool {
	return a == engagement.ActionLike || a == engagement.ActionDislike || a == engagement.ActionNone
}

func (r *reader) digest() digest {
	var d digest
	if r.err != nil {
		return d
	}
	if len(r.b) < len(d) {
		r.err = errRecord
		return d
	}
	copy(d[:], r.b)
	r.b = r.b[len(d):]
	return d
}

func (r *reader) keyID() string {
	id := r.str()
	if r.err == nil && (id == "" || len(id) > maxKeyIDBytes) {
		r.err = errRecord
	}
	return id
}

// appendKeyed encodes the key part of a recKeyed record; the guarded
// record follows it.
func appendKeyed(b []byte, k *keyRecord) []byte {
	b = append(b, recKeyed)
	var flags byte
	if k.answered {
		flags |= keyAnswered
	}
	if k.alone {
		flags |= keyAlone
	}
	b = append(b, flags)
	b = appendStr(b, k.id)
	b = append(b, k.digest[:]...)
	b = binary.AppendVarint(b, k.at)
	if k.answered {
		b = appendAnswer(b, &k.ans)
	}
	return b
}

// decodeKeyed splits a recKeyed record into its key and the guarded
// record (empty for a key alone); inner aliases p.
func decodeKeyed(p []byte) (keyRecord, []byte, error) {
	r := reader{b: p}
	var k keyRecord
	if r.byte1() != recKeyed {
		return k, nil, errRecord
	}
	flags := r.byte1()
	if flags&^(keyAnswered|keyAlone) != 0 || flags == keyAlone {
		return k, nil, errRecord // a key alone always has its answer
	}
	k.answered, k.alone = flags&keyAnswered != 0, flags&keyAlone != 0
	k.id = r.keyID()
	k.digest = r.digest()
	k.at = r.varint()
	if k.answered {
		k.ans = r.answer()
	}
	if r.err != nil {
		return k, nil, r.err
	}
	if k.alone != (len(r.b) == 0) || len(r.b) > 0 && r.b[0] == recKeyed {
		return k, nil, errRecord // one key per write, and a write unless alone
	}
	return k, r.b, nil
}

// appendKeys encodes one keys-log record.
func appendKeys(b []byte, keys []keyRecord) []byte {
	b = append(b, recKeys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for i := range keys {
		k := &keys[i]
		b = appendStr(b, k.id)
		b = append(b, k.digest[:]...)
		b = binary.AppendVarint(b, k.at)
		b = appendAnswer(b, &k.ans)
	}
	return b
}

// decodeKeys calls fn with each key of a keys-log record; it checks the
// whole record first, so a malformed one restores nothing.
func decodeKeys(p []byte, fn func(k keyRecord)) error {
	for pass := 0; pass < 2; pass++ {
		r := reader{b: p}
		if r.byte1() != recKeys {
			return errRecord
		}
		n := r.uvarint()
		if n > uint64(len(p)) {
			return errRecord
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			k := keyRecord{answered: true}
			k.id = r.keyID()
			k.digest = r.digest()
			k.at = r.varint()
			k.ans = r.answer()
			if pass == 1 && r.err == nil {
				fn(k)
			}
		}
		if err := r.done(); err != nil {
			return err
		}
	}
	return nil
}
