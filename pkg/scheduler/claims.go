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
