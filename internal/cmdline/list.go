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

package cmdline

import "strings"

// SplitList splits a comma-separated list, trimming blanks around each item
// and dropping empty ones: "a, b,,c" is [a b c] and "" is nil.
func SplitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// ListVar defines a flag that holds a comma-separated list (SplitList).
// Given more than once, the flag's lists add up; the first replaces the
// default.
func (c *Command) ListVar(p *[]string, name string, def []string, usage string) {
	*p = def
	c.Flags.Var(&listValue{p: p}, name, usage)
}

type listValue struct {
	p   *[]string
	set bool
}

func (v *listValue) Set(s string) error {
	if !v.set {
		*v.p = nil
	}
	*v.p = append(*v.p, SplitList(s)...)
	v.set = true
	return nil
}

func (v *listValue) String() string { return strings.Join(*v.p, ",") }

func (v *listValue) Type() string { return "strings" }
