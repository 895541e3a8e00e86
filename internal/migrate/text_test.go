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

package migrate

import (
	"strings"
	"testing"
)

// TestAnnotateEscapes: the comments migrate writes into the YAML quote
// fields and messages from the input; a newline in them must not end the
// comment and inject YAML, nor a carriage return or escape sequence
// reach whoever reads the file on a terminal.
func TestAnnotateEscapes(t *testing.T) {
	m := &migrator{notes: []Note{{Kind: NoEquivalent, Line: 1, Field: "spec.a\ninjected: true", Message: "left\r as it is\x1b[2J"}}}
	got := string(m.annotate([]byte("spec:\n  a: 1\n"), false))
	want := "# gpudra migrate: no equivalent: spec.a\\ninjected: true: left\\r as it is\\x1b[2J\nspec:\n  a: 1\n"
	if got != want {
		t.Errorf("annotated:\n%q\nwant\n%q", got, want)
	}
	if strings.Contains(got, "\ninjected") {
		t.Error("a field's newline ended the comment")
	}
}
