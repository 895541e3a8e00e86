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

package gpudratest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/cmdline"
)

// runMainEnv tells a test binary to be the daemon: RunMainIfAsked runs
// main() instead of the tests.
const runMainEnv = "GPUDRA_TEST_RUN_MAIN"

// RunMainIfAsked, called first in a daemon package's TestMain, runs the
// daemon's main() with the test binary's arguments when RunDaemon started
// it, and never returns then (main exits). Otherwise it does nothing.
func RunMainIfAsked(main func()) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
}

// Daemon is how one run of a daemon ended.
type Daemon struct {
	Code           int
	Stdout, Stderr string
}

// RunDaemon runs the daemon whose package's tests are running, as its own
// process, with args and env (KEY=VALUE, added to this process's), and
// returns how it ended: main()'s exit status is what a user or the kubelet
// sees.
func RunDaemon(t testing.TB, env []string, args ...string) Daemon {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	d := Daemon{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		d.Code = exit.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return d
}

// CheckHelp: --help exits 0 and prints, on standard output, the
// description, the usage line and every flag in a named section (none left
// to "Misc"), with the sections Kubernetes components end with.
func CheckHelp(t testing.TB, cmd *cmdline.Command, sections ...string) {
	t.Helper()
	if left := cmd.Unsectioned(); len(left) > 0 {
		t.Errorf("flags in no --help section: %v (add them to a cmd.Section call in newFlags)", left)
	}
	d := RunDaemon(t, nil, "--help")
	if d.Code != 0 {
		t.Fatalf("--help exits %d, want 0; stderr:\n%s", d.Code, d.Stderr)
	}
	if !strings.HasPrefix(d.Stdout, cmd.Description+"\n\nUsage:\n  "+cmd.Name+" [flags]\n") {
		t.Errorf("--help does not start with the description and the usage line:\n%s", d.Stdout)
	}
	for _, s := range append(sections, "Feature gate", "Logs", "Global") {
		if !strings.Contains(d.Stdout, "\n"+s+" flags:\n") {
			t.Errorf("--help has no section %q:\n%s", s+" flags:", d.Stdout)
		}
	}
	if strings.Contains(d.Stdout, "Misc flags:") {
		t.Errorf("--help has a Misc section:\n%s", d.Stdout)
	}
}

// ExitCase is one run of a daemon and how it must end: with Code, and
// with Output in its standard output (Code 0) or standard error.
type ExitCase struct {
	Name      string
	Env, Args []string
	Code      int
	Output    string
}

// CheckExitStatus runs each case as its own subtest (RunDaemon).
func CheckExitStatus(t *testing.T, cases []ExitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			d := RunDaemon(t, tc.Env, tc.Args...)
			out := d.Stderr
			if tc.Code == 0 {
				out = d.Stdout
			}
			if d.Code != tc.Code || !strings.Contains(out, tc.Output) {
				t.Errorf("%v: exit %d, want %d with %q; stdout:\n%s\nstderr:\n%s", tc.Args, d.Code, tc.Code, tc.Output, d.Stdout, d.Stderr)
			}
		})
	}
}
