//go:build e2e

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

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readmeBlocks are the shell blocks of README.md that a marker line
// "<!-- e2e: NAME -->" right above names.
func readmeBlocks(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	name, in := "", false
	var block strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case in && line == "```":
			out[name], in, name = block.String(), false, ""
			block.Reset()
		case in:
			block.WriteString(line + "\n")
		case strings.HasPrefix(line, "<!-- e2e: ") && strings.HasSuffix(line, " -->"):
			name = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- e2e: "), " -->")
			if _, dup := out[name]; dup {
				t.Fatalf("README.md: block %s marked twice", name)
			}
		case name != "" && line == "```sh":
			in = true
		case name != "" && line != "":
			t.Fatalf("README.md: the line after <!-- e2e: %s --> is %q, not a ```sh block", name, line)
		}
	}
	return out
}

// readmeRelease is the release the README installs.
const (
	readmeRelease   = "gpudra"
	readmeNamespace = "gpudra"
)

// readmeInstall follows README.md's install section, reading its commands
// from the README itself so the two cannot drift: make image, loading the
// image the way this cluster takes it, the chart on fake GPUs with its
// default image (the tag make image built), a pod that gets a GPU, kubectl
// describe resourceclaims with the device's UUID, make cli and kubectl
// gpudra status. It runs after Uninstall, on a cluster with nothing of
// gpudra left, and removes the release at the end.
//
// The local cluster keeps its kubelet and CDI directories under its state
// directory; for the README's commands, which assume a standard node, the
// plugin directories and the CDI directory are linked at
// /var/lib/kubelet/plugins, /var/lib/kubelet/plugins_registry and
// /var/run/cdi while the scenario runs (GPUDRA_E2E_NODE_KUBELET_DIR,
// GPUDRA_E2E_NODE_CDI_DIR).
func (e *env) readmeInstall(ctx context.Context, t *testing.T) {
	blocks := readmeBlocks(t)
	load := os.Getenv("GPUDRA_E2E_IMAGE_LOAD") // ctr (local cluster) or kind
	steps := []string{"install-image", "install-load-" + load, "install-chart-fake", "install-try"}
	for _, s := range steps {
		if blocks[s] == "" {
			t.Fatalf("README.md has no <!-- e2e: %s --> block (blocks: %v)", s, slices.Sorted(maps.Keys(blocks)))
		}
	}
	// The GPU variant of step 2 is not run here (no GPU); the fake one
	// must be it plus what fake GPUs need, so that it cannot drift.
	for _, line := range strings.Split(strings.TrimSpace(blocks["install-chart"]), "\n") {
		found := false
		for _, fake := range strings.Split(blocks["install-chart-fake"], "\n") {
			found = found || strings.HasPrefix(fake, line)
		}
		if !found {
			t.Errorf("README.md: the fake-GPU install lacks the GPU install's %q", line)
		}
	}
	e.standardNodeLayout(t)

	path := []string{filepath.Dir(e.kubectl), filepath.Dir(e.helm)}
	if ctr := os.Getenv("GPUDRA_E2E_CTR"); ctr != "" {
		path = append(path, filepath.Dir(ctr))
	}
	env := append(os.Environ(), "KUBECONFIG="+e.kubeconfig,
		"PATH="+strings.Join(append(path, os.Getenv("PATH")), string(os.PathListSeparator)))
	if addr := os.Getenv("GPUDRA_E2E_CONTAINERD_ADDRESS"); addr != "" {
		env = append(env, "CONTAINERD_ADDRESS="+addr) // ctr's --address
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_ = e.cs.CoreV1().Pods("default").Delete(cctx, "gpu-test", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		_ = e.cs.ResourceV1().ResourceClaimTemplates("default").Delete(cctx, "one-gpu", metav1.DeleteOptions{})
		_, _ = run(cctx, e.helm, e.helmArgs("uninstall", readmeRelease, "-n", readmeNamespace, "--wait")...)
		e.deleteNamespace(cctx, readmeNamespace)
		if os.Getenv("GPUDRA_E2E_NODE_KUBELET_DIR") != "" {
			// This host is the node: the chart's default fake state
			// directory is gone with the release.
			_ = os.RemoveAll("/var/lib/gpudra/fake")
		}
	})

	outputs := map[string]string{}
	for _, s := range steps {
		start := time.Now()
		cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", blocks[s])
		cmd.Dir, cmd.Env = repoRoot, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		record(t, "README "+s, time.Since(start))
		t.Logf("README %s:\n%s\n%s", s, blocks[s], out.String())
		if err != nil {
			t.Fatalf("README.md's %s block fails here: %v", s, err)
		}
		outputs[s] = out.String()
	}

	// The chart ran the image make image built, under the source chart's
	// own default: its appVersion, which make image tags besides the
	// build's version.
	want := "ghcr.io/gpudra/gpudra:" + buildVersion(t, "chart-version")
	pods, err := e.cs.CoreV1().Pods(readmeNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]int{}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.Image != want {
				t.Errorf("pod %s runs %s, not %s", p.Name, c.Image, want)
			}
		}
		if podReady(&p) {
			ready[p.Labels["app.kubernetes.io/component"]]++
		}
	}
	if ready["kubelet-plugin"] == 0 || ready["controller"] == 0 {
		t.Errorf("ready pods by component: %v; want the plugin and the controller", ready)
	}
	try := outputs["install-try"]
	for _, w := range []string{
		"/dev/nvidiactl", // the pod's GPU (fake device nodes)
		"NVIDIA_VISIBLE_DEVICES=void",
		"DeviceStatus", "GPU-", "Prepared", // kubectl describe resourceclaims: the plugin's status.devices
		"default/gpu-test-gpu-", "gpu-test", "FREE\n", // kubectl gpudra status
	} {
		if !strings.Contains(try, w) {
			t.Errorf("the README's try block printed no %q", w)
		}
	}
	if !regexp.MustCompile(`(?m)^/dev/nvidia[0-9]+$`).MatchString(try) {
		t.Errorf("the README's pod listed no GPU device node /dev/nvidia<minor>")
	}
	if !strings.Contains(outputs["install-chart-fake"], "gpu.gpudra.io") {
		t.Errorf("kubectl get resourceslices printed no slice of gpu.gpudra.io:\n%s", outputs["install-chart-fake"])
	}
}

