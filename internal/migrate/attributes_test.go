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

package migrate

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// notAttributes are the camelCase words of migrate's advice that are API
// fields, config fields or CEL functions, not device attributes. A new
// word of advice that is none of these and no attribute gpudra publishes
// fails TestAdviceNamesPublishedAttributes: if it is not an attribute,
// add it here.
var notAttributes = map[string]bool{
	"allocationMode": true, "apiVersion": true, "compareTo": true, "consumableCapacity": true,
	"defaultPerDevicePinnedMemoryLimit": true, "defaultPinnedDeviceMemoryLimit": true,
	"deviceClassName": true, "deviceSelector": true, "distinctAttribute": true, "domainID": true,
	"extendedResourceName": true, "firstAvailable": true, "matchAttribute": true, "mpsConfig": true,
	"numNodes": true, "perDevicePinnedMemoryLimits": true, "podGroupName": true,
	"resourceClaimTemplate": true, "resourceClaimTemplateName": true, "resourceClaims": true,
	"schedulingGroup": true, "timeSlicing": true, "timeSlicingConfig": true,
}

// published are the attribute and capacity names gpudra publishes on the
// fake nodes of every built-in profile, its channel pools included: the
// names of slicebuilder's one list that a selector can read, as they
// reach a ResourceSlice. Names in gpudra's domain are unqualified.
func published(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, profile := range nvmlfake.Profiles() {
		slices, err := fakenodes.Slices(context.Background(), profile, 1, gpu.DefaultDriverName)
		if err != nil {
			t.Fatalf("profile %s: %v", profile, err)
		}
		slices = append(slices, fakenodes.ChannelPoolSlices(gpu.DefaultDriverName, slices)...)
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				for name := range d.Attributes {
					out[strings.TrimPrefix(string(name), gpu.DefaultDriverName+"/")] = true
				}
				for name := range d.Capacity {
					out[strings.TrimPrefix(string(name), gpu.DefaultDriverName+"/")] = true
				}
			}
		}
	}
	// The standard attributes are published qualified; advice names
	// them by their own name too.
	for _, a := range []string{string(slicebuilder.AttrPCIBusID), string(slicebuilder.AttrPCIeRoot), string(slicebuilder.AttrNUMANode)} {
		if out[a] {
			out[a[strings.LastIndex(a, "/")+1:]] = true
		}
	}
	return out
}

// declaredMissing says whether migrate itself says gpudra does not
// publish the attribute (or publishes it under another name).
func declaredMissing(name string) bool {
	if _, ok := attributesWithoutEquivalent(name); ok {
		return true
	}
	_, ok := renamedAttributes[name]
	return ok
}

var (
	camelWord = regexp.MustCompile(`\b[a-z]+[A-Z][A-Za-z0-9]*\b`)
	// gpudraRef reads an attribute or capacity of gpudra's domain in CEL.
	gpudraRef = regexp.MustCompile(`device\.(?:attributes|capacity)\[\s*['"]` + regexp.QuoteMeta(gpu.DefaultDriverName) + `['"]\s*\](?:\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*['"]([A-Za-z0-9_.-]+)['"]\s*\])`)
)

// TestAdviceNamesPublishedAttributes: gpudra migrate never advises
// selecting by an attribute gpudra does not publish. Its advice is its
// string literals, its reports (testdata/out/*.notes) and the comments
// it writes ("# gpudra migrate: …"); every camelCase word there is a
// published attribute or capacity, one migrate says has no equivalent,
// or a known non-attribute (notAttributes). Every selector it writes on
// gpudra's domain (testdata/out/*.yaml) reads a published name, unless
// migrate left it as written and said it has no equivalent.
func TestAdviceNamesPublishedAttributes(t *testing.T) {
	pub := published(t)
	for _, must := range []string{"profile", "parentUUID", "productName", "cudaComputeCapability", "memory", "channel", "nvlinkDomain"} {
		if !pub[must] {
			t.Fatalf("the fake nodes publish no %s: the list of published names is incomplete (%v)", must, keys(pub))
		}
	}
	var advice []string // "where: text"
	fset := token.NewFileSet()
	sources, _ := filepath.Glob("*.go")
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					advice = append(advice, fset.Position(lit.Pos()).String()+": "+s)
				}
			}
			return true
		})
	}
	outs, _ := filepath.Glob(filepath.Join("testdata", "out", "*"))
	if len(outs) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range outs {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i, line := range lines {
			where := f + ":" + strconv.Itoa(i+1)
			if strings.HasSuffix(f, ".notes") || strings.Contains(line, "# gpudra migrate") {
				advice = append(advice, where+": "+line)
			}
			if strings.HasSuffix(f, ".yaml") && !strings.HasPrefix(strings.TrimSpace(line), "#") {
				for _, sm := range gpudraRef.FindAllStringSubmatch(line, -1) {
					name := sm[1] + sm[2]
					if !pub[name] && !declaredMissing(name) {
						t.Errorf("%s: migrate writes a selector on %s/%s, which gpudra does not publish", where, gpu.DefaultDriverName, name)
					}
				}
			}
		}
	}
	for _, a := range advice {
		// NVIDIA's own names in the input, quoted back in a report, are
		// not advice: only the words after the report's location.
		for _, w := range camelWord.FindAllString(a[strings.Index(a, ": ")+2:], -1) {
			if pub[w] || notAttributes[w] || declaredMissing(w) || strings.HasPrefix(w, "memorySlice") {
				continue
			}
			t.Errorf("%s: names %s, which gpudra does not publish (if it is not a device attribute, add it to notAttributes)", a[:strings.Index(a, ": ")], w)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
