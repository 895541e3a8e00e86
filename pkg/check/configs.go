package check

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"

	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
	"github.com/gpudra/gpudra/pkg/errorlist"
	"github.com/gpudra/gpudra/pkg/scheduler"
	"github.com/gpudra/gpudra/pkg/slicebuilder"
)

// Opaque configs are checked as gpudra's kubelet plugin reads them at
// prepare: each config for gpudra's driver with the config API's own
// Decode (strict, defaulted, validated), so a field the API gains is
// checked here without a change; and, once a claim is allocated, the
// config each device gets (configapi.ForDevice: the configs that apply,
// merged), which must be of the device's kind. A config for another driver is that driver's business; a
// note says what gpudra's equivalent is when the config is another
// vendor's.

// checkClaimConfigs checks the configs of a claim's spec.
func (r *runner) checkClaimConfigs(ce *claimEval) {
	requests := map[string]bool{}
	for _, req := range ce.claim.Spec.Devices.Requests {
		requests[req.Name] = true
		for _, sub := range req.FirstAvailable {
			requests[req.Name+"/"+sub.Name] = true
		}
	}
	for i, c := range ce.claim.Spec.Devices.Config {
		field := fmt.Sprintf("%s.devices.config[%d]", ce.field, i)
		for j, name := range c.Requests {
			if !requests[name] {
				r.addFinding(Finding{Kind: FindingInvalid, Source: ce.source, Object: ce.object, Field: fmt.Sprintf("%s.requests[%d]", field, j),
					Message: fmt.Sprintf("config names request %q, which the claim does not have; the API server rejects the claim", name),
					Hint:    didYouMean(name, sortedKeys(requests)) + "requests: " + strings.Join(sortedKeys(requests), ", ")})
				ce.invalid = true
			}
		}
		if c.Opaque != nil {
			r.checkOpaque(ce.source, ce.object, field+".opaque", c.Opaque, "every pod using "+ce.info.Name)
		}
	}
}

// checkClassConfigs checks the configs of a DeviceClass: they apply to
// every device allocated through it.
func (r *runner) checkClassConfigs(o scheduler.Object) {
	dc := o.Obj.(*resourceapi.DeviceClass)
	for i, c := range dc.Spec.Config {
		if c.Opaque != nil {
			r.checkOpaque(o.Source, "DeviceClass "+dc.Name, fmt.Sprintf("spec.config[%d].opaque", i), c.Opaque, "every claim using this class")
		}
	}
}

