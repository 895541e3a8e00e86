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

package clusterstatus

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpudra/gpudra/internal/textsafe"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// WriteText prints the report as a table, one row per GPU and one per
// claim holding it or a partition of it, then what each node has free.
// wide adds device UUIDs, PCI bus IDs, memory, sharing, taints and
// whether the plugin reported the device prepared. Everything taken from
// cluster objects is printed with what is not printable escaped, so that
// no value can forge a row or a column.
func (r *Report) WriteText(w io.Writer, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"NODE", "GPU", "MODEL", "HEALTH", "STATE", "DEVICE", "CLAIM", "PODS"}
	if wide {
		head = append(head, "UUID", "PCI", "MEMORY", "SHARING", "PREPARED", "TAINTS")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, n := range r.Nodes {
		for i := range n.GPUs {
			writeGPURows(tw, n.Name, &n.GPUs[i], wide)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	r.writeFree(w)
	r.writeDomains(w)
	for _, note := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", textsafe.Line(note))
	}
	return nil
}

// writeGPURows writes one GPU's rows: one per claim holding it, a
// partition of it or its monitoring device, or a single row when nothing
// holds it.
func writeGPURows(tw io.Writer, node string, g *GPU, wide bool) {
	health := "ok"
	if !g.Healthy {
		health = "unhealthy"
	}
	gpuCols := []string{node, g.Device, dash(g.Model), health, g.State}
	row := func(device string, h *Holder, uuid, memory string) {
		cols := append(append([]string(nil), gpuCols...), device)
		cols = append(cols, holderCols(g, h, uuid, memory, wide)...)
		fmt.Fprintln(tw, strings.Join(safeCells(cols), "\t"))
	}
	memory := ""
	if g.Memory != nil {
		memory = g.Memory.String()
	}
	if g.FreeMemory != nil && len(g.Holders) > 0 {
		memory = g.FreeMemory.String() + " free of " + memory
	}
	if len(g.Holders)+len(g.Partitions)+len(g.Monitors) == 0 {
		row("-", nil, g.UUID, memory)
	}
	for i := range g.Holders {
		row(g.Device, &g.Holders[i], g.UUID, memory)
	}
	for i := range g.Partitions {
		p := &g.Partitions[i]
		row(p.Device, &p.Holder, "", "")
	}
	for i := range g.Monitors {
		row(g.Device+" (monitor)", &g.Monitors[i], g.UUID, "")
	}
}

// holderCols are a row's columns after DEVICE: the claim holding it (h,
// nil for none) and its pods and, wide, the device's UUID (the plugin's
// status says it best), PCI bus ID, memory, sharing, whether the plugin
// prepared it, and the GPU's taints.
func holderCols(g *GPU, h *Holder, uuid, memory string, wide bool) []string {
	claim, pods, sharing, prepared := "-", "-", "-", "-"
	if h != nil {
		claim = h.Name()
		if len(h.Pods) > 0 && !h.Hidden {
			pods = strings.Join(h.Pods, ",")
		}
		prepared = "no"
		if h.Prepared {
			prepared = "yes"
		}
		if h.Status != nil {
			uuid = h.Status.UUID
			if sh := h.Status.Sharing; sh != nil {
				sharing = sharingText(sh)
			}
		}
		if h.Memory != nil {
			memory = h.Memory.String()
		}
	}
	cols := []string{claim, pods}
	if wide {
		cols = append(cols, dash(uuid), dash(g.PCIBusID), dash(memory), sharing, prepared, dash(strings.Join(g.Taints, ",")))
	}
	return cols
}

// sharingText is the SHARING column: the strategy and what the plugin
// set for it.
func sharingText(sh *configapi.SharingStatus) string {
	sharing := string(sh.Strategy)
	if sh.TimeSliceInterval != "" {
		sharing += " " + string(sh.TimeSliceInterval)
	}
	if sh.ActiveThreadPercentage != nil {
		sharing += fmt.Sprintf(" %d%%", *sh.ActiveThreadPercentage)
	}
	if sh.PinnedDeviceMemoryLimit != nil {
		sharing += " " + sh.PinnedDeviceMemoryLimit.String()
	}
	return sharing
}

// writeFree writes what each node has free, with its NVLink domain, or
// that the driver published nothing.
func (r *Report) writeFree(w io.Writer) {
	if len(r.Nodes) == 0 {
		fmt.Fprintf(w, "no ResourceSlices of driver %s\n", textsafe.Line(r.Driver))
		return
	}
	fmt.Fprintln(w, "\nFREE")
	for _, n := range r.Nodes {
		domain := ""
		if n.NVLinkDomain != "" {
			domain = " (NVLink domain " + n.NVLinkDomain
			if n.IMEXDaemon != "" {
				domain += ", IMEX daemon " + n.IMEXDaemon
			}
			domain += ")"
		}
		fmt.Fprintf(w, "%s: %s%s\n", textsafe.Line(n.Name), textsafe.Line(n.Free.Summary()), textsafe.Line(domain))
	}
}

// writeDomains writes each NVLink domain: its nodes, where the IMEX
// daemon is not ready, and the channels claims hold.
func (r *Report) writeDomains(w io.Writer) {
	if len(r.Domains) == 0 {
		return
	}
	fmt.Fprintln(w, "\nNVLINK DOMAINS")
	for _, d := range r.Domains {
		fmt.Fprintf(w, "%s: %d node(s) %s; %d channels, %d held\n", textsafe.Line(d.Name), len(d.Nodes),
			textsafe.Line(strings.Join(d.Nodes, ",")), d.Channels, len(d.Held))
		if len(d.IMEXNotReady) > 0 {
			fmt.Fprintf(w, "  IMEX daemon not ready on %s: no new pod holding a channel lands there\n", textsafe.Line(strings.Join(d.IMEXNotReady, ",")))
		}
		for _, h := range d.Held {
			who := "(another namespace)"
			if !h.Hidden {
				who = h.Namespace + "/" + h.Claim
				if len(h.Pods) > 0 {
					who += " pods " + strings.Join(h.Pods, ",")
				}
			}
			fmt.Fprintf(w, "  %s  %s\n", textsafe.Line(h.Channel), textsafe.Line(who))
		}
	}
}

// safeCells escapes each cell of a row in place: a cell is one line, and
// a tab in it would start another column.
func safeCells(cols []string) []string {
	for i, c := range cols {
		cols[i] = textsafe.Line(c)
	}
	return cols
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
