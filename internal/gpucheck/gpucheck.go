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

// Package gpucheck is `gpudra gpu-check` (make gpu-check): a read-only
// check of a machine with NVIDIA GPUs and no cluster, which runs every
// part of gpudra that touches the GPUs and the driver, and writes down
// what it found, so that one run on a lent GPU machine tells whether the
// real hardware behaves as the fake GPUs the tests use:
//
//  1. NVML opened through the read-only wrapper (backend.Options.ReadOnly):
//     no call that would change MIG mode, compute mode, clocks, power
//     limits or any other setting can reach the driver;
//  2. discovery, as the kubelet plugin does it;
//  3. the ResourceSlices the plugin would publish, compared with the fake
//     profile of the same GPUs (gpudra inventory --compare);
//  4. a CDI spec for every GPU, built from the driver's files that
//     NVIDIA's toolkit (nvcdi) finds below the driver root, written into a
//     temporary directory, and every path it names checked on the host;
//  5. a few seconds of the health watch (XID and ECC events);
//  6. the NVLink fabric and platform info (multi-node NVLink: a lone
//     H100 shows the driver's "not in a fabric cluster": COMPLETED with a
//     zero cluster UUID);
//  7. the MIG profiles and placements NVML reports (read-only queries).
//
// Nothing is left behind but the report.
package gpucheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/inventory"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	"github.com/gpudra/gpudra/internal/version"
)

// Options are gpu-check's.
type Options struct {
	// Backend is the NVML backend to check: the real one ("nvml"), or
	// fake GPUs to try the check itself. ReadOnly is forced on.
	Backend backend.Options
	// DriverName is the DRA driver name the slices are built for.
	DriverName string
	// Compare is the fake profile to compare with; empty picks the one
	// whose GPUs match (by model and count), else compares each GPU with
	// the fake catalog's GPU of its model (matchProfile).
	Compare string
	// Health is how long the health watch runs (default 5s).
	Health time.Duration
}

// Result of a step.
const (
	Pass = "pass"
	Fail = "fail"
	Info = "info" // nothing to pass or fail: facts for the report
)

// Step is one part of the check.
type Step struct {
	Name    string   `json:"name"`
	Result  string   `json:"result"`
	Summary string   `json:"summary"`
	Details []string `json:"details,omitempty"`
	Seconds float64  `json:"seconds"`
}

// Report is everything the check found.
type Report struct {
	Gpudra        version.Info `json:"gpudra"`
	Host          string       `json:"host"`
	Started       time.Time    `json:"started"`
	Seconds       float64      `json:"seconds"`
	Backend       string       `json:"backend"`
	DriverRoot    string       `json:"driverRoot"`
	DriverVersion string       `json:"driverVersion,omitempty"`
	CUDAVersion   string       `json:"cudaDriverVersion,omitempty"`
	GPUs          []gpu.GPU    `json:"gpus,omitempty"`
	// Profile is the fake profile compared with: a built-in profile's
	// name, or "per model: <catalog models>".
	Profile string `json:"profile,omitempty"`
	Steps   []Step `json:"steps"`
	// Refused are the NVML calls that would have changed a GPU; the
	// check fails if there is any.
	Refused []string `json:"refused,omitempty"`
	Passed  bool     `json:"passed"`
}

// ErrNoGPU is returned when NVML cannot be opened at all: there is
// nothing to check.
type ErrNoGPU struct{ Err error }

func (e ErrNoGPU) Error() string { return e.Err.Error() }
func (e ErrNoGPU) Unwrap() error { return e.Err }

