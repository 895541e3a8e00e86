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

package simulate

import (
	"bytes"
	"strings"
	"testing"
)

// TestPrintPodEscapes: what a pod got is printed from the example's
// objects and the CDI specs; a carriage return, newline or escape
// sequence in them must not forge a line or reach the terminal.
func TestPrintPodEscapes(t *testing.T) {
	var buf bytes.Buffer
	PrintPod(&buf, &PodResult{
		Pod: "default/p\rpod default/forged",
		Containers: []Container{{
			Name:       "c\x1b[2J",
			CDIDevices: []string{"gpu.gpudra.io/gpu=gpu-0"},
			Env:        []string{"A=b\n    env    FORGED=1"},
		}},
	})
	out := buf.String()
	want := "pod default/p\\rpod default/forged\n" +
		"  container c\\x1b[2J\n" +
		"    CDI devices: gpu.gpudra.io/gpu=gpu-0\n" +
		"    env    A=b\\n    env    FORGED=1\n"
	if out != want {
		t.Errorf("PrintPod:\n%q\nwant\n%q", out, want)
	}
	if strings.ContainsAny(out, "\r\x1b") {
		t.Error("a control character reached the output raw")
	}
}
