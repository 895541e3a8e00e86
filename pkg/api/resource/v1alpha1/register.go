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

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of gpudra's opaque device configuration.
const GroupName = "resource.gpudra.io"

// SchemeGroupVersion is the group and version of this package's kinds.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Kind names, as written in the "kind" field of the parameters.
const (
	GpuConfigKind = "GpuConfig"
	MigConfigKind = "MigConfig"
)

var (
	// SchemeBuilder registers this package's kinds with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's kinds to a scheme, for callers that
	// decode them together with other APIs.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypeWithName(SchemeGroupVersion.WithKind(GpuConfigKind), &GpuConfig{})
	scheme.AddKnownTypeWithName(SchemeGroupVersion.WithKind(MigConfigKind), &MigConfig{})
	return nil
}

// scheme holds only this package's kinds: Decode must not accept anything
// else as parameters, whatever other code registers elsewhere.
var scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		// Only a programming error (a kind registered twice with different
		// types) can get here.
		panic(err)
	}
	return s
}
