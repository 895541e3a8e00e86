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

// Package policycel is the API server's CEL environment for the
// expressions of a ValidatingAdmissionPolicy, for the tests that evaluate
// gpudra's policies (the config policy's, the MPS pod policy's) without an
// API server. It is a package of its own, not part of gpudratest, so that
// only those tests link the API server's CEL libraries.
package policycel

import (
	"testing"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Env is the environment the API server compiles a policy's match
// conditions, variables, validations and message expressions in: its
// base library at the default compatibility version, with the variables
// object, oldObject, request and variables.
func Env(t testing.TB) *cel.Env {
	t.Helper()
	envSet, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable("object", cel.DynType),
			cel.Variable("oldObject", cel.DynType),
			cel.Variable("request", cel.DynType),
			cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := envSet.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
