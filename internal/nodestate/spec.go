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

package nodestate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/cdispec"
	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/claimplan"
	"github.com/gpudra/gpudra/internal/gpu"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// A claim's CDI spec is written from its checkpoint record alone, so that
// a spec rewritten after a reboot (/var/run/cdi is a tmpfs) is identical
// to the one first written.

// visibleDevicesPrefix starts the NVIDIA_VISIBLE_DEVICES entry that
// gpudra once put in each device's environment (records written before
// visibility moved to device nodes still hold it).
const visibleDevicesPrefix = "NVIDIA_VISIBLE_DEVICES="

// capabilitiesPrefix starts a device's NVIDIA_DRIVER_CAPABILITIES entry.
var capabilitiesPrefix = configapi.DriverCapabilitiesEnvVar + "="

// driverCapabilities is the union of the driver capabilities the claim's
// devices were configured with: the claim's CDI spec gives every container
// that uses any of them the driver files of all (a container can use
// several requests; it gets at least what each asked for).
func driverCapabilities(c checkpoint.Claim) []string {
	var out []string
	for _, d := range c.Devices {
		for _, e := range d.Env {
			if list, ok := strings.CutPrefix(e, capabilitiesPrefix); ok {
				for _, cap := range strings.Split(list, ",") {
					if cap != "" && !slices.Contains(out, cap) {
						out = append(out, cap)
					}
				}
			}
		}
	}
	return out
}

// configEnv is the environment a config asks for.
func configEnv(cfg configapi.Config) []string {
	if c, ok := cfg.(interface{ DriverCapabilitiesEnv() string }); ok {
		return []string{c.DriverCapabilitiesEnv()}
	}
	return nil
}

// writeSpec writes the claim's CDI spec from its checkpoint record, so a
// spec rewritten after a reboot is identical to the one first written.
func (s *State) writeSpec(c checkpoint.Claim) error {
	devices := make([]cdispec.Device, 0, len(c.Devices))
	for _, d := range c.Devices {
		if ch := d.Channel; ch != nil {
			edits, err := s.channelEdits(gpu.IMEXChannel{Domain: ch.Domain, Number: ch.Number})
			if err != nil {
				return fmt.Errorf("write CDI spec: device %s: %w", d.Device, err)
			}
			devices = append(devices, cdispec.Device{Name: d.Device, Edits: edits})
			continue
		}
		g, ok := s.opts.Node.GPUByUUID(d.GPUUUID)
		if !ok {
			return fmt.Errorf("write CDI spec: device %s: GPU %s is no longer present on this node", d.Device, d.GPUUUID)
		}
		// Append copies: the backend may hand out edits it keeps, and
		// appending the claim's env in place would write into them while
		// another claim (admin access) reads them.
		base := s.opts.Hardware.DeviceEdits(g)
		if m := d.Mig; m != nil {
			if m.Step != checkpoint.MigCreated || m.GPUInstanceID == nil || m.ComputeInstanceID == nil {
				return fmt.Errorf("write CDI spec: device %s: its MIG device was not created", d.Device)
			}
			var err error
			if base, err = s.opts.Hardware.MigDeviceEdits(g, *m.GPUInstanceID, *m.ComputeInstanceID, m.UUID); err != nil {
				return fmt.Errorf("write CDI spec: device %s: %w", d.Device, err)
			}
		}
		// A container sees the GPUs whose device nodes it gets, from every
		// request and claim it uses; NVIDIA_VISIBLE_DEVICES (one value,
		// which the last device applied would set) is no longer per device.
		env := slices.DeleteFunc(slices.Clone(d.Env), func(e string) bool { return strings.HasPrefix(e, visibleDevicesPrefix) })
		sharing, err := s.sharingEdits(d)
		if err != nil {
			return fmt.Errorf("write CDI spec: device %s: %w", d.Device, err)
		}
		edits := base.Append(gpu.Edits{Env: env}).Append(sharing)
		devices = append(devices, cdispec.Device{Name: d.Device, Edits: edits})
	}
	// The Writer's errors already say "write CDI spec for claim <uid>".
	return s.opts.CDI.WriteClaimSpec(c.UID, s.opts.Hardware.CommonEdits(driverCapabilities(c)), devices)
}

// ensurePrepared recreates a prepared claim's MIG devices if they are gone,
// makes sure its sharing is in place (MPS daemons answer, time slices set),
// and rewrites its CDI spec if it is missing or the MIG devices were
// recreated. It says whether it rewrote the spec; c is updated. The caller
// holds the claim lock.
func (s *State) ensurePrepared(ctx context.Context, c *checkpoint.Claim) (bool, error) {
	rec := c.Clone()
	recreated, err := (migPartitions{}).ensureMig(ctx, s, &rec)
	if err != nil {
		return false, claimplan.Wrap(claimplan.MIGSetup, err)
	}
	*c = rec
	for i := range rec.Devices {
		if err := s.prepareSharing(ctx, &rec, i); err != nil {
			return false, claimplan.Wrap(claimplan.SharingSetup, fmt.Errorf("device %s: %w", rec.Devices[i].Device, err))
		}
	}
	if recreated {
		return true, claimplan.Wrap(claimplan.CDISpec, s.writeSpec(rec))
	}
	rewritten, err := s.ensureSpec(ctx, rec)
	return rewritten, claimplan.Wrap(claimplan.CDISpec, err)
}

// ensureSpec rewrites a prepared claim's CDI spec if it is missing, and
// says whether it did: /var/run/cdi is a tmpfs, so a reboot loses every
// spec while the checkpoint survives.
func (s *State) ensureSpec(ctx context.Context, c checkpoint.Claim) (rewritten bool, err error) {
	ok, err := s.opts.CDI.ClaimSpecExists(c.UID)
	if err != nil || ok {
		return false, err
	}
	klog.FromContext(ctx).Info("Rewriting missing CDI spec of a prepared claim", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", c.UID)
	return true, s.writeSpec(c)
}
