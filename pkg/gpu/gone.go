package gpu

import "errors"

// ErrGPUGone is wrapped by the NVML layer's errors about a GPU that is no
// longer there: taken out of the node (NVML: ERROR_NOT_FOUND for its UUID)
// or fallen off the bus (ERROR_GPU_IS_LOST). Whatever ran on it is gone
// too: the reset or reboot that brings a lost GPU back destroys its MIG
// instances, so the node state counts them as destroyed.
var ErrGPUGone = errors.New("the GPU is gone (taken out of the node, or fallen off the bus)")
