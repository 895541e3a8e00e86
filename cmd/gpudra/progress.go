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
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// progressEvery is how often a progress line is rewritten at most.
const progressEvery = 200 * time.Millisecond

// progress shows on a terminal how far a long run got, on one line that it
// rewrites: a check over thousands of fake nodes or pods takes tens of
// seconds and says nothing until the report. It writes nothing where its
// writer is not a terminal (a pipe, a file, CI logs), so that what
// scripts read stays the report alone.
type progress struct {
	w   io.Writer
	now func() time.Time
	mu  sync.Mutex // guards the fields below; stages report from several goroutines
	// last is when the line was last written; shown whether it is on
	// screen (clear removes it).
	last  time.Time
	shown bool
}

// newProgress returns a progress writing to w when w is a terminal, nil
// (which reports nothing) when not.
func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &progress{w: w, now: time.Now}
}

// report shows that done of total items of stage are done. The line is
// rewritten at most every progressEvery, and when a stage ends.
func (p *progress) report(stage string, done, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if done < total && now.Sub(p.last) < progressEvery {
		return
	}
	p.last, p.shown = now, true
	pct := 100
	if total > 0 {
		pct = done * 100 / total
	}
	// \r and ESC[K: back to the start of the line, and erase it.
	fmt.Fprintf(p.w, "\r\x1b[Kgpudra: %s %d/%d (%d%%)", stage, done, total, pct)
}

// clear erases the progress line, before the report is written.
func (p *progress) clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}
