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
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// TestFlagsDocumented: docs/flags/gpudra-kubelet-plugin.md is generated from the
// binary's flags, with the environment variable that sets each one (make
// golden rewrites it).
func TestFlagsDocumented(t *testing.T) {
	_, cmd := newFlags()
	gpudratest.GoldenFile(t, filepath.Join("..", "..", "docs", "flags", "gpudra-kubelet-plugin.md"), gpudratest.FlagPage(
		"`gpudra-kubelet-plugin` flags", "go test ./cmd/kubelet-plugin -run TestFlagsDocumented",
		"The flags of the kubelet plugin, which the chart's DaemonSet runs on every\n"+
			"GPU node. A flag with a variable in the environment column can also be set\n"+
			"through it (the chart does so); the command line wins, an empty variable\n"+
			"counts as unset, and a value that does not parse fails the start naming the\n"+
			"variable. How the chart sets each one: [the chart's values](../../deployments/helm/gpudra/README.md#values);\n"+
			"conventions common to the binaries: [flags.md](../flags.md).",
		gpudratest.FlagSection{Flags: cmd.Flags, EnvOf: cmd.EnvOf}))
}

// TestEnvironment: the chart's environment reaches the flags, parsed as
// the flags parse them; bad values fail instead of falling back to the
// default.
func TestEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		check   func(*flags) bool
		wantErr string
	}{
		{name: "defaults", check: func(f *flags) bool {
			return f.deviceMetadata && f.healthPort == 51515 && f.telemetry.String() == "10s" && f.mpsPullSecrets == nil
		}},
		// DEVICE_METADATA=1 used to turn device metadata off.
		{name: "DEVICE_METADATA=1", env: map[string]string{"DEVICE_METADATA": "1"}, check: func(f *flags) bool { return f.deviceMetadata }},
		{name: "DEVICE_METADATA=false", env: map[string]string{"DEVICE_METADATA": "false"}, check: func(f *flags) bool { return !f.deviceMetadata }},
		{name: "DEVICE_METADATA=yes", env: map[string]string{"DEVICE_METADATA": "yes"}, wantErr: "DEVICE_METADATA"},
		{name: "HEALTHCHECK_PORT not a number", env: map[string]string{"HEALTHCHECK_PORT": "port"}, wantErr: "HEALTHCHECK_PORT"},
		{name: "CONSUMABLE_CAPACITY=on", env: map[string]string{"CONSUMABLE_CAPACITY": "on"}, wantErr: "CONSUMABLE_CAPACITY"},
		{name: "pull secrets", env: map[string]string{"MPS_DAEMON_IMAGE_PULL_SECRETS": "a, b"}, check: func(f *flags) bool {
			return strings.Join(f.mpsPullSecrets, "|") == "a|b"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, cmd := newFlags()
			cmd.LookupEnv = func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			// Parse without applying the logging flags: a process does
			// that once.
			err := cmd.Flags.Parse(nil)
			if err == nil {
				err = cmd.ParseEnv()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(f) {
				t.Errorf("error %v, flags %+v", err, *f)
			}
		})
	}
}

// TestFleetSparesFlags: --mig-spare-gpus=fleet reads the spares
// ConfigMap (--mig-spares-configmap, chart's name by default) in the
// plugin's namespace, and refuses to start without one, naming the flag
// to set; the other modes need neither.
func TestFleetSparesFlags(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		env       map[string]string
		configMap string
		wantErr   string
	}{
		{name: "fleet", args: []string{"--mig-spare-gpus=fleet", "--namespace=gpudra"}, configMap: "gpudra-mig-spares"},
		{name: "fleet from the environment", env: map[string]string{"MIG_SPARE_GPUS": "fleet", "POD_NAMESPACE": "gpudra", "MIG_SPARES_CONFIGMAP": "spares"}, configMap: "spares"},
		{name: "fleet without a namespace", args: []string{"--mig-spare-gpus=fleet"}, wantErr: "set --namespace"},
		{name: "fleet without a ConfigMap", args: []string{"--mig-spare-gpus=fleet", "--namespace=gpudra", "--mig-spares-configmap="}, wantErr: "set --mig-spares-configmap"},
		{name: "a number, no namespace", args: []string{"--mig-spare-gpus=2"}, configMap: "gpudra-mig-spares"},
		{name: "all, no namespace", args: []string{"--mig-spare-gpus=all"}, configMap: "gpudra-mig-spares"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, cmd := newFlags()
			cmd.LookupEnv = func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			err := cmd.Flags.Parse(tc.args)
			if err == nil {
				err = cmd.ParseEnv()
			}
			if err != nil {
				t.Fatal(err)
			}
			spare, err := slicebuilder.ParseSpareGPUs(f.migSpareGPUs)
			if err != nil {
				t.Fatal(err)
			}
			err = checkFleetSpares(f, spare)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.wantErr == "" && f.sparesConfig != tc.configMap:
				t.Errorf("--mig-spares-configmap is %q, want %q", f.sparesConfig, tc.configMap)
			}
		})
	}
}

func TestHealthcheckAddr(t *testing.T) {
	for port, want := range map[int]string{51515: ":51515", 0: "", -1: "error", 70000: "error"} {
		got, err := healthcheckAddr(port)
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("healthcheckAddr(%d) = %q, want %q", port, got, want)
		}
	}
}
