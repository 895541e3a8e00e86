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

// Package sparesmap is the format of the spares ConfigMap, in one place:
// gpudra-controller writes it (internal/migspares decides what) and each
// kubelet plugin in fleet mode (--mig-spare-gpus=fleet) reads its own
// node's entry. It knows nothing of GPUs: a node name maps to a number.
package sparesmap

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The spares ConfigMap's format, the one place that reads and writes it
// (gpudra-controller writes it, each plugin in fleet mode reads its own
// node's entry): data maps a node name to the spare GPUs assigned to it,
// a decimal number from 1 (spaces around it are ignored); a node assigned
// none is left out. The controller only ever assigns 1 (Own).

// Own is the one value gpudra-controller writes: one spare GPU.
const Own = 1

// Decode reads one entry's value: a decimal number of spare GPUs from 1,
// spaces around it ignored. Anything else is an error (the node counts as
// assigned none); the error quotes the value cut short (ShortValue).
func Decode(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q: want a decimal number of spare GPUs from 1", ShortValue(v))
	case n < 1:
		return 0, fmt.Errorf("%d: want a number of spare GPUs from 1 (a node assigned none is left out)", n)
	}
	return n, nil
}

// Encode is the value of a node assigned n spare GPUs (n >= 1).
func Encode(n int) string { return strconv.Itoa(n) }

// Parse reads the ConfigMap's data as gpudra-controller wrote it: the
// nodes whose entry is Own. Every other entry is foreign (a value the
// controller never writes: not a number, 0, or more than one spare, e.g.
// a hand edit of 2147483647) and is returned apart, to be logged
// (ShortValue) and left out of the next write: the controller owns the
// ConfigMap.
func Parse(data map[string]string) (own map[string]int, foreign map[string]string) {
	own = map[string]int{}
	for node, v := range data {
		if n, err := Decode(v); err == nil && n == Own {
			own[node] = Own
			continue
		}
		if foreign == nil {
			foreign = map[string]string{}
		}
		foreign[node] = v
	}
	return own, foreign
}

// EncodeAll is the ConfigMap's data for an assignment.
func EncodeAll(a map[string]int) map[string]string {
	out := make(map[string]string, len(a))
	for node, n := range a {
		out[node] = Encode(n)
	}
	return out
}

// maxLogged is how many bytes of a value ShortValue keeps.
const maxLogged = 64

// ShortValue is a value as it is logged: whole when at most 64 bytes,
// else its first 64 bytes (cut on a character boundary) and its length,
// so that a 64 KiB value does not make a 64 KiB log line.
func ShortValue(v string) string {
	if len(v) <= maxLogged {
		return v
	}
	cut := maxLogged
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", v[:cut], len(v))
}
