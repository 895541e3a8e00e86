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

package plugin

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Fleet mode reads a ConfigMap of the plugin's namespace: Start refuses
// to run without the namespace or the ConfigMap's name, and says which
// flag is missing (and releases the backend, as on every failed start).
func TestStartFleetNeedsNamespace(t *testing.T) {
	for _, tc := range []struct {
		namespace, configMap, want string
	}{
		{"", "gpudra-mig-spares", "--namespace"},
		{"gpudra", "", "--mig-spares-configmap"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			cfg := startConfig(t)
			cfg.SpareGPUs, cfg.Namespace, cfg.SparesConfigMap = slicebuilder.SpareGPUs{Fleet: true}, tc.namespace, tc.configMap
			d, err := Start(ctx, cfg)
			if err == nil {
				d.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v, want an error naming %s", err, tc.want)
			}
			if err := cfg.Backend.Close(); !errors.Is(err, backend.ErrClosed) {
				t.Errorf("the backend was still open after Start failed (Close: %v)", err)
			}
		})
	}
}
