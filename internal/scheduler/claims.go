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
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClaimFromTemplate is the claim the resourceclaim controller creates for
// a pod's claim entry that names a template: the template's spec, labels
// and annotations, named <pod>-<entry> (the controller adds a random
// suffix), in the pod's namespace, defaulted as the API server does.
func ClaimFromTemplate(pod *v1.Pod, entry string, tmpl *resourceapi.ResourceClaimTemplate) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   pod.Namespace,
			Name:        pod.Name + "-" + entry,
			Labels:      tmpl.Spec.Labels,
			Annotations: tmpl.Spec.Annotations,
		},
		Spec: *tmpl.Spec.Spec.DeepCopy(),
	}
	DefaultClaimSpec(&claim.Spec)
	return claim
}
