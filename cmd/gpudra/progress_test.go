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

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// On a terminal, progress rewrites one line: at most every progressEvery,
// always when a stage ends, and clear erases it before the report.
func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(0, 0)
	p := &progress{w: &buf, now: func() time.Time { return clock }}
	p.report("fake nodes built", 1, 1000)
	p.report("fake nodes built", 2, 1000) // within progressEvery: not shown
	clock = clock.Add(progressEvery)
	p.report("fake nodes built", 500, 1000)
	p.report("fake nodes built", 1000, 1000) // a stage's end is always shown
	want := "\r\x1b[Kgpudra: fake nodes built 1/1000 (0%)" +
		"\r\x1b[Kgpudra: fake nodes built 500/1000 (50%)" +
		"\r\x1b[Kgpudra: fake nodes built 1000/1000 (100%)"
	if got := buf.String(); got != want {
		t.Errorf("progress wrote %q, want %q", got, want)
	}
	buf.Reset()
	p.clear()
	p.clear() // once erased, nothing more
	if got := buf.String(); got != "\r\x1b[K" {
		t.Errorf("clear wrote %q", got)
	}
}

// Where stderr is not a terminal (a file, a pipe, CI), nothing but the
// report and errors is written: a nil progress reports nothing.
func TestProgressOffTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := newProgress(f); p != nil {
		t.Fatal("a progress line on a regular file")
	}
	if p := newProgress(&bytes.Buffer{}); p != nil {
		t.Fatal("a progress line on a buffer")
	}
	var p *progress
	p.report("pods placed", 1, 2)
	p.clear()
}
