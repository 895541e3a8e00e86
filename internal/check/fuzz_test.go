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

package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/scheduler"
)

var (
	fuzzSlicesOnce sync.Once
	fuzzSlices     []*resourceapi.ResourceSlice
	fuzzSlicesErr  error
)

// fuzzInventory is one mixed node, built once: the fuzzer exercises the
// input path, not the fake GPUs.
func fuzzInventory(t testing.TB) []*resourceapi.ResourceSlice {
	fuzzSlicesOnce.Do(func() {
		fuzzSlices, fuzzSlicesErr = fakenodes.Slices(context.Background(), "mixed", 1, gpu.DefaultDriverName)
	})
	if fuzzSlicesErr != nil {
		t.Fatal(fuzzSlicesErr)
	}
	return fuzzSlices
}

// checkBytes is the CLI's input path on one file and one extra selector:
// decode, then Run, then render both outputs. It returns the exit status
// and the message a user would see.
func checkBytes(t testing.TB, data []byte, expr string) (int, string) {
	in := &scheduler.Manifests{}
	if err := in.Add("fuzz.yaml", data); err != nil {
		var ie *scheduler.InputError
		if !errors.As(err, &ie) {
			t.Fatalf("Add returned %T, not an InputError: %v", err, err)
		}
		return ExitCode(nil, err), err.Error()
	}
	if expr != "" {
		claim := "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: fuzz-expr}\nspec:\n  devices:\n    requests:\n    - name: r\n      exactly:\n        deviceClassName: gpu.gpudra.io\n        selectors:\n        - cel:\n            expression: " + yamlQuote(expr) + "\n"
		if err := in.Add("expr.yaml", []byte(claim)); err != nil {
			return ExitCode(nil, err), err.Error()
		}
	}
	rep, err := Run(context.Background(), Options{Inputs: in, Slices: fuzzInventory(t), BuiltinClasses: true, AllocateTimeout: 2 * time.Second})
	code := ExitCode(rep, err)
	if err != nil {
		var ie *scheduler.InputError
		if !errors.As(err, &ie) {
			t.Fatalf("Run returned %T, not an InputError: %v", err, err)
		}
		return code, err.Error()
	}
	if rep.ExitCode != code {
		t.Fatalf("report exit code %d, ExitCode() %d", rep.ExitCode, code)
	}
	if err := rep.WriteText(io.Discard, true); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(io.Discard); err != nil {
		t.Fatal(err)
	}
	msg := "no findings"
	if len(rep.Findings) > 0 {
		msg = rep.Findings[0].Message
	}
	return code, msg
}

// yamlQuote writes s as a double-quoted YAML scalar (JSON string syntax).
func yamlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r == 0x7f || r == 0xfeff || (r >= 0x80 && r < 0xa0) || r == 0xfffd || r == 0x2028 || r == 0x2029:
			b.WriteString(`\u`)
			const hex = "0123456789abcdef"
			b.WriteByte(hex[(r>>12)&0xf])
			b.WriteByte(hex[(r>>8)&0xf])
			b.WriteByte(hex[(r>>4)&0xf])
			b.WriteByte(hex[r&0xf])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzCheck feeds arbitrary YAML and CEL to the input path. It must never
// panic, and must always end in exit status 0, 1 or 2 with a message.
// `go test` runs the seeds (f.Add and testdata/fuzz/FuzzCheck); run
// `go test ./internal/check -run '^$' -fuzz FuzzCheck -fuzztime 1m` to search.
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "cases", "*.yaml"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "")
	}
	exprs := []string{
		"device.driver == 'gpu.gpudra.io'",
		"device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('40Gi')) >= 0",
		"device.attributes['gpu.gpudra.io'].memory > 3",
		"device.attributes['gpu.gpudra.io'].cudaComputeCapability >= '8.0'",
		"device.attributes['gpu.gpudra.io'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))",
		"device.attributes['gpu.gpudra.io'].?profile.orValue('') == '1g.10gb'",
		"has(device.attributes['gpu.gpudra.io'].nvlinkGroup)",
		"device.attributes.exists(d, d == 'gpu.gpudra.io')",
		"device.attributes['gpu.gpudra.io'].productName.matches('H1[0-9]0')",
		"[1,2,3].all(x, [1,2,3].all(y, [1,2,3].all(z, x*y*z > 0)))",
		"1 + ",
		"'not a bool'",
		"device.allowMultipleAllocations",
		"",
	}
	for _, e := range exprs {
		f.Add([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n"), e)
	}
	f.Fuzz(func(t *testing.T, data []byte, expr string) {
		if dir := os.Getenv("GPUDRA_FUZZ_TRACE"); dir != "" {
			// Debugging aid: the input being run, and how long each took.
			_ = os.WriteFile(filepath.Join(dir, "current"), append(append([]byte(expr), 0), data...), 0o644)
			start := time.Now()
			defer func() {
				f, err := os.OpenFile(filepath.Join(dir, "times"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				if err == nil {
					fmt.Fprintf(f, "%d %s\n", len(data)+len(expr), time.Since(start))
					_ = f.Close()
				}
			}()
		}
		code, msg := checkBytes(t, data, expr)
		if code < 0 || code > 2 {
			t.Fatalf("exit status %d", code)
		}
		if msg == "" {
			t.Fatalf("exit status %d without a message", code)
		}
	})
}
