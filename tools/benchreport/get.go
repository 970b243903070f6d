package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// runGet is the get subcommand: the value of each key of the JSON object
// on stdin (a top-level key), one a line. A number is printed as it is
// written in the JSON, a string without quotes, null as "null", an object
// or an array as compact JSON; a key the object lacks is an error.
func runGet(keys []string, stdin io.Reader, stdout io.Writer) error {
	if len(keys) == 0 {
		return errUsage
	}
	dec := json.NewDecoder(stdin)
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return fmt.Errorf("cannot decode the JSON object on stdin: %w", err)
	}
	w := bufio.NewWriter(stdout)
	for _, k := range keys {
		v, ok := obj[k]
		if !ok {
			return fmt.Errorf("cannot get %s: the object has no such key", k)
		}
		s, err := valueText(v)
		if err != nil {
			return fmt.Errorf("cannot get %s: %w", k, err)
		}
		fmt.Fprintln(w, s)
	}
	return w.Flush()
}

// valueText is how get prints a decoded JSON value.
func valueText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case nil:
		return "null", nil
	default: // bool, object, array
		b, err := json.Marshal(v)
		return string(b), err
	}
}