// Run runs the check.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Health <= 0 {
		o.Health = 5 * time.Second
	}
	if o.DriverName == "" {
		o.DriverName = gpu.DefaultDriverName
	}
	host, _ := os.Hostname()
	rep := &Report{Gpudra: version.Get(), Host: host, Started: time.Now().UTC().Truncate(time.Second), Backend: o.Backend.Kind, DriverRoot: o.Backend.DriverRoot}
	if o.Backend.NodeName == "" {
		o.Backend.NodeName = host
	}
	scratch, err := os.MkdirTemp("", "gpudra-gpu-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	if o.Backend.Kind == "fake" && o.Backend.FakeStateDir == "" {
		o.Backend.FakeStateDir = filepath.Join(scratch, "fake")
	}
	o.Backend.ReadOnly, o.Backend.InventoryOnly = true, false

	var be *backend.Backend
	if err := rep.step("open NVML read-only and find the driver's files (nvcdi)", func(s *Step) error {
		var err error
		if be, err = backend.Open(ctx, o.Backend); err != nil {
			return err
		}
		s.Summary = "opened " + o.Backend.Kind + ", driver root " + o.Backend.DriverRoot
		return nil
	}); err != nil {
		rep.finish()
		return rep, ErrNoGPU{err}
	}
	defer be.Close()

	var node gpu.Node
	if rep.step("discover the GPUs as the kubelet plugin does", func(s *Step) error {
		var err error
		node, err = discover(ctx, be, o.Backend.NodeName, rep, s)
		return err
	}) != nil {
		rep.Refused = be.Refused()
		rep.finish()
		return rep, nil
	}

	_ = rep.step("compare the ResourceSlices with the fake profile of these GPUs", func(s *Step) error {
		return compare(ctx, be, node, o, scratch, rep, s)
	})
	_ = rep.step("write a CDI spec for every GPU and check every path it names", func(s *Step) error {
		return checkCDI(be, node, o.DriverName, filepath.Join(scratch, "cdi"), s)
	})
	_ = rep.step(fmt.Sprintf("watch health events for %s", o.Health), func(s *Step) error {
		return watchHealth(ctx, be, node, o.Health, s)
	})
	_ = rep.step("NVLink fabric and platform (read-only NVML queries)", func(s *Step) error {
		s.Result = Info
		s.Summary = node.NVLinkDomain().Describe()
		for _, g := range node.GPUs {
			s.Details = append(s.Details, fabricLine(g))
		}
		return nil
	})
	_ = rep.step("MIG profiles and placements (read-only NVML queries)", func(s *Step) error {
		describeMIG(node, s)
		return nil
	})
	_ = rep.step("no NVML call that changes a GPU was made", func(s *Step) error {
		rep.Refused = be.Refused()
		if len(rep.Refused) > 0 {
			s.Details = rep.Refused
			return fmt.Errorf("%d mutating NVML call(s) were refused: a bug in gpudra's read-only paths", len(rep.Refused))
		}
		s.Summary = "none refused"
		return nil
	})
	rep.finish()
	return rep, nil
}

// step runs one check and adds it to the report: passed unless fn fails
// (its error is the summary), with the time it took.
func (r *Report) step(name string, fn func(s *Step) error) error {
	start := time.Now()
	s := Step{Name: name, Result: Pass}
	err := fn(&s)
	if err != nil {
		s.Result, s.Summary = Fail, err.Error()
	}
	s.Seconds = time.Since(start).Round(time.Millisecond).Seconds()
	r.Steps = append(r.Steps, s)
	return err
}

// discover finds the GPUs as the kubelet plugin does, names the node, and
// records the GPUs and driver in the report and one line per GPU in the
// step.
func discover(ctx context.Context, be *backend.Backend, nodeName string, rep *Report, s *Step) (gpu.Node, error) {
	node, err := be.Discover(ctx)
	if err != nil {
		return node, err
	}
	node.Name = nodeName
	rep.GPUs, rep.DriverVersion, rep.CUDAVersion = node.GPUs, node.DriverVersion, node.CUDADriverVersion
	s.Summary = fmt.Sprintf("%d GPU(s), driver %s, CUDA %s", len(node.GPUs), node.DriverVersion, node.CUDADriverVersion)
	for _, g := range node.GPUs {
		s.Details = append(s.Details, fmt.Sprintf("%s %s %s, %d MiB, %d SMs, compute capability %s, MIG capable %v (enabled %v), NVLink group %d, PCI %s",
			g.DeviceName(), g.UUID, g.ProductName, g.MemoryBytes>>20, g.Multiprocessors, g.CUDAComputeCapability, g.MigCapable, g.MigEnabled, g.NVLinkGroup, g.PCIBusID))
	}
	if len(node.GPUs) == 0 {
		return node, fmt.Errorf("NVML reports no GPU")
	}
	return node, nil
}

