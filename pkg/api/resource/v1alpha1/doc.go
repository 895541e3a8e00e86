// Package v1alpha1 is the opaque device configuration API of gpudra,
// resource.gpudra.io/v1alpha1.
//
// Users put one of its kinds in a ResourceClaim (or ResourceClaimTemplate)
// under spec.devices.config[].opaque.parameters, with the driver set to
// gpudra's driver name (gpu.gpudra.io by default):
//
//	spec:
//	  devices:
//	    requests:
//	    - name: gpu
//	      exactly:
//	        deviceClassName: gpu.gpudra.io
//	    config:
//	    - requests: ["gpu"]
//	      opaque:
//	        driver: gpu.gpudra.io
//	        parameters:
//	          apiVersion: resource.gpudra.io/v1alpha1
//	          kind: GpuConfig
//	          driverCapabilities: ["compute", "utility", "video"]
//
// GpuConfig configures whole GPUs, MigConfig configures MIG partitions. The
// kubelet plugin and the admission controller both read parameters with
// Decode, which is strict: an unknown kind, an unknown or duplicated field, or
// a value of the wrong type is an error, so that a typo never silently falls
// back to a default.
//
// The types are written by hand, deep-copy functions included, because the
// project does not run Kubernetes' code generators; keep deepcopy.go in step
// with every field added.
//
// +groupName=resource.gpudra.io
package v1alpha1
