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
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpudra/gpudra/internal/claimplan"
	"github.com/gpudra/gpudra/internal/errorlist"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Result is what Review decided, for metrics and logs.
type Result string

const (
	// Allowed: every config of this driver decodes and validates, or the
	// object has none, or an UPDATE left them unchanged.
	Allowed Result = "allowed"
	// Denied: at least one config of this driver is invalid.
	Denied Result = "denied"
	// Errored: the review could not be judged (a kind this package does
	// not validate: the webhook configuration sends what it should not).
	// It is answered allowed=false, which the API server takes as a
	// denial whatever the failurePolicy: the policy applies only when a
	// call fails (no answer in time, an HTTP error, an unreadable answer).
	Errored Result = "error"
	// Refused: a request the API server never sends (past its limits, not
	// an AdmissionReview), or one that found no room among the reviews in
	// flight: answered with an HTTP error, not judged. For the API server
	// that is a failed call: its failurePolicy applies.
	Refused Result = "refused"
)

// configReference is where a user reads what the configs may hold.
const configReference = "https://github.com/gpudra/gpudra/blob/main/docs/attributes.md#device-configuration-resourcegpudraiov1alpha1"

// Validator checks the opaque configs of one DRA driver.
type Validator struct {
	// DriverName is the driver whose configs are validated; configs of
	// every other driver pass untouched.
	DriverName string
}

// request is what the webhook reads of an AdmissionRequest: its objects reduced
// to their configs, the rest to the few fields it names in answers and
// logs.
type request struct {
	UID       types.UID               `json:"uid"`
	Kind      metav1.GroupVersionKind `json:"kind"`
	Name      string                  `json:"name"`
	Namespace string                  `json:"namespace"`
	Operation admissionv1.Operation   `json:"operation"`
	UserInfo  struct {
		Username string `json:"username"`
	} `json:"userInfo"`
	Object    objectConfigs `json:"object"`
	OldObject objectConfigs `json:"oldObject"`
}

// check refuses what the API server never sends: names and UIDs past
// their limits (the configs' bounds are checked as they are read).
func (r *request) check() error {
	for _, f := range []struct{ name, value string }{
		{"uid", string(r.UID)}, {"name", r.Name}, {"namespace", r.Namespace},
		{"kind.group", r.Kind.Group}, {"kind.version", r.Kind.Version}, {"kind.kind", r.Kind.Kind},
		{"operation", string(r.Operation)},
	} {
		limit := maxNameBytes
		if f.name == "uid" {
			limit = maxUIDBytes
		}
		if len(f.value) > limit {
			return fmt.Errorf("request.%s of %d bytes, more than the API server sends (%d)", f.name, len(f.value), limit)
		}
	}
	return nil
}

// review judges a request read by the handler; ctx bounds the time it
// takes. It never returns nil.
func (v Validator) review(ctx context.Context, req *request) (*admissionv1.AdmissionResponse, Result) {
	resp := &admissionv1.AdmissionResponse{UID: req.UID}
	if req.Kind.Group != ResourceGroup {
		return errored(resp, fmt.Errorf("%s is not in API group %s", errorlist.Value(req.Kind.String()), ResourceGroup))
	}
	kind := req.Kind.Kind
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		resp.Allowed = true
		return resp, Allowed
	}
	configs, err := req.Object.configs(kind)
	if err != nil {
		return errored(resp, err)
	}
	configs = ofDriver(configs, v.DriverName)
	if len(configs) == 0 {
		resp.Allowed = true
		return resp, Allowed
	}
	if req.Operation == admissionv1.Update {
		old, err := req.OldObject.configs(kind)
		if err == nil && sameConfigs(ofDriver(old, v.DriverName), configs) {
			resp.Allowed = true
			return resp, Allowed
		}
	}

	causes, err := causesOf(ctx, configs)
	if err != nil {
		return errored(resp, err)
	}
	if len(causes) == 0 {
		resp.Allowed = true
		return resp, Allowed
	}
	msgs := make([]string, len(causes))
	for i, c := range causes {
		msgs[i] = c.Field + ": " + c.Message
	}
	resp.Result = &metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusUnprocessableEntity,
		Reason: metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("%s %s: invalid %s config for driver %s: %s (the fields gpudra's configs take: %s)",
			kind, objectName(req), configapi.SchemeGroupVersion, v.DriverName, strings.Join(msgs, "; "), configReference),
		Details: &metav1.StatusDetails{Name: req.Name, Group: ResourceGroup, Kind: kind, Causes: causes},
	}
	return resp, Denied
}

