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

package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/claimplan"
	"github.com/gpudra/gpudra/internal/errorlist"
	"github.com/gpudra/gpudra/internal/scheduler"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Opaque configs are checked as gpudra's kubelet plugin reads them at
// prepare: each config for gpudra's driver where it is written, with the
// decoder the plugin and the admission webhook use (claimplan.DecodeConfig:
// the config API's strict, defaulted, validated Decode, so a field the API
// gains is checked here without a change); and, once a claim is allocated,
// the whole prepare-time decision (prepare.go), which includes the config
// each device gets being of its kind. A config for another driver is that
// driver's business; a note says what gpudra's equivalent is when the
// config is another vendor's.

// checkClaimConfigs checks the configs of a claim's spec (their requests
// are the API server's, reported by internal/scheduler).
func (ev *evaluator) checkClaimConfigs(ce *claimEval) {
	for i, c := range ce.claim.Spec.Devices.Config {
		if c.Opaque != nil {
			ev.checkOpaque(ce.source, ce.object, fmt.Sprintf("%s.devices.config[%d].opaque", ce.field, i), c.Opaque, "every pod using "+ce.info.Name)
		}
	}
}

// checkClassConfigs checks the configs of a DeviceClass: they apply to
// every device allocated through it.
func (ev *evaluator) checkClassConfigs(o scheduler.Object) {
	dc := o.Obj.(*resourceapi.DeviceClass)
	for i, c := range dc.Spec.Config {
		if c.Opaque != nil {
			ev.checkOpaque(o.Source, "DeviceClass "+dc.Name, fmt.Sprintf("spec.config[%d].opaque", i), c.Opaque, "every claim using this class")
		}
	}
}

// checkOpaque checks one opaque config. who says whose prepare fails.
func (ev *evaluator) checkOpaque(src scheduler.Source, object, field string, o *resourceapi.OpaqueDeviceConfiguration, who string) {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	_ = json.Unmarshal(o.Parameters.Raw, &meta) // Decode reports what is wrong with it
	vendor, foreign := vendorOf(meta.APIVersion)
	if o.Driver != ev.opts.DriverName {
		if foreign {
			ev.findings.add(Finding{Kind: FindingForeignConfig, Severity: SeverityNote, Source: src, Object: object, Field: field + ".parameters",
				Message: fmt.Sprintf("a config of %s (%s %s, for driver %s); gpudra leaves configs of other drivers alone", vendor.who, meta.APIVersion, meta.Kind, o.Driver),
				Hint:    vendor.equivalent(meta.Kind, ev.opts.DriverName)})
		}
		return
	}
	if _, err := claimplan.DecodeConfig(o.Parameters.Raw); err != nil {
		hint := "see the Device configuration section of gpudra's docs/attributes.md for the kinds and fields of " + configapi.SchemeGroupVersion.String()
		if foreign {
			hint = fmt.Sprintf("this is a config of %s; %s", vendor.who, vendor.equivalent(meta.Kind, ev.opts.DriverName))
		}
		refusal := claimplan.InvalidConfig
		var r2 *claimplan.Refusal
		if errors.As(err, &r2) {
			refusal = r2.Kind
			hint = refusalHint(r2, ev.opts.DriverName)
		}
		for _, e := range configErrors(err) {
			ev.findings.add(Finding{Kind: FindingInvalidConfig, Refusal: string(refusal), Source: src, Object: object, Field: joinField(field, e.path),
				Message: fmt.Sprintf("gpudra's admission webhook denies this config, and without the webhook gpudra's kubelet plugin fails the prepare of %s: %s: %s", who, field, e.msg),
				Hint:    hint})
		}
	}
}

var unknownField = regexp.MustCompile(`^(?:unknown|duplicate) field "([^"]+)"`)

// configError is one problem the config API reported, with its field path
// relative to the opaque config ("parameters.driverCapabilities[1]").
type configError struct{ path, msg string }

// configErrors splits what Decode returned into its errors (a summary
// unwraps into the ones it shows), each with the field path its message
// starts with.
func configErrors(err error) []configError {
	var list []error
	var multi interface{ Unwrap() []error }
	if errors.As(err, &multi) {
		list = multi.Unwrap()
	}
	if len(list) == 0 {
		list = []error{err}
	}
	var out []configError
	for _, e := range list {
		msg := e.Error()
		path := ""
		if p, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(p, "parameters") && !strings.Contains(p, " ") {
			path = p
			// The strict decoder names an unknown field in the message.
			if f := unknownField.FindStringSubmatch(rest); f != nil {
				path += "." + f[1]
			}
		}
		out = append(out, configError{path: path, msg: msg})
	}
	if total := errorlist.Total(err); total > len(out) {
		out[len(out)-1].msg += fmt.Sprintf(" (and %d more errors)", total-len(out))
	}
	return out
}

func joinField(a, b string) string {
	if b == "" {
		return a
	}
	return a + "." + b
}
