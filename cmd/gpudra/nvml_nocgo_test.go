//go:build !cgo

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
	"context"
	"strings"
	"testing"
)

// The build without cgo lacks the NVML subcommands and says so, exit 3;
// check without ResourceSlices to check against says what to give it;
// migrate, check of given slices and version work.
func TestNoCgoBuild(t *testing.T) {
	run := func(stdin string, args ...string) (int, string, string) {
		root := newRootCommand("gpudra")
		var out, errOut bytes.Buffer
		root.SetIn(strings.NewReader(stdin))
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(args)
		return execute(context.Background(), root, &errOut), out.String(), errOut.String()
	}
	for _, sub := range []string{"inventory", "gpu-check", "simulate"} {
		code, _, errOut := run("", sub, "--device-backend=fake")
		if code != exitFailure || !strings.Contains(errOut, "built without cgo") {
			t.Errorf("%s: exit %d, %q; want %d saying the build has no cgo", sub, code, errOut, exitFailure)
		}
	}
	code, _, errOut := run("", "check", "--examples")
	if code != exitFailure || !strings.Contains(errOut, "--cluster") {
		t.Errorf("check --examples without slices: exit %d, %q", code, errOut)
	}
	if code, out, errOut := run("", "version"); code != exitOK || !strings.HasPrefix(out, "gpudra ") {
		t.Errorf("version: exit %d, %q %q", code, out, errOut)
	}
	if code, _, errOut := run("", "--help"); code != exitOK || strings.Contains(errOut, "inventory") {
		t.Errorf("--help: exit %d, %q", code, errOut)
	}
}
