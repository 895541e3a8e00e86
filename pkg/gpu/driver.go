package gpu

// DefaultDriverName is the DRA driver name gpudra runs as unless told
// otherwise (--driver-name, the chart's driverName): the driver of its
// ResourceSlices, the domain of its attributes and capacities, the name of
// its whole-GPU DeviceClass, and the vendor of its CDI devices. The
// DeviceClasses in deviceclasses/ are written for it, and the chart and
// gpudra check substitute another name into them. It is defined here, in
// the device model every layer may import, and nowhere else.
const DefaultDriverName = "gpu.gpudra.io"
