package gossip

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hashicorp/memberlist"
)

// Key file limits.
const (
	maxKeyFileBytes = 64 << 10
	// MaxKeys is the most keys a key file may hold.
	MaxKeys = maxMetaKeys
)

// ErrNoKeyFile is returned by ReloadKeys on a node started without a key
// file: memberlist cannot turn encryption on at run time.
var ErrNoKeyFile = errors.New("gossip is not encrypted (no key file)")

// LoadKeyFile reads a gossip key file. The format is text, one key per line:
// the standard base64 encoding (with padding) of 16, 24 or 32 random bytes
// (AES-128, -192 or -256), e.g. the output of `openssl rand -base64 32`.
// Blank lines and lines starting with '#' are ignored; surrounding spaces
// are trimmed. The first key is the primary key, which encrypts everything
// the node sends; every key in the file decrypts. At least one key, at most
// MaxKeys, no duplicates. Keys are returned primary first.
func LoadKeyFile(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open key file: %w", err)
	}
	defer f.Close()
	keys, err := parseKeys(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot load key file %s: %w", path, err)
	}
	return keys, nil
}

func parseKeys(r io.Reader) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxKeyFileBytes+1)
	total, line := 0, 0
	for sc.Scan() {
		line++
		total += len(sc.Bytes()) + 1
		if total > maxKeyFileBytes {
			return nil, fmt.Errorf("file is larger than %d bytes", maxKeyFileBytes)
		}
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		key, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: not standard base64", line)
		}
		if err := memberlist.ValidateKey(key); err != nil {
			return nil, fmt.Errorf("line %d: %d bytes: key must be 16, 24 or 32 bytes", line, len(key))
		}
		for i, k := range keys {
			if bytes.Equal(k, key) {
				return nil, fmt.Errorf("line %d: duplicate of key %d", line, i+1)
			}
		}
		keys = append(keys, key)
		if len(keys) > MaxKeys {
			return nil, fmt.Errorf("more than %d keys", MaxKeys)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read: %w", err)
	}
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	return keys, nil
}

// reconcileKeyring makes kr hold exactly keys, keys[0] primary: it installs
// the new keys, switches the primary, then removes the keys that are no
// longer listed. Nodes that got a new key earlier keep decrypting with the
// old ones until their file drops them.
//
// memberlist's Keyring.RemoveKey shifts the keys after the removed one in
// place, in the array that concurrent decryptions may be reading (a data
// race). Removing the last key shifts nothing, so keys are removed from
// the end: a listed key that stands after a removed one is removed with it
// and added back at once (for that moment the node cannot decrypt with
// it). The rotation procedure (docs/gossip.md) never reaches that case: the key it
// removes is always the last one.
func reconcileKeyring(kr *memberlist.Keyring, keys [][]byte) error {
	for _, k := range keys {
		if err := kr.AddKey(k); err != nil {
			return fmt.Errorf("cannot install key: %w", err)
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return fmt.Errorf("cannot use primary key: %w", err)
	}
	listed := func(k []byte) bool {
		for _, l := range keys {
			if bytes.Equal(l, k) {
				return true
			}
		}
		return false
	}
	installed := kr.GetKeys()
	cut := len(installed)
	for i := 1; i < len(installed); i++ {
		if !listed(installed[i]) {
			cut = i
			break
		}
	}
	var readd [][]byte
	for i := len(installed) - 1; i >= cut; i-- {
		k := installed[i]
		if listed(k) {
			readd = append(readd, k)
		}
		if err := kr.RemoveKey(k); err != nil {
			return fmt.Errorf("cannot remove key: %w", err)
		}
	}
	for i := len(readd) - 1; i >= 0; i-- {
		if err := kr.AddKey(readd[i]); err != nil {
			return fmt.Errorf("cannot install key: %w", err)
		}
	}
	return nil
}