// describeMIG lists, for information, each MIG-capable GPU's profiles with
// their placements, and the GPU instances that exist already.
func describeMIG(node gpu.Node, s *Step) {
	s.Result = Info
	n := 0
	for _, g := range node.GPUs {
		if g.MIG == nil {
			continue
		}
		n++
		for _, p := range g.MIG.Profiles {
			var pl []string
			for _, x := range p.Placements {
				pl = append(pl, fmt.Sprintf("%d+%d", x.Start, x.Size))
			}
			s.Details = append(s.Details, fmt.Sprintf("%s %s: profile ID %d, %d compute slice(s), %d MiB, %d SMs, at most %d, placements %s",
				g.DeviceName(), p.Name, p.ID, p.ComputeSlices, p.MemoryBytes>>20, p.Multiprocessors, p.InstanceCount, strings.Join(pl, " ")))
		}
		for _, in := range g.MIG.Instances {
			s.Details = append(s.Details, fmt.Sprintf("%s: existing GPU instance %d (profile ID %d) at %d+%d, compute instances %v",
				g.DeviceName(), in.GIID, in.ProfileID, in.Placement.Start, in.Placement.Size, in.ComputeInstances))
		}
	}
	s.Summary = fmt.Sprintf("%d MIG-capable GPU(s)", n)
}

// fabricLine is one GPU's fabric and platform reading, as NVML gave it.
func fabricLine(g gpu.GPU) string {
	f, p := g.Fabric, g.Platform
	line := fmt.Sprintf("%s: fabric %s", g.DeviceName(), f.State)
	if f.State != gpu.FabricNotSupported {
		line += fmt.Sprintf(", status %s, cluster UUID %s, clique %d, health %s", f.Status, f.ClusterUUID, f.CliqueID, firstNonEmpty(string(f.Health), "not reported"))
	}
	if p.Known {
		line += fmt.Sprintf("; platform: chassis %q, slot %d, tray %d, host %d", p.ChassisSerial, p.SlotNumber, p.TrayIndex, p.HostID)
	} else {
		line += "; platform: not reported"
	}
	if p.ModuleIDKnown {
		line += fmt.Sprintf(", module ID %d", p.ModuleID)
	}
	return line
}

func (r *Report) finish() {
	r.Seconds = time.Since(r.Started).Round(time.Millisecond).Seconds()
	r.Passed = true
	for _, s := range r.Steps {
		r.Passed = r.Passed && s.Result != Fail
	}
}

// compare builds the slices the plugin would publish and diffs them with
// the fake profile's.
func compare(ctx context.Context, be *backend.Backend, node gpu.Node, o Options, scratch string, rep *Report, s *Step) error {
	res, err := slicebuilder.Build(node, slicebuilder.Options{DriverName: o.DriverName, SysfsRoot: be.SysfsRoot()})
	if err != nil {
		return err
	}
	got := fakenodes.PoolSlices(o.DriverName, node.Name, res)
	profile, name, why := o.Compare, o.Compare, "as asked (--compare)"
	if profile == "" {
		if profile, name, why, err = matchProfile(ctx, node, scratch); err != nil {
			return err
		}
	}
	if profile == "" {
		s.Result, s.Summary = Info, why
		return nil
	}
	rep.Profile = name
	want, err := fakenodes.Node(ctx, profile, node.Name, o.DriverName, filepath.Join(scratch, "compare"), fakenodes.Pool{})
	if err != nil {
		return fmt.Errorf("fake profile %s: %w", profile, err)
	}
	diffs := inventory.Diff(got, want)
	s.Details = diffs
	devices := 0
	for _, sl := range got {
		devices += len(sl.Spec.Devices)
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%d difference(s) from fake profile %s (%s): correct the profile (docs/fake-gpus.md) where the hardware is right", len(diffs), name, why)
	}
	s.Summary = fmt.Sprintf("%d slice(s), %d device(s), no differences from fake profile %s (%s)", len(got), devices, name, why)
	return nil
}

