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

// Package nvmlfake serves fake NVIDIA GPUs behind go-nvml's nvml.Interface.
//
// It starts from go-nvml's own mock server (pkg/nvml/mock/server and the
// GPU configurations in pkg/nvml/mock/gpus) and raises it to the fidelity
// that gpudra depends on, so that code which passes against the fake also
// works on real hardware:
//
//   - calibration: every model's product name, PCI IDs, framebuffer size
//     (81559 MiB on an H100, as NVML reports it, not the 80 GiB of its
//     name), SM count, NVLink links and MIG profile table (nvidia-smi mig
//     -lgip and -lgipp) are those of the real GPU; the public evidence for
//     each, with its source, is in testdata/calibration, and
//     TestCalibration compares the fake's NVML answers with it;
//   - identity: GPU-<uuid> UUIDs and NVML-style PCI bus IDs that are stable
//     for a node name and differ between nodes; minor number = index;
//   - NVLink: islands of GPUs whose pairwise P2P NVLink status is OK;
//   - multi-node NVLink: fabric info (v1 and _v4) and platform info as
//     the real GPUs report them; a GB200 tray's domain, clique and place
//     in the rack from its profile file, transitions injected with
//     SetFabric (fabric.go);
//   - MIG: real profile IDs (19 for 1g on A100/H100, not the profile
//     index), placements in memory-slice units, MIG mode checks, pending
//     mode changes on Ampere, overlap and capacity checks that fail with
//     ERROR_INSUFFICIENT_RESOURCES, lowest-free instance IDs, MIG device
//     handles with MIG-<uuid> UUIDs;
//   - library lifecycle: every call but Init fails with
//     ERROR_UNINITIALIZED until Init, like libnvidia-ml;
//   - every method the mock leaves unset returns ERROR_NOT_SUPPORTED
//     instead of panicking;
//   - health: XID events injected from any process (InjectXID) arrive
//     through EventSet.Wait;
//   - persistence: MIG mode and MIG instances live in a JSON file in the
//     state directory, so a restarted process finds what the previous one
//     created; a new boot ID drops the instances, as a reboot does. Writes
//     are atomic across process crashes but not fsynced: the file stands in
//     for the GPUs' own memory, not for data on the node's disk.
package nvmlfake