// checkOpaque checks one opaque config. who says whose prepare fails.
func (r *runner) checkOpaque(src scheduler.Source, object, field string, o *resourceapi.OpaqueDeviceConfiguration, who string) {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	_ = json.Unmarshal(o.Parameters.Raw, &meta) // Decode reports what is wrong with it
	vendor, foreign := vendorOf(meta.APIVersion)
	if o.Driver != r.opts.DriverName {
		if foreign {
			r.addFinding(Finding{Kind: FindingForeignConfig, Severity: SeverityNote, Source: src, Object: object, Field: field + ".parameters",
				Message: fmt.Sprintf("a config of %s (%s %s, for driver %s); gpudra leaves configs of other drivers alone", vendor.who, meta.APIVersion, meta.Kind, o.Driver),
				Hint:    vendor.equivalent(meta.Kind, r.opts.DriverName)})
		}
		return
	}
	if _, err := configapi.Decode(o.Parameters.Raw); err != nil {
		hint := "see the Device configuration section of gpudra's README for the kinds and fields of " + configapi.SchemeGroupVersion.String()
		if foreign {
			hint = fmt.Sprintf("this is a config of %s; %s", vendor.who, vendor.equivalent(meta.Kind, r.opts.DriverName))
		}
		for _, e := range configErrors(err) {
			r.addFinding(Finding{Kind: FindingInvalidConfig, Source: src, Object: object, Field: joinField(field, e.path),
				Message: fmt.Sprintf("gpudra's kubelet plugin fails the prepare of %s: %s: %s", who, field, e.msg),
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

// checkAllocatedConfigs checks, for a claim the allocator satisfied, the
// config each of gpudra's devices gets, as the plugin's prepare does: the
// configs that apply to its request (class configs first, then the
// claim's), merged, of the device's kind.
func (r *runner) checkAllocatedConfigs(ce *claimEval, res *resourceapi.AllocationResult) {
	for _, result := range res.Devices.Results {
		if result.Driver != r.opts.DriverName {
			continue
		}
		applicable := resourceclaim.ConfigForResult(res.Devices.Config, result)
		slices.SortStableFunc(applicable, func(a, b resourceapi.DeviceAllocationConfiguration) int {
			return cmp.Compare(sourceRank(a.Source), sourceRank(b.Source))
		})
		var layers [][]byte
		var last resourceapi.DeviceAllocationConfiguration
		for _, c := range applicable {
			if c.Opaque == nil || c.Opaque.Driver != r.opts.DriverName {
				continue
			}
			if _, err := configapi.Decode(c.Opaque.Parameters.Raw); err != nil {
				return // reported where the config is written
			}
			layers, last = append(layers, c.Opaque.Parameters.Raw), c
		}
		if _, err := configapi.ForDevice(layers, r.isMig(result)); err != nil {
			src, object, field := r.configLocation(ce, result, last)
			r.addFinding(Finding{Kind: FindingInvalidConfig, Source: src, Object: object, Field: field,
				Message: fmt.Sprintf("gpudra's kubelet plugin fails the prepare of claim %s: request %q gets %s: %v", ce.info.Name, baseRequest(result.Request), result.Device, err),
				Hint:    "give the requests for MIG partitions (DeviceClass mig.gpudra.io or mig-<profile>.gpudra.io) a MigConfig and those for whole GPUs a GpuConfig, each naming its requests in config[].requests"})
		}
	}
}

func baseRequest(name string) string {
	base, _, _ := strings.Cut(name, "/")
	return base
}

// sourceRank orders configs by precedence, lowest first: the DeviceClass's
// are defaults that the claim's own override.
func sourceRank(source resourceapi.AllocationConfigSource) int {
	if source == resourceapi.AllocationConfigSourceClass {
		return 0
	}
	return 1
}

// isMig says whether an allocated device is a MIG partition, by the type
// attribute the slice builder publishes.
func (r *runner) isMig(result resourceapi.DeviceRequestAllocationResult) bool {
	d, ok := r.inv.byID[deviceID(result)]
	if !ok {
		return false
	}
	a, ok := d.attribute(r.opts.DriverName, string(slicebuilder.AttrType))
	return ok && a.StringValue != nil && *a.StringValue == slicebuilder.TypeMIG
}

// configLocation finds where the config c of an allocation is written: in
// the claim's spec (matched by its parameters), or in a DeviceClass.
func (r *runner) configLocation(ce *claimEval, result resourceapi.DeviceRequestAllocationResult, c resourceapi.DeviceAllocationConfiguration) (scheduler.Source, string, string) {
	if c.Source == resourceapi.AllocationConfigSourceClass {
		for _, cls := range r.requestClasses(ce, result.Request) {
			if o, ok := r.known[cls]; ok {
				for i, cc := range o.Obj.(*resourceapi.DeviceClass).Spec.Config {
					if cc.Opaque != nil && string(cc.Opaque.Parameters.Raw) == string(c.Opaque.Parameters.Raw) {
						return o.Source, "DeviceClass " + cls, fmt.Sprintf("spec.config[%d].opaque", i)
					}
				}
			}
		}
		return ce.source, ce.object, ce.field + ".devices"
	}
	for i, sc := range ce.claim.Spec.Devices.Config {
		if sc.Opaque != nil && string(sc.Opaque.Parameters.Raw) == string(c.Opaque.Parameters.Raw) {
			return ce.source, ce.object, fmt.Sprintf("%s.devices.config[%d].opaque", ce.field, i)
		}
	}
	return ce.source, ce.object, ce.field + ".devices.config"
}

// requestClasses returns the DeviceClass of a request ("name" or
// "name/subrequest").
func (r *runner) requestClasses(ce *claimEval, request string) []string {
	name, sub, _ := strings.Cut(request, "/")
	for _, req := range ce.claim.Spec.Devices.Requests {
		if req.Name != name {
			continue
		}
		if req.Exactly != nil {
			return []string{req.Exactly.DeviceClassName}
		}
		for _, alt := range req.FirstAvailable {
			if alt.Name == sub {
				return []string{alt.DeviceClassName}
			}
		}
	}
	return nil
}

func deviceID(result resourceapi.DeviceRequestAllocationResult) structured.DeviceID {
	return structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
}
