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
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/textsafe"
)

// Example is one example file: its claims, templates and pods.
type Example struct {
	File      string
	Templates []*resourceapi.ResourceClaimTemplate
	Claims    []*resourceapi.ResourceClaim
	Pods      []*v1.Pod
}

// LoadDeviceClasses reads every *.yaml at the top of fsys as DeviceClasses.
func LoadDeviceClasses(fsys fs.FS) ([]*resourceapi.DeviceClass, error) {
	files, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*resourceapi.DeviceClass
	for _, f := range files {
		m, err := decodeFile(fsys, f)
		if err != nil {
			return nil, err
		}
		if len(m.Templates)+len(m.Claims)+len(m.Pods)+len(m.Slices)+len(m.TaintRules) > 0 {
			return nil, fmt.Errorf("%s: expected only DeviceClasses", f)
		}
		for _, o := range m.Classes {
			out = append(out, o.Obj.(*resourceapi.DeviceClass))
		}
	}
	return out, nil
}

// LoadExamples reads every examples/*.yaml of fsys.
func LoadExamples(fsys fs.FS) ([]Example, error) {
	files, err := fs.Glob(fsys, "examples/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Example
	for _, f := range files {
		m, err := decodeFile(fsys, f)
		if err != nil {
			return nil, err
		}
		if len(m.Classes)+len(m.Slices)+len(m.TaintRules) > 0 {
			return nil, fmt.Errorf("%s: an example holds claims, templates and pods only", f)
		}
		ex := Example{File: path.Base(f)}
		for _, o := range m.Templates {
			ex.Templates = append(ex.Templates, o.Obj.(*resourceapi.ResourceClaimTemplate))
		}
		for _, o := range m.Claims {
			ex.Claims = append(ex.Claims, o.Obj.(*resourceapi.ResourceClaim))
		}
		for _, o := range m.Pods {
			ex.Pods = append(ex.Pods, o.Obj.(*v1.Pod))
		}
		out = append(out, ex)
	}
	return out, nil
}

// decodeFile decodes one manifest file with the offline scheduler core's
// decoder, as gpudra check does; anything the API server would reject is
// an error here.
func decodeFile(fsys fs.FS, f string) (*scheduler.Manifests, error) {
	data, err := fs.ReadFile(fsys, f)
	if err != nil {
		return nil, err
	}
	m := &scheduler.Manifests{}
	if err := m.Add(f, data); err != nil {
		return nil, err
	}
	for _, p := range m.Problems {
		if !p.Note {
			return nil, fmt.Errorf("%s", p)
		}
	}
	return m, nil
}

// RunExample creates the example's templates and claims, runs its pods,
// then stops them and deletes its claims, so that examples do not compete
// for GPUs.
func (c *Cluster) RunExample(ctx context.Context, ex Example) ([]*PodResult, error) {
	for _, t := range ex.Templates {
		if _, err := c.Client.ResourceV1().ResourceClaimTemplates(t.Namespace).Create(ctx, t.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("%s: %w", ex.File, err)
		}
	}
	for _, claim := range ex.Claims {
		if _, err := c.CreateClaim(ctx, claim.DeepCopy()); err != nil {
			return nil, fmt.Errorf("%s: %w", ex.File, err)
		}
	}
	var results []*PodResult
	var runErr error
	for _, pod := range ex.Pods {
		res, err := c.RunPod(ctx, pod)
		results = append(results, res)
		if err != nil {
			runErr = fmt.Errorf("%s: %w", ex.File, err)
			break
		}
	}
	// Tear down: unprepare and delete every claim the example made.
	claims, err := c.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return results, err
	}
	for i := range claims.Items {
		claim := &claims.Items[i]
		if _, err := c.NodeUnprepareResources(ctx, claim); err != nil {
			return results, err
		}
		if err := c.Client.ResourceV1().ResourceClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
			return results, err
		}
	}
	for _, t := range ex.Templates {
		_ = c.Client.ResourceV1().ResourceClaimTemplates(t.Namespace).Delete(ctx, t.Name, metav1.DeleteOptions{})
	}
	return results, runErr
}

// PrintPod writes a human-readable account of what a pod got. Names and
// values come from the example's objects and the CDI specs: each is
// printed on one line, with what is not printable escaped.
func PrintPod(w io.Writer, res *PodResult) {
	p := func(format string, args ...any) {
		for i, a := range args {
			if s, ok := a.(string); ok {
				args[i] = textsafe.Line(s)
			}
		}
		fmt.Fprintf(w, format, args...)
	}
	p("pod %s\n", res.Pod)
	for _, pc := range res.Claims {
		var devs []string
		for _, d := range pc.Devices {
			devs = append(devs, fmt.Sprintf("%s (request %s)", d.DeviceName, strings.Join(d.RequestNames, ",")))
		}
		p("  claim %s -> ResourceClaim %s: %s\n", pc.Name, pc.Claim.Name, strings.Join(devs, ", "))
	}
	for _, ct := range res.Containers {
		p("  container %s\n", ct.Name)
		p("    CDI devices: %s\n", strings.Join(ct.CDIDevices, " "))
		for _, e := range ct.Env {
			p("    env    %s\n", e)
		}
		for _, d := range ct.DeviceNodes {
			p("    device %s\n", d)
		}
		for _, m := range mountsByDir(ct.Mounts) {
			p("    mount  %s\n", m)
		}
		for _, h := range ct.Hooks {
			p("    hook   %s\n", h)
		}
	}
}

// mountsByDir writes the mounts compactly: one line per target directory,
// with the files' count and the first few names (the driver's libraries
// are a dozen files in one directory).
func mountsByDir(mounts []string) []string {
	type dir struct {
		source, target string
		files          []string
	}
	var order []string
	dirs := map[string]*dir{}
	for _, m := range mounts {
		src, dst, _ := strings.Cut(m, " -> ")
		key := path.Dir(src) + " -> " + path.Dir(dst)
		d, ok := dirs[key]
		if !ok {
			d = &dir{source: path.Dir(src), target: path.Dir(dst)}
			dirs[key] = d
			order = append(order, key)
		}
		d.files = append(d.files, path.Base(dst))
	}
	var out []string
	for _, key := range order {
		d := dirs[key]
		if len(d.files) == 1 {
			out = append(out, fmt.Sprintf("%s/%s (from %s)", d.target, d.files[0], d.source))
			continue
		}
		names := d.files
		more := ""
		if len(names) > 3 {
			names, more = names[:3], ", …"
		}
		out = append(out, fmt.Sprintf("%s/{%s%s} (%d files from %s)", d.target, strings.Join(names, ", "), more, len(d.files), d.source))
	}
	return out
}
