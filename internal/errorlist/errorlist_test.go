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
	"errors"
	"fmt"
	"strings"
	"testing"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

func numbered(n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = fmt.Errorf("e%d", i)
	}
	return errs
}

func TestSummarize(t *testing.T) {
	sentinel := errors.New("sentinel")
	tests := []struct {
		name      string
		errs      []error
		want      string // "" for nil
		wantTotal int
	}{
		{name: "none", errs: nil},
		{name: "only nils", errs: []error{nil, nil}},
		{name: "one is itself", errs: []error{sentinel}, want: "sentinel", wantTotal: 1},
		{name: "a few, as an aggregate prints them", errs: numbered(3), want: "[e0, e1, e2]", wantTotal: 3},
		{name: "exactly Max", errs: numbered(Max), want: "[e0, e1, e2, e3, e4, e5, e6, e7, e8, e9]", wantTotal: Max},
		{name: "one more than Max", errs: numbered(Max + 1), want: "first 10 of 11 errors: [e0, e1, e2, e3, e4, e5, e6, e7, e8, e9]", wantTotal: Max + 1},
		{name: "thousands", errs: numbered(2538), want: "first 10 of 2538 errors: [e0, e1, e2, e3, e4, e5, e6, e7, e8, e9]", wantTotal: 2538},
		{name: "repeats shown once", errs: []error{sentinel, sentinel}, want: "sentinel", wantTotal: 2},
		{
			name:      "nested joins and aggregates are flattened",
			errs:      []error{errors.Join(numbered(2)...), utilerrors.NewAggregate(numbered(2)[1:]), errors.New("x")},
			want:      "[e0, e1, x]",
			wantTotal: 4,
		},
		{
			name:      "a source that stopped counting",
			errs:      append(numbered(100), More),
			want:      "first 10 of at least 100 errors: [e0, e1, e2, e3, e4, e5, e6, e7, e8, e9]",
			wantTotal: 100,
		},
		{
			name:      "at least, nested",
			errs:      []error{Summarize(append(numbered(2), More))},
			want:      "at least these errors: [e0, e1]",
			wantTotal: 2,
		},
		{
			name:      "a summary of summaries counts every original error",
			errs:      []error{Summarize(numbered(100)), Summarize(numbered(50))},
			want:      "first 10 of 150 errors: [e0, e1, e2, e3, e4, e5, e6, e7, e8, e9]",
			wantTotal: 150,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Summarize(tc.errs)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Summarize = %q, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Summarize = %v\nwant %s", err, tc.want)
			}
			if got := Total(err); got != tc.wantTotal {
				t.Errorf("Total = %d, want %d", got, tc.wantTotal)
			}
		})
	}
}

func TestSummarizeKeepsErrorsIs(t *testing.T) {
	sentinel := errors.New("sentinel")
	err := Summarize([]error{errors.New("a"), fmt.Errorf("wrapped: %w", sentinel)})
	if !errors.Is(err, sentinel) {
		t.Errorf("errors.Is(%v, sentinel) = false", err)
	}
}

// TestSummarizeFormatsOnlyWhatItShows: a million errors whose messages cost
// something to build must not all be built.
func TestSummarizeFormatsOnlyWhatItShows(t *testing.T) {
	formatted := 0
	errs := make([]error, 1_000_000)
	for i := range errs {
		errs[i] = countingError{n: i, formatted: &formatted}
	}
	msg := Summarize(errs).Error()
	if formatted > 2*Max {
		t.Errorf("%d messages formatted for a summary of %d errors, want at most %d", formatted, len(errs), 2*Max)
	}
	if !strings.HasPrefix(msg, "first 10 of 1000000 errors: [") || len(msg) > 200 {
		t.Errorf("summary = %q", msg)
	}
}

type countingError struct {
	n         int
	formatted *int
}

func (e countingError) Error() string {
	*e.formatted++
	return fmt.Sprint(e.n)
}

func TestSplit(t *testing.T) {
	var errs []error
	for i := range 25 {
		errs = append(errs, fmt.Errorf("error %d", i))
	}
	shown, total, atLeast := Split(Summarize(errs))
	if len(shown) != Max || total != 25 || atLeast || shown[0].Error() != "error 0" {
		t.Errorf("Split(summary of 25) = %d shown, total %d, atLeast %v", len(shown), total, atLeast)
	}
	shown, total, atLeast = Split(Summarize(append(errs[:3:3], More)))
	if len(shown) != 3 || total != 3 || !atLeast {
		t.Errorf("Split(summary of 3 and more) = %d shown, total %d, atLeast %v", len(shown), total, atLeast)
	}
	one := fmt.Errorf("alone")
	if shown, total, _ := Split(one); len(shown) != 1 || shown[0] != one || total != 1 {
		t.Errorf("Split(one error) = %v, %d", shown, total)
	}
	if shown, total, _ := Split(nil); shown != nil || total != 0 {
		t.Errorf("Split(nil) = %v, %d", shown, total)
	}
}

func TestValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"compute", "compute"},
		{strings.Repeat("a", MaxValueBytes), strings.Repeat("a", MaxValueBytes)},
		{strings.Repeat("a", 2<<20), strings.Repeat("a", MaxValueBytes) + "…(2097152 bytes)"},
		// Cut between characters, never inside one.
		{"a" + strings.Repeat("é", MaxValueBytes), "a" + strings.Repeat("é", (MaxValueBytes-1)/2) + "…(129 bytes)"},
	} {
		if got := Value(tc.in); got != tc.want {
			t.Errorf("Value(%.20q…) = %.100q, want %.100q", tc.in, got, tc.want)
		}
	}
}
