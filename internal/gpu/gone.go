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

package gpu

import "errors"

// ErrGPUGone is wrapped by the NVML layer's errors about a GPU that is no
// longer there: taken out of the node (NVML: ERROR_NOT_FOUND for its UUID)
// or fallen off the bus (ERROR_GPU_IS_LOST). Whatever ran on it is gone
// too: the reset or reboot that brings a lost GPU back destroys its MIG
// instances, so the node state counts them as destroyed.
var ErrGPUGone = errors.New("the GPU is gone (taken out of the node, or fallen off the bus)")
