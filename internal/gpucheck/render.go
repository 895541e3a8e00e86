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

package gpucheck

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints one line per step.
func (r *Report) WriteText(w io.Writer) error {
	for _, s := range r.Steps {
		if _, err := fmt.Fprintf(w, "%-4s  %s: %s\n", strings.ToUpper(s.Result), s.Name, s.Summary); err != nil {
			return err
		}
	}
	verdict := "passed"
	if !r.Passed {
		verdict = "FAILED"
	}
	_, err := fmt.Fprintf(w, "gpu-check %s in %.1fs (%d GPU(s), gpudra %s)\n", verdict, r.Seconds, len(r.GPUs), r.Gpudra)
	return err
}

// WriteMarkdown writes the report file: what ran, on what, what each
// step found.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	verdict := "passed"
	if !r.Passed {
		verdict = "failed"
	}
	fmt.Fprintf(&b, "# gpudra gpu-check on %s: %s\n\n", r.Host, verdict)
	fmt.Fprintf(&b, "| | |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| started | %s (%.1f s) |\n", r.Started.Format("2006-01-02 15:04:05 MST"), r.Seconds)
	fmt.Fprintf(&b, "| gpudra | %s |\n", r.Gpudra)
	fmt.Fprintf(&b, "| backend | %s, driver root `%s` |\n", r.Backend, r.DriverRoot)
	fmt.Fprintf(&b, "| driver | %s (CUDA %s) |\n", dash(r.DriverVersion), dash(r.CUDAVersion))
	fmt.Fprintf(&b, "| GPUs | %d |\n", len(r.GPUs))
	fmt.Fprintf(&b, "| fake profile compared | %s |\n\n", dash(r.Profile))
	fmt.Fprintf(&b, "Read-only: NVML was opened through gpudra's read-only wrapper; calls that would change a GPU refused: %d.\n\n", len(r.Refused))
	b.WriteString("| step | result | summary | seconds |\n| --- | --- | --- | --- |\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f |\n", s.Name, s.Result, strings.ReplaceAll(s.Summary, "|", `\|`), s.Seconds)
	}
	for _, s := range r.Steps {
		if len(s.Details) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n", s.Name)
		for _, d := range s.Details {
			fmt.Fprintf(&b, "- %s\n", d)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