// matchProfile picks what the GPUs here are compared with: the built-in
// fake profile with the same GPU models in the same number (a DGX is
// compared with its own profile, NVLink islands and PCIe tree included),
// else a profile of the fake catalog's model of each GPU here, one per
// GPU, so that a machine with any number of GPUs (one H200, four L4s) is
// compared model by model. It returns the profile (a built-in name or a
// file written into scratch), the name the report gives it and why it was
// chosen; an empty profile when the catalog lacks a model.
func matchProfile(ctx context.Context, node gpu.Node, scratch string) (profile, name, why string, err error) {
	models := func(n gpu.Node) string {
		var m []string
		for _, g := range n.GPUs {
			m = append(m, g.ProductName)
		}
		sort.Strings(m)
		return strings.Join(m, ", ")
	}
	here := models(node)
	for _, p := range nvmlfake.Profiles() {
		var fake gpu.Node
		err := fakenodes.WithNode(ctx, p, "match", filepath.Join(scratch, "match"), func(n gpu.Node, _ string) error {
			fake = n
			return nil
		})
		if err != nil {
			return "", "", "", fmt.Errorf("fake profile %s: %w", p, err)
		}
		if models(fake) == here {
			return p, p, fmt.Sprintf("its %d GPU(s) are the same models", len(node.GPUs)), nil
		}
	}
	pf, keys, missing := perModel(node)
	if len(missing) > 0 {
		return "", "", fmt.Sprintf("no fake profile or catalog model has these GPUs (%s): compare with --compare <profile> or a profile file", strings.Join(missing, ", ")), nil
	}
	data, err := yaml.Marshal(pf)
	if err != nil {
		return "", "", "", fmt.Errorf("per-model profile: %w", err)
	}
	path := filepath.Join(scratch, "per-model.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", "", "", fmt.Errorf("per-model profile: %w", err)
	}
	return path, "per model: " + strings.Join(keys, ", "),
		fmt.Sprintf("no built-in profile has these %d GPU(s) (%s): each is compared with the fake catalog's GPU of its model", len(node.GPUs), here), nil
}

// perModel is the fake profile of the catalog's model of each GPU, in
// index order, with the driver versions, MIG modes and NVLink islands
// seen here: they are the machine's, not the model's, so only what the
// catalog says about the model is compared. It also returns the models
// by catalog key and the product names the catalog lacks.
func perModel(node gpu.Node) (nvmlfake.ProfileFile, []string, []string) {
	pf := nvmlfake.ProfileFile{DriverVersion: node.DriverVersion, CUDADriverVersion: node.CUDADriverVersion}
	islands := map[int]int{}
	for _, g := range node.GPUs {
		islands[g.NVLinkGroup]++
	}
	var keys, missing []string
	for _, g := range node.GPUs {
		key, ok := nvmlfake.ModelOf(g.ProductName)
		if !ok {
			if !slices.Contains(missing, g.ProductName) {
				missing = append(missing, g.ProductName)
			}
			continue
		}
		keys = append(keys, key)
		spec := nvmlfake.GPUSpec{Model: key, MigEnabled: g.MigEnabled}
		// A GPU alone in its NVLink group has no NVLink peers.
		if islands[g.NVLinkGroup] > 1 {
			island := g.NVLinkGroup
			spec.NVLinkIsland = &island
		}
		pf.GPUs = append(pf.GPUs, spec)
	}
	return pf, keys, missing
}

// watchHealth runs the plugin's health watch over the node's GPUs for d.
func watchHealth(ctx context.Context, be *backend.Backend, node gpu.Node, d time.Duration, s *Step) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	events := make(chan gpu.HealthEvent, 64)
	done := make(chan error, 1)
	go func() { done <- be.WatchHealth(ctx, node, backend.HealthOptions{}, events) }()
	var seen []string
	for {
		select {
		case ev := <-events:
			seen = append(seen, fmt.Sprintf("%s %s: %s", ev.UUID, ev.Health, ev.Reason))
		case err := <-done:
			s.Details = seen
			if err != nil {
				return fmt.Errorf("the health watch failed: %w", err)
			}
			s.Summary = fmt.Sprintf("the watch ran %s; %d event(s)", d, len(seen))
			return nil
		}
	}
}
