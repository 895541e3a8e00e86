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
	// path is the entry's opaque field, e.g. spec.devices.config[2].opaque.
	path   *field.Path
	driver string
	// parameters is the raw JSON of opaque.parameters.
	parameters json.RawMessage
}

// configEntry is the part of a config entry this package reads; claims,
// templates and classes, in every version, agree on it.
type configEntry struct {
	Opaque *struct {
		Driver     string          `json:"driver"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"opaque"`
}

// The objects, reduced to the path to their config list.
type (
	claimShape struct {
		Spec struct {
			Devices struct {
				Config []configEntry `json:"config"`
			} `json:"devices"`
		} `json:"spec"`
	}
	templateShape struct {
		Spec struct {
			Spec struct {
				Devices struct {
					Config []configEntry `json:"config"`
				} `json:"devices"`
			} `json:"spec"`
		} `json:"spec"`
	}
	classShape struct {
		Spec struct {
			Config []configEntry `json:"config"`
		} `json:"spec"`
	}
)

// configsOf returns the opaque configs of the given kind's object, in
// order. raw is the object's JSON as the API server sends it.
func configsOf(kind string, raw []byte) ([]opaqueConfig, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var entries []configEntry
	var path *field.Path
	switch kind {
	case KindResourceClaim:
		var o claimShape
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("read %s: %w", kind, err)
		}
		entries, path = o.Spec.Devices.Config, field.NewPath("spec", "devices", "config")
	case KindResourceClaimTemplate:
		var o templateShape
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("read %s: %w", kind, err)
		}
		entries, path = o.Spec.Spec.Devices.Config, field.NewPath("spec", "spec", "devices", "config")
	case KindDeviceClass:
		var o classShape
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("read %s: %w", kind, err)
		}
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
			driver:     e.Opaque.Driver,
			parameters: e.Opaque.Parameters,
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
