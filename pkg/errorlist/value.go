package errorlist

import (
	"strconv"
	"unicode/utf8"
)

// MaxValueBytes is how much of a value a message quotes.
const MaxValueBytes = 64

// Value returns a value as an error message should quote it: whole when it
// is short, otherwise its first MaxValueBytes bytes (cut between
// characters), an ellipsis and its length in bytes:
//
//	xxxxxxxx…(2097152 bytes)
//
// A message about a value from user input must not grow with the value: it
// travels in admission responses, gRPC errors to the kubelet, events and
// logs.
func Value(v string) string {
	if len(v) <= MaxValueBytes {
		return v
	}
	cut := MaxValueBytes
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + "…(" + strconv.Itoa(len(v)) + " bytes)"
}
