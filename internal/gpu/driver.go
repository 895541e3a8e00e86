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

// DefaultDriverName is the DRA driver name gpudra runs as unless told
// otherwise (--driver-name, the chart's driverName): the driver of its
// ResourceSlices, the domain of its attributes and capacities, the name of
// its whole-GPU DeviceClass, and the vendor of its CDI devices. The
// DeviceClasses in deviceclasses/ are written for it, and the chart and
// gpudra check substitute another name into them. It is defined here, in
// the device model every layer may import, and nowhere else.
const DefaultDriverName = "gpu.gpudra.io"
