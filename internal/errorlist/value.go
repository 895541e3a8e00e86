/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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
