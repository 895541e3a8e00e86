// Package admission validates gpudra's opaque device configs when a
// ResourceClaim, ResourceClaimTemplate or DeviceClass is created or
// changed, so that a misspelt field is rejected at `kubectl apply` with the
// field and the fix, instead of leaving a pod in ContainerCreating when the
// kubelet plugin meets the config at prepare time.
//
// It decodes with the config API's own entry point (v1alpha1.Decode), the
// one the plugin's prepare uses, so every field the API gains is validated
// here without a change to this package, and the webhook can never accept
// what the plugin would reject, nor reject what it would accept.
//
// Only configs whose opaque.driver is gpudra's driver name are read:
// other drivers' configs pass untouched. The object's JSON is read through
// the few fields the config sits under (spec.devices.config for a claim,
// spec.spec.devices.config for a template, spec.config for a class), which
// have the same shape in resource.k8s.io v1, v1beta2 and v1beta1, so one
// reader serves every version the API server may send.
//
// An UPDATE whose configs of this driver equal the old object's is allowed
// without decoding: otherwise an object created before the webhook was
// installed (or under an older gpudra) could never lose its finalizer, and
// could not be deleted.
//
// What the config's kind fits (GpuConfig for whole GPUs, MigConfig for MIG
// partitions) depends on the device the scheduler picks, so it is checked
// by the plugin at prepare, not here.
package admission
