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

import (
	"fmt"
	"io"
	"sort"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
)

// The sections every daemon's --help ends with, after its own.
const (
	featureGateSection = "feature gate"
	logsSection        = "logs"
	globalSection      = "global"
	// miscSection holds a flag that no Section call named; a test of each
	// binary keeps it empty.
	miscSection = "misc"
)

// Section puts flags (by name) into the named section of --help, in the
// order of the first call that names the section. Each flag goes into one
// section; naming an undefined flag or one already placed is a programming
// error.
func (c *Command) Section(name string, flags ...string) {
	if _, ok := c.sectionFlags[name]; !ok {
		c.sectionOrder = append(c.sectionOrder, name)
	}
	for _, f := range flags {
		if c.Flags.Lookup(f) == nil {
			panic(fmt.Sprintf("cmdline: section %q names --%s, which is not defined", name, f))
		}
		if prev, ok := c.sectionOf[f]; ok {
			panic(fmt.Sprintf("cmdline: --%s is in section %q and %q", f, prev, name))
		}
		c.sectionOf[f] = name
	}
	c.sectionFlags[name] = append(c.sectionFlags[name], flags...)
}

// Unsectioned are the binary's own flags that no Section call placed:
// --help shows them under "Misc flags".
func (c *Command) Unsectioned() []string {
	var out []string
	c.Flags.VisitAll(func(f *pflag.Flag) {
		if _, ok := c.sectionOf[f.Name]; !ok && c.builtinSection(f.Name) == "" {
			out = append(out, f.Name)
		}
	})
	sort.Strings(out)
	return out
}

// builtinSection is the section of a flag every daemon has: the logging
// flags, --feature-gates, --version.
func (c *Command) builtinSection(flag string) string {
	switch {
	case c.logFlags[flag]:
		return logsSection
	case flag == "feature-gates":
		return featureGateSection
	case flag == "version":
		return globalSection
	}
	return ""
}

// sections groups every flag as --help prints them, as Kubernetes
// components do (k8s.io/component-base/cli/flag): the binary's sections in
// order, then misc, feature gate, logs and global (with -h, --help).
func (c *Command) sections() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	for _, s := range c.sectionOrder {
		for _, name := range c.sectionFlags[s] {
			fss.FlagSet(s).AddFlag(c.Flags.Lookup(name))
		}
	}
	for _, s := range []string{miscSection, featureGateSection, logsSection} {
		c.Flags.VisitAll(func(f *pflag.Flag) {
			_, placed := c.sectionOf[f.Name]
			if b := c.builtinSection(f.Name); (s == miscSection && !placed && b == "") || (!placed && b == s) {
				fss.FlagSet(s).AddFlag(f)
			}
		})
	}
	global := fss.FlagSet(globalSection)
	global.BoolP("help", "h", false, "Print this help and exit.")
	if f := c.Flags.Lookup("version"); f != nil {
		global.AddFlag(f)
	}
	return fss
}

// usage prints --help: the description, the usage line and the flags by
// section, unwrapped (a terminal wraps them; docs and tests read them
// whole).
func (c *Command) usage(w io.Writer) {
	if c.Description != "" {
		fmt.Fprintf(w, "%s\n\n", c.Description)
	}
	fmt.Fprintf(w, "Usage:\n  %s [flags]\n", c.Name)
	cliflag.PrintSections(w, c.sections(), 0)
}
