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

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// cdiHookName is NVIDIA's CDI hook, which the image ships beside the
// plugin's binary.
const cdiHookName = "nvidia-cdi-hook"

// installCDIHook copies the nvidia-cdi-hook beside this binary into dir,
// a host directory: the container runtime runs the hooks of the CDI specs
// on the host, so the hook must be there, and the image is the one place
// that has a copy matching the plugin's toolkit version. The copy is
// written aside and renamed, so a runtime never runs a half-written hook.
func installCDIHook(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install %s: %w", cdiHookName, err)
	}
	src := filepath.Join(filepath.Dir(self), cdiHookName)
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install %s: %w", cdiHookName, err)
	}
	defer in.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install %s: %w", cdiHookName, err)
	}
	tmp, err := os.CreateTemp(dir, "."+cdiHookName+"-*")
	if err != nil {
		return fmt.Errorf("install %s: %w", cdiHookName, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("install %s into %s: %w", cdiHookName, dir, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("install %s into %s: %w", cdiHookName, dir, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install %s into %s: %w", cdiHookName, dir, err)
	}
	dst := filepath.Join(dir, cdiHookName)
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("install %s into %s: %w", cdiHookName, dir, err)
	}
	fmt.Printf("installed %s\n", dst)
	return nil
}
