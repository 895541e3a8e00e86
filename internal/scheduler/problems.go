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

package scheduler

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ProblemKind classifies what decoding found wrong or worth saying about
// an input object.
type ProblemKind string

// The kinds of problems.
const (
	// ProblemUnknownField: a field the API server drops or rejects (strict
	// field validation), or one with no equivalent in resource.k8s.io/v1.
	ProblemUnknownField ProblemKind = "unknown-field"
	// ProblemInvalid: the API server rejects the object (an unknown kind in
	// a Kubernetes API group, a field of the wrong type, a missing kind).
	ProblemInvalid ProblemKind = "invalid"
	// ProblemExtendedResource: the API server rejects the pod (or the
	// workload) for an extended resource that is requested without a
	// limit, with a request other than its limit, or as a fraction.
	ProblemExtendedResource ProblemKind = "extended-resource"
	// ProblemSkipped (a note): an object of a kind this package does not
	// read, e.g. a custom resource; it is left out, and the note says what
	// it means for the check.
	ProblemSkipped ProblemKind = "skipped"
	// ProblemConverted (a note): a resource.k8s.io v1beta1 or v1beta2
	// object, read as the v1 object the API server would store.
	ProblemConverted ProblemKind = "converted"
)

// Problem is one thing decoding found: an error the API server would
// report, or a note.
type Problem struct {
	Kind   ProblemKind
	Note   bool // worth knowing, not an error
	Source Source
	Object string // "ResourceClaim default/gpu"
	// GVK is the object's apiVersion and kind as written.
	GVK     schema.GroupVersionKind
	Field   string
	Message string
	Hint    string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s: %s: %s", p.Source, p.Object, p.Message)
}

// InputError means the input cannot be used at all: an unreadable file,
// malformed YAML, a file without objects. Everything else is a Problem.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}
