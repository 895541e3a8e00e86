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

package backend

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpudra/gpudra/internal/gpu"
)

// nvmlPolicy runs the driver's own tools from the driver root: nvidia-smi
// for the time slice, nvidia-cuda-mps-control for MPS. Both are linked
// against libnvidia-ml and the CUDA driver library that lie next to the
// libnvidia-ml the plugin found, which is what LD_LIBRARY_PATH points at.
type nvmlPolicy struct {
	// binDir holds nvidia-smi and nvidia-cuda-mps-control.
	binDir string
	// libDir holds libnvidia-ml.so.1 and libcuda.so.1.
	libDir string
}

var _ policyTools = nvmlPolicy{}

// newNVMLPolicy finds the driver's tools below the driver root; libPath is
// the libnvidia-ml the backend opened ("" for the system's).
func newNVMLPolicy(root, libPath string) nvmlPolicy {
	p := nvmlPolicy{binDir: filepath.Join(root, "usr", "bin")}
	if libPath != "" {
		p.libDir = filepath.Dir(libPath)
	}
	return p
}

func (p nvmlPolicy) env() []string {
	env := []string{"PATH=" + p.binDir + ":/usr/bin:/bin"}
	if p.libDir != "" {
		env = append(env, "LD_LIBRARY_PATH="+p.libDir)
	}
	return env
}

// setTimeSlice runs "nvidia-smi compute-policy -i <uuid> --set-timeslice
// <level>", as NVIDIA's DRA driver does.
func (p nvmlPolicy) setTimeSlice(uuid string, level int) error {
	cmd := exec.Command(filepath.Join(p.binDir, "nvidia-smi"), "compute-policy", "-i", uuid, "--set-timeslice", strconv.Itoa(level))
	cmd.Env = p.env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// mpsDaemon runs nvidia-cuda-mps-control in the foreground (-f), for the
// one device in CUDA_VISIBLE_DEVICES; the daemon starts
// nvidia-cuda-mps-server from its PATH when the first client connects.
// The same binary without -f is its control client.
func (p nvmlPolicy) mpsDaemon(deviceUUID string) gpu.DaemonCommand {
	control := filepath.Join(p.binDir, "nvidia-cuda-mps-control")
	return gpu.DaemonCommand{
		Args:       []string{control, "-f"},
		Env:        append(p.env(), "CUDA_VISIBLE_DEVICES="+deviceUUID),
		Control:    []string{control},
		HostAccess: true,
	}
}

// imexCtl runs the driver root's nvidia-imex-ctl with the driver's
// libraries, as nvidia-smi is run. NVIDIA's driver chroots into the
// driver root instead, which needs CAP_SYS_CHROOT; the tool needs no more
// than the libraries LD_LIBRARY_PATH names.
func (p nvmlPolicy) imexCtl() gpu.ToolCommand {
	return gpu.ToolCommand{Args: []string{filepath.Join(p.binDir, "nvidia-imex-ctl")}, Env: p.env()}
}
