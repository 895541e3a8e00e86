// Package simulate runs gpudra's whole node pipeline in one process, with no
// cluster: the real kubelet plugin serves its gRPC sockets in a temp dir and
// publishes ResourceSlices to a fake clientset; the real scheduler allocator
// (k8s.io/dynamic-resource-allocation/structured) allocates claims against
// those slices; a stand-in kubelet calls NodePrepareResources and
// NodeUnprepareResources over the socket; and the CDI specs on disk are
// injected into an OCI spec with the CDI library, to show what each container
// receives.
//
// `gpudra simulate` and the in-process integration tests both use it.
package simulate
