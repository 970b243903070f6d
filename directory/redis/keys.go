package redis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/edgecount/edgecount/engagement"
)

// fieldShards is the field of a counter hash that holds its shard count;
// fieldUpdated holds the time of the last Set, in Unix milliseconds, for
// operators.
const (
	fieldShards  = "shards"
	fieldUpdated = "updated_at"
)

// keys builds the Redis keys of one region. The region is a hash tag
// ({region}), so on a Redis Cluster all keys of a region share a slot and a
// MULTI may span them.
type keys struct {
	content string // "ec:{<region>}:content:"
	counter string // "ec:{<region>}:counter:"
}

func newKeys(region string) keys {
	p := "ec:{" + region + "}:"
	return keys{content: p + "content:", counter: p + "counter:"}
}

// contentKey is the set of counter names of contentID that have an entry.
func (k keys) contentKey(contentID string) string { return k.content + contentID }

// counterKey is the hash holding the entry of one counter. Counter names
// contain no ':', so the last ':' separates the two ids.
func (k keys) counterKey(contentID, counter string) string {
	return k.counter + contentID + ":" + counter
}

// checkEntry reports why (contentID, counter) cannot have an entry.
func checkEntry(contentID, counter string) error {
	var errs []error
	if !engagement.ValidID(contentID) {
		errs = append(errs, fmt.Errorf("content id %q is not a valid id", contentID))
	}
	if !engagement.ValidCounter(counter) {
		errs = append(errs, fmt.Errorf("counter %q is not a valid counter name", counter))
	}
	return errors.Join(errs...)
}

// An invalidation message is "<counter> <content_id>": the entry of that
// counter changed, re-read it. It carries no value on purpose: messages can
// be overtaken by a fetch (they travel on another connection), and a stale
// value would undo a newer one, while a stale "re-read" costs one lookup.
// Neither id contains a space.

func encodeInvalidation(contentID, counter string) string {
	return counter + " " + contentID
}

func decodeInvalidation(payload string) (contentID, counter string, err error) {
	counter, contentID, ok := strings.Cut(payload, " ")
	if !ok {
		return "", "", fmt.Errorf("cannot decode invalidation %q: want \"<counter> <content_id>\"", payload)
	}
	if err := checkEntry(contentID, counter); err != nil {
		return "", "", fmt.Errorf("cannot decode invalidation %q: %w", payload, err)
	}
	return contentID, counter, nil
}

// parseShards reads a stored shard count; ok is false when the value is
// not a count in 1..MaxShards.
func parseShards(s string) (n int32, ok bool) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > MaxShards {
		return 0, false
	}
	return int32(v), true
}
