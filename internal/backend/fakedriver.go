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
	"fmt"
	"os"
	"path/filepath"
)

// The fake backend's driver root is a directory tree laid out like an
// NVIDIA driver installation (Debian/Ubuntu x86_64 paths), with the version
// the fake NVML reports in every file name, so that NVIDIA's container
// toolkit finds the driver's files there exactly as it does on a GPU node
// (driverEdits): the fake runs the same code path, and containers see the
// libraries, binaries and firmware at the real paths. The libraries are
// ELF shared objects with the real SONAME and no code (fakeSharedObject);
// the binaries are scripts that say they are stand-ins.

// fakeLibraries are user-space driver libraries of an R550/R570 install,
// each installed as <name>.so.<version>, with the SONAME's version
// (libcuda.so.1; "" for the libraries whose SONAME carries the driver's
// version): CUDA, NVML, PTX JIT, NVVM, OpenCL, and the video codecs.
var fakeLibraries = []struct{ name, soversion string }{
	{"libcuda", "1"}, {"libcudadebugger", "1"}, {"libnvidia-ml", "1"},
	{"libnvidia-ptxjitcompiler", "1"}, {"libnvidia-nvvm", "4"}, {"libnvidia-opencl", "1"},
	{"libnvidia-gpucomp", ""}, {"libnvidia-cfg", "1"}, {"libnvidia-allocator", "1"},
	{"libnvidia-pkcs11-openssl3", ""}, {"libnvidia-encode", "1"}, {"libnvcuvid", "1"},
	{"libnvidia-opticalflow", "1"},
}

// fakeBinaries are the driver's utilities the toolkit mounts.
var fakeBinaries = []string{
	"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
	"nvidia-cuda-mps-control", "nvidia-cuda-mps-server",
}

// fakeFirmware are the GSP firmware images of R550+ (lib/firmware/nvidia/<version>/).
var fakeFirmware = []string{"gsp_ga10x.bin", "gsp_tu10x.bin"}

// fakeLibDir is where Debian and Ubuntu install the driver's libraries.
const fakeLibDir = "usr/lib/x86_64-linux-gnu"

// writeFakeDriverRoot lays out, under dir, a driver installation of the
// given version, replacing what an earlier run (perhaps of another
// version) left there.
func writeFakeDriverRoot(dir, version string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".driver-root-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	write := func(rel string, mode os.FileMode, content string) error {
		path := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		return os.WriteFile(path, []byte(content), mode)
	}
	stub := func(what string) string {
		return fmt.Sprintf("gpudra fake NVIDIA driver %s: stand-in for %s, not a real file of the driver\n", version, what)
	}
	for _, lib := range fakeLibraries {
		soname := lib.name + ".so." + lib.soversion
		if lib.soversion == "" {
			soname = lib.name + ".so." + version
		}
		if err := write(filepath.Join(fakeLibDir, lib.name+".so."+version), 0o644, string(fakeSharedObject(soname))); err != nil {
			return err
		}
	}
	for _, bin := range fakeBinaries {
		script := "#!/bin/sh\necho '" + stub(bin)[:len(stub(bin))-1] + "'\n"
		if err := write(filepath.Join("usr/bin", bin), 0o755, script); err != nil {
			return err
		}
	}
	for _, fw := range fakeFirmware {
		if err := write(filepath.Join("lib/firmware/nvidia", version, fw), 0o644, stub(fw)); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}
