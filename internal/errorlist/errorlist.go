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
	"fmt"
	"strings"
)

// Max is how many errors a summary spells out.
const Max = 10

// Summarize returns nil for no errors, the error itself for one, and for
// several a single error whose message lists them in order, at most Max of
// them, and says how many there were in all:
//
//	[a, b, c]
//	first 10 of 2538 errors: [a, b, ..., j]
//
// Nested lists (errors.Join, apimachinery aggregates, earlier summaries)
// are flattened first, so a summary of summaries still counts every
// original error once. Identical messages are shown once. Only the errors
// shown are formatted, so summarizing costs the same for ten errors as
// for a million.
func Summarize(errs []error) error {
	var s summary
	for _, err := range errs {
		s.add(err)
	}
	switch {
	case s.total == 0:
		return nil
	case s.total == 1 && len(s.shown) == 1 && !s.more:
		return s.shown[0]
	}
	return &s
}

// summary is the error Summarize returns for several errors.
type summary struct {
	// shown are the first distinct errors, at most Max.
	shown []error
	// msgs are their messages, to drop duplicates.
	msgs map[string]bool
	// total counts every error added, shown or not.
	total int
	// more is set when a source stopped counting: total is a lower bound.
	more bool
}

// More is a marker to pass to Summarize beside the errors of a source that
// stops counting at some point (the JSON decoder reports at most 100
// unknown fields): the summary then says "at least". It is not an error of
// its own and is never shown.
var More error = moreMarker{}

type moreMarker struct{}

func (moreMarker) Error() string { return "and possibly more errors" }

// multi is what errors.Join and apimachinery's aggregates implement.
type multi interface{ Unwrap() []error }

// aggregate is apimachinery's utilerrors.Aggregate, which does not
// implement Unwrap() []error.
type aggregate interface{ Errors() []error }

func (s *summary) add(err error) {
	if err == nil {
		return
	}
	switch e := err.(type) {
	case moreMarker:
		s.more = true
		return
	case *summary:
		s.more = s.more || e.more
		hidden := e.total
		for _, shown := range e.shown {
			s.add(shown)
			hidden--
		}
		s.total += hidden
		return
	case multi:
		for _, inner := range e.Unwrap() {
			s.add(inner)
		}
		return
	case aggregate:
		for _, inner := range e.Errors() {
			s.add(inner)
		}
		return
	}
	s.total++
	if len(s.shown) >= Max {
		return
	}
	msg := err.Error()
	if s.msgs[msg] {
		return
	}
	if s.msgs == nil {
		s.msgs = map[string]bool{}
	}
	s.msgs[msg] = true
	s.shown = append(s.shown, err)
}

// Error lists the errors shown, in the form apimachinery's aggregates use
// ("[a, b]", one message alone without brackets), and, past Max, says how
// many there were.
func (s *summary) Error() string {
	var b strings.Builder
	switch {
	case s.total > Max && s.more:
		fmt.Fprintf(&b, "first %d of at least %d errors: ", len(s.shown), s.total)
	case s.total > Max:
		fmt.Fprintf(&b, "first %d of %d errors: ", len(s.shown), s.total)
	case s.more:
		b.WriteString("at least these errors: ")
	case len(s.shown) == 1:
		// Repeats of one message, as apimachinery prints them.
		return s.shown[0].Error()
	}
	b.WriteByte('[')
	for i, err := range s.shown {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(err.Error())
	}
	b.WriteByte(']')
	return b.String()
}

// Unwrap returns the errors shown, for errors.Is and errors.As.
func (s *summary) Unwrap() []error { return s.shown }

// Total returns how many errors err stands for (at least): the count a summary
// records, the number of joined errors, or 1 for any other error (0 for
// nil).
func Total(err error) int {
	var s summary
	s.add(err)
	return s.total
}

var _ interface {
	error
	Unwrap() []error
} = (*summary)(nil)

// Split returns the errors err lists and how many there were in all: for a
// summary, the errors it shows, its total, and whether the total is only a
// lower bound; for any other error (nil excepted), err itself, 1 and false.
// Callers that report each error on its own (an admission response's
// causes) use it, and say how many more there were.
func Split(err error) (shown []error, total int, atLeast bool) {
	if err == nil {
		return nil, 0, false
	}
	if s, ok := err.(*summary); ok {
		return s.shown, s.total, s.more
	}
	return []error{err}, 1, false
}
