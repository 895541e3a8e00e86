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

package textsafe

import "testing"

func TestLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "",
		"gpu-0":                 "gpu-0",
		"NVIDIA H100 80GB HBM3": "NVIDIA H100 80GB HBM3",
		"ü日本 ✓":                 "ü日本 ✓",
		`a\rb`:                  `a\rb`,
		"a\rb":                  `a\rb`,
		"a\nb":                  `a\nb`,
		"a\tb":                  `a\tb`,
		"\x1b[2J":               `\x1b[2J`,
		"\x00\x7f":              `\x00\x7f`,
		"abc\u202eexe.txt":      `abc\u202eexe.txt`,
		"zero\u200bwidth":       `zero\u200bwidth`,
		"no\u00a0break":         `no\u00a0break`,
		"bad\xffbyte":           `bad\xffbyte`,
		"line\u2028separator":   `line\u2028separator`,
		"c1\u0085next":          `c1\u0085next`,
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	if got, want := Text("one\ntwo\rforged\tcell\n"), "one\ntwo\\rforged\\tcell\n"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}

func TestSafeTextIsNotCopied(t *testing.T) {
	s := "node-1 gpu-3 ü"
	if n := testing.AllocsPerRun(100, func() { _ = Line(s) }); n != 0 {
		t.Errorf("Line of printable text allocates %v times", n)
	}
}
