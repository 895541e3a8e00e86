// Package check is gpudra check: the offline CEL selector and allocation
// harness. It reads DeviceClasses, ResourceClaimTemplates, ResourceClaims,
// Pods and ResourceSlices (or builds the inventory gpudra publishes on fake
// nodes through the plugin's own slice builder), compiles every selector as
// the API server does (k8s.io/dynamic-resource-allocation/cel, the
// NewExpressions environment, cost and length limits), evaluates each on
// every device, and allocates each pod's claims with the real scheduler
// allocator (k8s.io/dynamic-resource-allocation/structured) using the
// feature set of one Kubernetes version. What it finds comes back as a
// Report: located findings with hints, the devices each class and request
// matches, and each claim's allocation or why it can never be satisfied.
//
// The inventory drives the hints: an attribute "no device publishes" is one
// that no device of the inventory carries, so the checks hold for any
// driver, partitionable devices and shared counters included.
package check
