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

// Package e2e is gpudra's end-to-end suite: it installs the Helm chart with the
// fake GPU backend on the cluster KUBECONFIG points at, runs every scenario
// against the real scheduler, kubelet and container runtime, asserts what the
// containers actually see, and uninstalls, leaving no claim, pod or CDI spec
// behind.
//
// It is built only with the e2e tag, so `go test ./...` never runs it:
//
//	KUBECONFIG=... go test -tags e2e -count=1 -v ./e2e/
//
// `make e2e-local` and `make e2e-kind` bring up a cluster and run it. The
// environment tells it about the cluster:
//
//	GPUDRA_E2E_HELM        helm binary (default: helm)
//	GPUDRA_E2E_KUBECTL     kubectl binary (default: kubectl)
//	GPUDRA_E2E_VALUES      extra chart values for this cluster: image,
//	                       kubeletDir, cdiDir, fakeStateDir (optional)
//	GPUDRA_E2E_TEST_IMAGE  image with busybox for the test pods
//	                       (default: localhost/busybox:e2e)
//	GPUDRA_E2E_PULL_POLICY pull policy of the test pods (default: Never)
//	GPUDRA_E2E_PROFILE     fake profile to install (default: dgx-h100)
//	GPUDRA_E2E_REPORT      file to append the measured timings to (optional)
package e2e