// standardNodeLayout links the node's directories where a standard node
// has them, when this cluster keeps them elsewhere (the local cluster runs
// on this host, its kubelet's root and CDI directories under its state),
// and removes the links at the end: the chart mounts
// <kubeletDir>/plugins, <kubeletDir>/plugins_registry and the CDI
// directory. (/var/lib/kubelet itself the local kubelet creates anyway,
// for its device-plugins and pki directories.)
func (e *env) standardNodeLayout(t *testing.T) {
	t.Helper()
	kubelet, cdi := os.Getenv("GPUDRA_E2E_NODE_KUBELET_DIR"), os.Getenv("GPUDRA_E2E_NODE_CDI_DIR")
	var links []struct{ std, target string }
	if kubelet != "" && kubelet != "/var/lib/kubelet" {
		for _, d := range []string{"plugins", "plugins_registry"} {
			links = append(links, struct{ std, target string }{"/var/lib/kubelet/" + d, filepath.Join(kubelet, d)})
		}
	}
	if cdi != "" && cdi != "/var/run/cdi" {
		links = append(links, struct{ std, target string }{"/var/run/cdi", cdi})
	}
	for _, l := range links {
		if cur, err := os.Readlink(l.std); err == nil && cur == l.target {
			continue // left by an interrupted run
		} else if _, err := os.Lstat(l.std); err == nil {
			t.Fatalf("%s exists on this host (not a link to %s): a real node's? The README install scenario needs it for the local cluster's %s", l.std, l.target, l.target)
		}
		if err := os.MkdirAll(filepath.Dir(l.std), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(l.target, l.std); err != nil {
			t.Fatal(fmt.Errorf("link %s to the local cluster's %s: %w", l.std, l.target, err))
		}
		std := l.std
		t.Cleanup(func() { _ = os.Remove(std) })
	}
}
