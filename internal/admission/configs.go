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

package admission

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kinds this package validates, all in API group resource.k8s.io.
const (
	KindResourceClaim         = "ResourceClaim"
	KindResourceClaimTemplate = "ResourceClaimTemplate"
	KindDeviceClass           = "DeviceClass"
)

// ResourceGroup is the API group of the kinds validated here.
const ResourceGroup = "resource.k8s.io"

// opaqueConfig is one config entry of the object that carries an opaque
// config: where it is and what it says.
type opaqueConfig struct {
	// path is the entry's opaque field, e.g. spec.devices.config[2].opaque;
	// list the list it is in, spec.devices.config.
	path, list *field.Path
	driver     string
	// parameters is the raw JSON of opaque.parameters.
	parameters json.RawMessage
}

// configEntry is the part of a config entry this package reads; claims,
// templates and classes, in every version, agree on it.
type configEntry struct {
	Opaque *struct {
		Driver     string           `json:"driver"`
		Parameters boundedParameter `json:"parameters"`
	} `json:"opaque"`
}

// configList is an object's config entries, at most maxConfigs of them:
// the JSON decoder refuses more before reading any.
type configList []configEntry

func (l *configList) UnmarshalJSON(b []byte) error {
	var count []struct{} // counts entries without keeping them
	if err := json.Unmarshal(b, &count); err != nil {
		return err
	}
	if len(count) > maxConfigs {
		return fmt.Errorf("more than %d config entries (%d), which the API server never lets through", maxConfigs, len(count))
	}
	var entries []configEntry
	if err := json.Unmarshal(b, &entries); err != nil {
		return err
	}
	*l = entries
	return nil
}

// boundedParameter is an entry's opaque.parameters, at most
// maxParametersBytes of JSON.
type boundedParameter json.RawMessage

func (p *boundedParameter) UnmarshalJSON(b []byte) error {
	if len(b) > maxParametersBytes {
		return fmt.Errorf("opaque parameters of %d bytes, more than the %d a review from the API server can carry", len(b), maxParametersBytes)
	}
	*p = bytes.Clone(b)
	return nil
}

// objectConfigs is an object reduced to its config lists: where a claim,
// a template and a class keep them. Decoding reads nothing else into
// memory.
type objectConfigs struct {
	Spec struct {
		// ResourceClaim: spec.devices.config.
		Devices struct {
			Config configList `json:"config"`
		} `json:"devices"`
		// ResourceClaimTemplate: spec.spec.devices.config.
		Spec struct {
			Devices struct {
				Config configList `json:"config"`
			} `json:"devices"`
		} `json:"spec"`
		// DeviceClass: spec.config.
		Config configList `json:"config"`
	} `json:"spec"`
}

// configs returns the opaque configs of an object of the given kind, in
// order.
func (o *objectConfigs) configs(kind string) ([]opaqueConfig, error) {
	var entries configList
	var path *field.Path
	switch kind {
	case KindResourceClaim:
		entries, path = o.Spec.Devices.Config, field.NewPath("spec", "devices", "config")
	case KindResourceClaimTemplate:
		entries, path = o.Spec.Spec.Devices.Config, field.NewPath("spec", "spec", "devices", "config")
	case KindDeviceClass:
		entries, path = o.Spec.Config, field.NewPath("spec", "config")
	default:
		return nil, fmt.Errorf("kind %q is not validated here (only %s, %s and %s)", kind,
			KindResourceClaim, KindResourceClaimTemplate, KindDeviceClass)
	}
	var out []opaqueConfig
	for i, e := range entries {
		if e.Opaque == nil {
			continue
		}
		out = append(out, opaqueConfig{
			path:       path.Index(i).Child("opaque"),
			list:       path,
			driver:     e.Opaque.Driver,
			parameters: json.RawMessage(e.Opaque.Parameters),
		})
	}
	return out, nil
}

// ofDriver keeps the configs of one driver.
func ofDriver(configs []opaqueConfig, driver string) []opaqueConfig {
	var out []opaqueConfig
	for _, c := range configs {
		if c.driver == driver {
			out = append(out, c)
		}
	}
	return out
}

// sameConfigs reports whether two objects carry the same configs, in the
// same places, byte for byte.
func sameConfigs(a, b []opaqueConfig) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].path.String() != b[i].path.String() || !bytes.Equal(a[i].parameters, b[i].parameters) {
			return false
		}
	}
	return true
}
