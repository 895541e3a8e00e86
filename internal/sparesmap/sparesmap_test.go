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

package sparesmap

import (
	"maps"
	"strings"
	"testing"
)

// The spares ConfigMap's entries: a decimal number of GPUs from 1, spaces
// around it ignored (the controller and the plugin read them with this one
// function); anything else counts as none, with an error to log.
func TestDecode(t *testing.T) {
	for in, want := range map[string]int{"1": 1, "2": 2, " 3\n": 3, "\t1 ": 1, "0": -1, "-1": -1, "": -1, "two": -1, "1.5": -1, "0x2": -1} {
		got, err := Decode(in)
		switch {
		case want < 0 && (err == nil || got != 0):
			t.Errorf("Decode(%q) = %d, %v; want 0 and an error", in, got, err)
		case want >= 0 && (err != nil || got != want):
			t.Errorf("Decode(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if got, err := Decode(Encode(Own)); err != nil || got != Own {
		t.Errorf("Decode(Encode(%d)) = %d, %v", Own, got, err)
	}
	// A huge value's error is short.
	if _, err := Decode(strings.Repeat("9", 64<<10)); err == nil || len(err.Error()) > 160 {
		t.Errorf("Decode of 64 KiB: error of %d bytes, want a short one", len(err.Error()))
	}
}

// Parse keeps only what the controller writes; every other entry is
// foreign (2147483647 included), whatever the spaces around it.
func TestParse(t *testing.T) {
	own, foreign := Parse(map[string]string{"a": "1", "b": " 1\n", "c": "2147483647", "d": "x", "e": "0", "f": "2"})
	if want := (map[string]int{"a": 1, "b": 1}); !maps.Equal(own, want) {
		t.Errorf("own %v, want %v", own, want)
	}
	if want := map[string]string{"c": "2147483647", "d": "x", "e": "0", "f": "2"}; !maps.Equal(foreign, want) {
		t.Errorf("foreign %v, want %v", foreign, want)
	}
	if got := EncodeAll(map[string]int{"a": 1}); !maps.Equal(got, map[string]string{"a": "1"}) {
		t.Errorf("EncodeAll: %v", got)
	}
}

func TestShortValue(t *testing.T) {
	for _, v := range []string{"", "1", "2147483647", strings.Repeat("x", 64)} {
		if got := ShortValue(v); got != v {
			t.Errorf("ShortValue(%q) = %q, want it whole", v, got)
		}
	}
	long := strings.Repeat("9", 64<<10)
	if got := ShortValue(long); len(got) > 100 || !strings.HasPrefix(got, strings.Repeat("9", 64)) || !strings.Contains(got, "65536 bytes") {
		t.Errorf("ShortValue of 64 KiB = %q (%d bytes), want its first 64 bytes and its length", got, len(got))
	}
	// Cut on a character boundary.
	if got := ShortValue(strings.Repeat("é", 40)); !strings.HasPrefix(got, strings.Repeat("é", 32)+"…") {
		t.Errorf("ShortValue cut a character: %q", got)
	}
}
