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

package v1alpha1

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// maxConfigBytes is the API server's limit on one opaque config's
// parameters (resource.k8s.io OpaqueParametersMaxLength).
const maxConfigBytes = 10 * 1024

// invalidConfigs fill the API server's limit with problems of each kind a
// user can make many of in one config.
func invalidConfigs() map[string]string {
	fill := func(prefix, item, suffix string) string {
		var items []string
		for n := 0; ; n++ {
			next := append(items, item)
			if len(prefix+strings.Join(next, ",")+suffix) > maxConfigBytes {
				return prefix + strings.Join(items, ",") + suffix
			}
			items = next
		}
	}
	numbered := func(prefix, format, suffix string) string {
		var items []string
		for n := 0; ; n++ {
			next := append(items, fmt.Sprintf(format, n))
			if len(prefix+strings.Join(next, ",")+suffix) > maxConfigBytes {
				return prefix + strings.Join(items, ",") + suffix
			}
			items = next
		}
	}
	return map[string]string{
		// Past the strict decoder's count of 100 the total is a lower bound.
		"unknown fields, past what the decoder counts": numbered(`{`+header+`,"kind":"GpuConfig",`, `"f%d":1`, `}`),
		"unsupported capabilities":                     fill(`{`+header+`,"kind":"GpuConfig","driverCapabilities":[`, `"x"`, `]}`),
		"duplicate capabilities":                       fill(`{`+header+`,"kind":"MigConfig","driverCapabilities":[`, `"compute"`, `]}`),
		"unknown fields and values": numbered(`{`+header+`,"kind":"GpuConfig","driverCapabilities":["cuda","cuda"],`,
			`"f%d":1`, `}`),
	}
}

// TestDecodeBoundsLargeInvalidConfigs: a config at the API server's size
// limit with a problem in every entry gets a short message that still names
// the first problems and says how many there are, and gets it cheaply. (Before,
// 2,538 unsupported capabilities gave a 385 KB message that took most of a
// second to build, and twelve such claims in one pod overflowed the
// kubelet's 4 MiB gRPC limit, so the user saw ResourceExhausted instead of
// the field that was wrong.)
func TestDecodeBoundsLargeInvalidConfigs(t *testing.T) {
	const maxMessage = 4096
	for name, raw := range invalidConfigs() {
		t.Run(name, func(t *testing.T) {
			if len(raw) > maxConfigBytes || len(raw) < maxConfigBytes-64 {
				t.Fatalf("test config is %d bytes, want just under %d", len(raw), maxConfigBytes)
			}
			// Parsing the JSON alone is the yardstick. The work is counted
			// in bytes allocated, not seconds: the quadratic message
			// building this guards against allocated hundreds of MB, and a
			// byte count does not move with the machine's load as a
			// timing does.
			parse := allocated(func() {
				var v any
				if err := json.Unmarshal([]byte(raw), &v); err != nil {
					t.Fatal(err)
				}
			})
			// What the user waits for is the message, not only the error.
			var msg string
			decode := allocated(func() {
				_, err := Decode([]byte(raw))
				if err == nil {
					t.Fatal("Decode accepted an invalid config")
				}
				msg = err.Error()
			})
			if len(msg) > maxMessage {
				t.Errorf("message is %d bytes, want at most %d; it starts: %.300s", len(msg), maxMessage, msg)
			}
			wantPrefix := "first 10 of "
			if strings.HasPrefix(name, "unknown fields") {
				wantPrefix += "at least 10"
			}
			if !strings.HasPrefix(msg, wantPrefix) || !strings.Contains(msg, "parameters") {
				t.Errorf("message does not say it shows the first 10 problems of all, or names no field: %.300s", msg)
			}
			// Twelve claims of one pod, each failing like this, in one
			// NodePrepareResources response: far under the 4 MiB limit.
			if total := 12 * len(msg); total > 64*1024 {
				t.Errorf("twelve such errors make %d bytes", total)
			}
			if ratio := float64(decode) / float64(parse); ratio > 50 {
				t.Errorf("Decode and its message allocated %d bytes, %.0f times as much as parsing the JSON (%d); want under 50 times", decode, ratio, parse)
			}
		})
	}
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return max(after.TotalAlloc-before.TotalAlloc, 1)
}

// TestDecodeBoundsEchoedValues: a config whose one bad value is huge gets a
// short message that still shows how the value starts and says how long it
// is. (Before, every place that quotes a value quoted it whole: a 2 MiB
// capability gave a 2 MiB message, in the webhook's answer, the plugin's
// prepare error, the pod's events and the logs.) The API server bounds a
// config to 10 KiB, but the webhook and the checkpoint reader meet configs
// that did not come through it.
func TestDecodeBoundsEchoedValues(t *testing.T) {
	const maxMessage = 1024
	huge := strings.Repeat("x", 2<<20)
	for name, raw := range map[string]string{
		"apiVersion":            `{"apiVersion":"` + huge + `","kind":"GpuConfig"}`,
		"kind":                  `{` + header + `,"kind":"` + huge + `"}`,
		"capability":            `{` + header + `,"kind":"GpuConfig","driverCapabilities":["` + huge + `"]}`,
		"duplicate capability":  `{` + header + `,"kind":"GpuConfig","driverCapabilities":["` + huge + `","` + huge + `"]}`,
		"unknown field":         `{` + header + `,"kind":"GpuConfig","` + huge + `":1}`,
		"sharing strategy":      `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"` + huge + `"}}`,
		"time-slice interval":   `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"` + huge + `"}}}`,
		"quantity":              `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"` + huge + `"}}}`,
		"per-device limits key": `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"perDevicePinnedMemoryLimits":{"` + huge + `":"1Gi"}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(raw))
			if err == nil {
				t.Fatal("Decode accepted an invalid config")
			}
			msg := err.Error()
			if len(msg) > maxMessage {
				t.Errorf("message is %d bytes, want at most %d; it starts: %.200s", len(msg), maxMessage, msg)
			}
			if !strings.Contains(msg, "xxxxxxxx") || !strings.Contains(msg, "2097152 bytes") {
				t.Errorf("message shows neither the value's start nor its length: %.300s", msg)
			}
		})
	}
	if _, err := SharingFromFlag(huge); err == nil || len(err.Error()) > maxMessage {
		t.Errorf("SharingFromFlag of a huge value: %d bytes", len(fmt.Sprint(err)))
	}
}
