// Package gpu is gpudra's device model: the GPUs of one node as plain data,
// and the grammar of the device names that gpudra publishes for them.
//
// It imports nothing of Kubernetes and nothing of NVML, so every other layer
// (the NVML backends below it, the slice builder and the node state above it)
// can agree on one description of the hardware.
package gpu