// causesOf decodes the configs and lists every problem of every config,
// up to maxCauses; past it, one cause says how many more there are, and
// configs after it are not decoded: a review full of bad configs costs a
// few decodes, not 32.
func causesOf(ctx context.Context, configs []opaqueConfig) ([]metav1.StatusCause, error) {
	var causes []metav1.StatusCause
	hidden, hiddenAtLeast, unchecked := 0, false, 0
	for i, c := range configs {
		if len(causes) >= maxCauses {
			unchecked = len(configs) - i
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("the review ran out of time: %w", err)
		}
		_, err := claimplan.DecodeConfig(c.parameters)
		if err == nil {
			continue
		}
		shown, total, atLeast := errorlist.Split(err)
		var rest int
		causes, rest = appendCauses(causes, c, shown, total)
		switch {
		case rest == 0 && !atLeast:
		case len(causes) < maxCauses:
			causes = append(causes, metav1.StatusCause{
				Type:    metav1.CauseTypeFieldValueInvalid,
				Field:   c.path.String() + ".parameters",
				Message: moreErrors(rest, atLeast),
			})
		default:
			hidden, hiddenAtLeast = hidden+rest, hiddenAtLeast || atLeast
		}
	}
	if hidden > 0 || hiddenAtLeast || unchecked > 0 {
		msg := "and possibly more errors"
		if hidden > 0 || hiddenAtLeast {
			msg = moreErrors(hidden, hiddenAtLeast)
		}
		if unchecked > 0 {
			msg += fmt.Sprintf(": the %d configs after these were not checked", unchecked)
		}
		causes = append(causes, metav1.StatusCause{
			Type:    metav1.CauseTypeFieldValueInvalid,
			Field:   configs[0].list.String(),
			Message: msg,
		})
	}
	return causes, nil
}

// appendCauses adds a config's errors (shown, of total) to causes while
// there is room, and returns how many of the config's errors are not
// listed.
func appendCauses(causes []metav1.StatusCause, c opaqueConfig, shown []error, total int) ([]metav1.StatusCause, int) {
	rest := total - len(shown) // this config's errors not listed
	for _, e := range shown {
		if len(causes) >= maxCauses {
			rest++
			continue
		}
		// The config API's errors start at "parameters"; put the
		// entry's own path in front so that the message leads to the
		// value.
		path, msg := splitPath(e.Error())
		causes = append(causes, metav1.StatusCause{
			Type:    metav1.CauseTypeFieldValueInvalid,
			Field:   c.path.String() + "." + path,
			Message: msg,
		})
	}
	return causes, rest
}

// errored answers a request that could not be judged.
func errored(resp *admissionv1.AdmissionResponse, err error) (*admissionv1.AdmissionResponse, Result) {
	resp.Allowed = false
	resp.Result = &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusBadRequest,
		Reason:  metav1.StatusReasonBadRequest,
		Message: "gpudra admission: " + err.Error(),
	}
	return resp, Errored
}

// moreErrors says how many errors a config had beyond those listed.
func moreErrors(more int, atLeast bool) string {
	if atLeast {
		return fmt.Sprintf("and at least %d more errors", more)
	}
	return fmt.Sprintf("and %d more errors", more)
}

// splitPath splits a config API error into the field path it starts with
// and the rest ("parameters.driverCapabilities[1]: Unsupported value: …"
// → "parameters.driverCapabilities[1]", "Unsupported value: …"). kubectl
// prints each cause as "<field>: <message>", so the message must not
// repeat the path.
func splitPath(msg string) (path, rest string) {
	if p, r, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(p, "parameters") && !strings.Contains(p, " ") {
		return p, r
	}
	return "parameters", msg
}

// objectName is namespace/name, or the name alone for a cluster-scoped
// object. A claim created from generateName has no name yet.
func objectName(req *request) string {
	name := req.Name
	if name == "" {
		name = "(generated name)"
	}
	if req.Namespace != "" {
		return req.Namespace + "/" + name
	}
	return name
}
