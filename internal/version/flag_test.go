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

package version

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		done     bool
		exitCode int
		printed  string
	}{
		{args: nil, done: false, exitCode: 0},
		{args: []string{"--node-name=n"}, done: false, exitCode: 0},
		{args: []string{"--version"}, done: true, exitCode: 0, printed: "gpudra-test " + Get().Version + " (revision "},
		{args: []string{"--help"}, done: true, exitCode: 0},
		{args: []string{"--no-such-flag"}, done: true, exitCode: 2},
		{args: []string{"--node-name"}, done: true, exitCode: 2},
	} {
		fs := pflag.NewFlagSet("gpudra-test", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("node-name", "", "")
		var out bytes.Buffer
		done, err := ParseFlags(fs, tc.args, "gpudra-test", &out)
		if done != tc.done || ExitCode(err) != tc.exitCode {
			t.Errorf("%v: done %v, exit %d (%v); want %v, %d", tc.args, done, ExitCode(err), err, tc.done, tc.exitCode)
		}
		if !strings.HasPrefix(out.String(), tc.printed) || (tc.printed == "") != (out.Len() == 0) {
			t.Errorf("%v: printed %q, want %q…", tc.args, out.String(), tc.printed)
		}
	}
	if ExitCode(errors.New("runtime failure")) != 1 {
		t.Error("a runtime error must exit 1")
	}
}
